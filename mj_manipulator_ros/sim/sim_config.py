"""The ``scene`` and ``sim`` sections of a configuration file (see docs/simulator.md).

::

    scene:
      timestep: auto            # or seconds; auto = largest control_period/2^j passing every servo
      option: {cone: elliptic, impratio: 10, integrator: implicitfast}
      floor: true
      models:
        - {file: "openarm:v2/pedestal/openarm_pedestal.xml", prefix: "", pos: [0, 0, 0]}
      initial_positions: {openarm_left_joint4: 0.3}
    sim:
      control_rate_hz: 500
      real_time_factor: 1.0
      faults: {left: {abort_after_s: 0.5}}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.core.schema import from_mapping


@dataclass(frozen=True)
class SceneModel:
    file: str = field(metadata={"doc": "MJCF file or package:path reference (resources.py)"})
    prefix: str = field(default="", metadata={"doc": "prepended to every name of the model"})
    pos: tuple[float, ...] = field(default=(0.0, 0.0, 0.0), metadata={"doc": "base position, m"})
    quat: tuple[float, ...] = field(default=(1.0, 0.0, 0.0, 0.0), metadata={"doc": "base orientation (w x y z)"})


@dataclass(frozen=True)
class SceneOption:
    cone: str = field(default="elliptic", metadata={"doc": "pyramidal | elliptic"})
    impratio: float = field(default=10.0, metadata={"min": 1.0})
    integrator: str = field(default="implicitfast", metadata={"doc": "euler | rk4 | implicit | implicitfast"})


@dataclass(frozen=True)
class SceneConfig:
    models: tuple[SceneModel, ...]
    timestep: Union[str, float] = "auto"
    option: SceneOption = SceneOption()
    floor: bool = True
    initial_positions: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ArmFaults:
    """Injected faults of one simulated arm (for tests and HIL rehearsal)."""

    reject_next_goal: bool = field(default=False, metadata={"doc": "reject the next goal (once)"})
    abort_after_s: Optional[float] = field(default=None, metadata={
        "doc": "abort every goal this long after its start, error_code -4", "min": 0.0})
    stall: bool = field(default=False, metadata={"doc": "accept goals, never finish them (hold)"})
    accept_delay_s: float = field(default=0.0, metadata={"doc": "delay before accepting", "min": 0.0})
    command_latency_s: float = field(default=0.0, metadata={
        "doc": "position commands reach the servos this late (a delay line)", "min": 0.0})
    ignore_cancel: bool = field(default=False, metadata={
        "doc": "refuse cancels and keep moving (a controller that does not stop)"})
    exit_after_s: Optional[float] = field(default=None, metadata={
        "doc": "this arm's controller stops responding this long after a goal starts", "min": 0.0})


@dataclass(frozen=True)
class ToleranceDefaults:
    """Defaults used where a goal's tolerance is 0. A default of 0 means unchecked (as JTC)."""

    path_position: float = field(default=0.0, metadata={"doc": "rad/m; 0 = unchecked", "min": 0.0})
    path_velocity: float = field(default=0.0, metadata={"doc": "per s; 0 = unchecked", "min": 0.0})
    goal_position: float = field(default=0.05, metadata={"doc": "rad/m; 0 = unchecked", "min": 0.0})
    goal_velocity: float = field(default=0.0, metadata={"doc": "per s; 0 = unchecked", "min": 0.0})
    goal_time: float = field(default=1.0, metadata={
        "doc": "s after the end to reach goal tolerance; 0 = wait forever", "min": 0.0})


@dataclass(frozen=True)
class SimSettings:
    control_rate_hz: float = field(default=500.0, metadata={"min": 1.0})
    feedback_rate_hz: float = field(default=20.0, metadata={"min": 0.1})
    joint_state_rate_hz: float = field(default=100.0, metadata={"min": 0.1})
    real_time_factor: float = field(default=1.0, metadata={
        "doc": "1 = real time, 2 = twice as fast, 0 = as fast as possible", "min": 0.0})
    use_sim_time: bool = field(default=False, metadata={"doc": "publish /clock; stamps on sim time"})
    gravity_compensation: bool = field(default=True, metadata={
        "doc": "cancel gravity on every arm body (MuJoCo body_gravcomp), as a real arm's "
               "controller does with gravity feed-forward; off, the P servos sag"})
    allow_partial_joints_goal: bool = False
    allow_nonzero_velocity_at_trajectory_end: bool = False
    tolerances: ToleranceDefaults = ToleranceDefaults()
    faults: Mapping[str, ArmFaults] = field(default_factory=dict)


@dataclass(frozen=True)
class SimConfig:
    executor: ExecutorConfig
    scene: SceneConfig
    sim: SimSettings


DEFAULT_SCENE = {"models": [{"file": "openarm:v2/pedestal/openarm_pedestal.xml"}]}


def sim_config(config: ExecutorConfig) -> SimConfig:
    """Read the scene and sim sections of an executor configuration (validated strictly)."""
    scene_raw = dict(config.extra.get("scene") or DEFAULT_SCENE)
    initial = scene_raw.pop("initial_positions", None) or {}
    scene = from_mapping(SceneConfig, scene_raw, "scene")
    if isinstance(scene.timestep, str) and scene.timestep != "auto":
        raise ConfigError(f"scene.timestep: expected 'auto' or seconds, got {scene.timestep!r}")
    if not isinstance(scene.timestep, str) and not scene.timestep > 0:
        raise ConfigError(f"scene.timestep: must be > 0, got {scene.timestep}")
    if not isinstance(initial, Mapping):
        raise ConfigError(f"scene.initial_positions: expected joint -> position, got {initial!r}")
    scene = SceneConfig(scene.models, scene.timestep, scene.option, scene.floor,
                        {str(k): float(v) for k, v in initial.items()})
    sim_raw = dict(config.extra.get("sim") or {})
    faults_raw = sim_raw.pop("faults", None) or {}
    settings = from_mapping(SimSettings, sim_raw, "sim")
    faults = {}
    for arm, f in faults_raw.items():
        if arm not in config.arm_names:
            raise ConfigError(f"sim.faults: unknown arm {arm!r}; arms: {list(config.arm_names)}")
        faults[arm] = from_mapping(ArmFaults, f, f"sim.faults.{arm}")
    settings = SimSettings(**{**settings.__dict__, "faults": faults})
    return SimConfig(config, scene, settings)
