"""Scene composition: arm models attached under their prefixes and base poses, one MjModel.

Each entry of ``scene.models`` is an MJCF file attached with ``MjSpec.attach`` into an empty
parent spec at its own frame (position, quaternion) and name prefix, so any number of arms of any
MJCF model can share one scene. Solver options are set on the parent (``attach`` does not carry
them). Arms are then bound by name: every configured arm joint must exist in the composed model;
its actuators are reported with their kind (what a simulated controller needs of them is the
controller's business, see ``sim/controllers``).

Names are resolved to indices once, here; everything downstream uses :class:`ArmBinding`.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import mujoco
import numpy as np

from mj_manipulator_ros.core.config import ArmConfig, ExecutorConfig
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.arm_binding import ActuatorKind, ArmBinding, bind_arm, joint_actuator
from mj_manipulator_ros.model.mass_overlay import overlay_spec, read_overlay
from mj_manipulator_ros.model.scene_config import SceneConfig, scene_config
from mj_manipulator_ros.model.step_caps import StepChoice, choose_step
from mj_manipulator_ros.model.torque_drive import add_torque_drive
from mj_manipulator_ros.model.exchange import (ExchangeChoice, ExchangeMode, choose_exchange,
                                              exchange_stability)
from mj_manipulator_ros.model.twin_model import TwinJoints, check_twin_owned, make_twin_owned
from mj_manipulator_ros.resources import resolve_model

log = logging.getLogger(__name__)

_CONES = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}
_INTEGRATORS = {"euler": mujoco.mjtIntegrator.mjINT_EULER, "rk4": mujoco.mjtIntegrator.mjINT_RK4,
                "implicit": mujoco.mjtIntegrator.mjINT_IMPLICIT,
                "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST}


def compose_spec(scene: SceneConfig, base_dir: Path | None = None) -> mujoco.MjSpec:
    """The parent spec with every model attached (not compiled)."""
    parent = mujoco.MjSpec()
    parent.modelname = "mj_manipulator_scene"
    parent.option.cone = _choice(_CONES, scene.option.cone, "scene.option.cone")
    parent.option.integrator = _choice(_INTEGRATORS, scene.option.integrator, "scene.option.integrator")
    parent.option.impratio = scene.option.impratio
    parent.worldbody.add_light(pos=[0, 0, 3], dir=[0, 0, -1],
                               type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
    if scene.floor:
        parent.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[3, 3, 0.05],
                                  rgba=[0.35, 0.37, 0.4, 1])
    for i, m in enumerate(scene.models):
        if len(m.pos) != 3 or len(m.quat) != 4:
            raise ConfigError(f"scene.models[{i}]: pos needs 3 values and quat 4, got "
                              f"{list(m.pos)} and {list(m.quat)}")
        path = resolve_model(m.file, base_dir)
        child = mujoco.MjSpec.from_file(str(path))
        _absolute_assets(child, Path(path).resolve().parent)
        frame = parent.worldbody.add_frame(pos=list(m.pos), quat=list(m.quat))
        with _quiet_attach():
            parent.attach(child, prefix=m.prefix, frame=frame)
    if scene.mass_overlay:
        path = Path(scene.mass_overlay)
        path = path if path.is_absolute() or base_dir is None else base_dir / path
        overlay_spec(parent, read_overlay(path), f"scene.mass_overlay {str(path)!r}")
    return parent


def _absolute_assets(child: mujoco.MjSpec, model_dir: Path) -> None:
    """Asset files by absolute path, so the composed scene's XML (:meth:`Scene.xml`) loads from
    anywhere (the child's meshdir/texturedir do not survive the attach)."""
    for assets, sub in ((child.meshes, child.meshdir), (child.hfields, child.meshdir),
                        (child.textures, child.texturedir)):
        for asset in assets:
            if asset.file and not Path(asset.file).is_absolute():
                asset.file = str((model_dir / (sub or "") / asset.file).resolve())
    child.meshdir = child.texturedir = ""


@contextlib.contextmanager
def _quiet_attach():
    """Attach warnings are expected: option conflicts (the parent's options win, by design) and
    an empty prefix (how the OpenArm joints keep their ros2_control names). Log them at debug."""
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(lambda msg: log.debug("mujoco: %s", msg.strip()))
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Attach")
            yield
    finally:
        mujoco.set_mju_user_warning(previous)


def compile_scene(scene: SceneConfig, base_dir: Path | None = None) -> mujoco.MjModel:
    spec = compose_spec(scene, base_dir)
    with _quiet_attach():
        return spec.compile()


def _choice(table: dict, value: str, path: str):
    if value not in table:
        raise ConfigError(f"{path}: expected one of {sorted(table)}, got {value!r}")
    return table[value]


class GravityCompensation(str, enum.Enum):
    """How the simulated arms carry their weight."""

    ACTUATOR = "actuator"   # through each joint's actuators (actgravcomp): in the effort, clamped
    BODY = "body"           # body_gravcomp: a passive force, free, not in the effort
    OFF = "off"             # none: position servos sag


@dataclass
class Scene:
    """A compiled scene with its arms bound. Build with :meth:`from_config` or :func:`scene_for`.

    Attributes:
        model: the compiled model (timestep chosen, gravity compensation and actuator delays
            applied).
        arms: arm name -> binding, in configuration order.
        initial_qpos: the start pose, shape (nq,).
        control_period: the control period the timestep was chosen for, s.
        step: the physics step and the caps behind it.
        spec: the spec ``model`` was compiled from (see :meth:`xml`).
        config: the scene section it was built from.
        torque_arms: the arms given a torque drive (``model/torque_drive.py``).
        twin: under co-simulation, arm -> what its joints had before the twin took them.
        exchange: under co-simulation, the twin-MuJoCo exchange rate and its stability bounds
            (MuJoCo's integrator then never runs: ``step`` is what it would have used).
    """

    model: mujoco.MjModel
    arms: dict[str, ArmBinding]
    initial_qpos: np.ndarray
    control_period: float
    step: StepChoice
    spec: mujoco.MjSpec
    config: SceneConfig | None = None
    torque_arms: tuple[str, ...] = ()
    twin: dict[str, TwinJoints] = field(default_factory=dict)
    exchange: ExchangeChoice | None = None

    @classmethod
    def from_config(cls, scene: SceneConfig, arms: Sequence[ArmConfig], control_period: float = 0.002,
                    gravity: GravityCompensation = GravityCompensation.OFF,
                    actuator_delays: Mapping[str, float] | None = None,
                    torque: Mapping[str, str] | None = None, twin: bool = False,
                    exchange_hz: float | str = "auto",
                    exchange_mode: ExchangeMode = ExchangeMode.MASS_MATRIX) -> "Scene":
        """Compose and compile ``scene``, bind ``arms``, choose the physics step.

        Args:
            scene: the scene section (models, options, initial positions, timestep, gap).
            arms: the arms to bind (joints in controller order).
            control_period: s; ``timestep: auto`` picks a step dividing it.
            gravity: how the arms' weight is carried (see :class:`GravityCompensation`).
            actuator_delays: arm name -> s: MuJoCo's own actuator delay on every actuator of that
                arm's joints (a command reaches the joint this much later, to the physics step).
            torque: arm name -> servo nulling ("disable" | "full"): the arms driven in torque
                (a motor and a torque sensor per joint; no gravity compensation: their
                controller's feed-forward carries the weight).
            twin: the twin-owned variant for co-simulation (``model/twin_model.py``): armature,
                joint friction, actuators and gravity compensation removed, fingers welded;
                excludes ``torque`` and actuator delays.
            exchange_hz: with ``twin``: the exchange rate, or "auto" (the stability pre-check's
                lowest passing rate; see :func:`~mj_manipulator_ros.model.exchange.choose_exchange`).
            exchange_mode: with ``twin``: what the exchange carries (``model/exchange.py``).
        """
        spec = compose_spec(scene, scene.base_dir)
        with _quiet_attach():
            model = spec.compile()
        bound = {a.name: bind_arm(model, a) for a in arms}
        qpos = _initial_qpos(model, scene)
        speeds = {j: lim.velocity for a in arms for j, lim in a.joint_limits.items()
                  if lim.velocity}
        pinned = None if scene.timestep == "auto" else float(scene.timestep)
        step = choose_step(model, bound.values(), qpos, control_period, pinned, speeds, scene.contact_gap)
        log.info("%s", step.summary())
        spec.option.timestep = step.timestep
        gravity = GravityCompensation(gravity)
        torque = dict(torque or {})
        unknown = sorted(set(torque) - set(bound))
        if unknown:
            raise ConfigError(f"torque drive for unknown arm(s) {unknown}; arms: {list(bound)}")
        if twin:
            return cls._twin_owned(spec, model, bound, arms, scene, control_period, step, torque,
                                   actuator_delays, exchange_hz, ExchangeMode(exchange_mode))
        if gravity is not GravityCompensation.OFF:
            _compensate_gravity(spec, model, [b for n, b in bound.items() if n not in torque],
                                gravity)
        for arm_name, nulling in torque.items():
            add_torque_drive(spec, model, bound[arm_name], nulling)
        for arm_name, delay in (actuator_delays or {}).items():
            if delay > 0:
                _delay_actuators(spec, bound[arm_name], delay, step.timestep)
        with _quiet_attach():
            model = spec.compile()
        bound = {a.name: bind_arm(model, a) for a in arms}
        return cls(model, bound, qpos, control_period, step, spec, scene, tuple(torque))

    @classmethod
    def _twin_owned(cls, spec, model, bound, arms, scene, control_period, step, torque,
                    delays, exchange_hz, mode) -> "Scene":
        if torque:
            raise ConfigError(f"arms {sorted(torque)}: a torque drive under co-simulation; the "
                              "actuator twin drives every arm joint")
        delayed = sorted(a for a, s in (delays or {}).items() if s > 0)
        if delayed:
            raise ConfigError(f"sim.faults.<arm>.command_latency_s for {delayed}: MuJoCo's "
                              "actuator delay, and under co-simulation the model has no actuators")
        joints = make_twin_owned(spec, model, bound)
        with _quiet_attach():
            model = spec.compile()
        bound = {a.name: bind_arm(model, a) for a in arms}
        check_twin_owned(model, bound)
        names = [j for a in bound.values() for j in a.joint_names]
        inertia = np.concatenate([joints[a].armature for a in bound])
        bad = [n for n, j in zip(names, inertia) if not j > 0]
        if bad:
            raise ConfigError(f"sim.physics cosim: joint(s) {bad} have no armature in the robot "
                              "file; the actuator twin takes its rotor inertia from it")
        qpos = _initial_qpos(model, scene)
        dofs = np.concatenate([a.dof_adr for a in bound.values()])
        exchange = choose_exchange(control_period,
                                   exchange_stability(model, qpos, dofs, inertia, mode),
                                   exchange_hz, mode)
        log.info("%s", exchange.summary())
        return cls(model, bound, qpos, control_period, step, spec, scene, (), joints, exchange)

    def physics_summary(self) -> str:
        """One line on what integrates the scene: the physics step and its binding cap, or the
        co-simulation's exchange."""
        return self.exchange.summary() if self.exchange else self.step.summary()

    def xml(self) -> str:
        """The composed scene as one MJCF document (timestep, gravity compensation and delays
        included; meshes referenced by absolute path): what a record keeps to reproduce the run."""
        with _quiet_attach():
            return self.spec.to_xml()

    def save(self, xml_path: Path) -> dict:
        """Write the composed scene to ``xml_path``; return what a record keeps about the physics:
        ``{"scene_xml": file name, "physics_step": the step choice}``."""
        xml_path = Path(xml_path)
        xml_path.write_text(self.xml())
        out = {"scene_xml": xml_path.name, "physics_step": self.step.to_dict()}
        if self.exchange:
            out["cosim_exchange"] = self.exchange.to_dict()
        return out

    def artifacts(self) -> dict[str, str]:
        """What a bag keeps about the model: ``scene_xml``, ``physics_step`` and, under
        co-simulation, ``cosim_exchange`` (JSON)."""
        out = {"scene_xml": self.xml(), "physics_step": json.dumps(self.step.to_dict())}
        if self.exchange:
            out["cosim_exchange"] = json.dumps(self.exchange.to_dict())
        return out

    def initial_data(self) -> mujoco.MjData:
        """A fresh MjData at the initial pose, every position servo holding its joint there
        (other actuators' ``ctrl`` stays 0); delayed actuators' histories hold that command."""
        data = mujoco.MjData(self.model)
        data.qpos[:] = self.initial_qpos
        for a in range(self.model.nu):
            if self.model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT and \
                    joint_actuator(self.model, a).kind is ActuatorKind.POSITION:
                j = self.model.actuator_trnid[a, 0]
                data.ctrl[a] = data.qpos[self.model.jnt_qposadr[j]]
        if self.model.nu:
            lo, hi = self.model.actuator_ctrlrange[:, 0], self.model.actuator_ctrlrange[:, 1]
            limited = self.model.actuator_ctrllimited.astype(bool)
            data.ctrl[limited] = np.clip(data.ctrl[limited], lo[limited], hi[limited])
        for a in np.flatnonzero(self.model.actuator_history[:, 0] > 0):
            n = int(self.model.actuator_history[a, 0])
            mujoco.mj_initCtrlHistory(self.model, data, int(a), None, np.full((n, 1), data.ctrl[a]))
        mujoco.mj_forward(self.model, data)
        return data


def _initial_qpos(model: mujoco.MjModel, scene: SceneConfig) -> np.ndarray:
    qpos = model.qpos0.copy()
    for joint, value in scene.initial_positions.items():
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
        if jid < 0:
            raise ConfigError(f"scene.initial_positions: joint {joint!r} is not in the model")
        if model.jnt_limited[jid] and not (model.jnt_range[jid, 0] <= value <= model.jnt_range[jid, 1]):
            raise ConfigError(f"scene.initial_positions.{joint}: {value} is outside the joint "
                              f"range {model.jnt_range[jid].tolist()}")
        qpos[model.jnt_qposadr[jid]] = value
    return qpos


def _compensate_gravity(spec: mujoco.MjSpec, model: mujoco.MjModel, arms, mode) -> None:
    """Mark the arms' bodies for gravity compensation; with ACTUATOR, route it through each arm
    joint's actuators (``actgravcomp``), the joint's actuator force range (or, when the joint has
    none, the sum of its actuators' force ranges, moved onto the joint) clamping the sum."""
    for arm in arms:
        for b in arm.body_ids:
            spec.body(model.body(b).name).gravcomp = 1.0
        if mode is not GravityCompensation.ACTUATOR:
            continue
        for k, name in enumerate(arm.joint_names):
            joint = spec.joint(name)
            joint.actgravcomp = True
            jid = int(arm.joint_ids[k])
            acts = [a.id for a in arm.actuators[k]]
            if model.jnt_actfrclimited[jid] or not acts or \
                    not all(model.actuator_forcelimited[a] for a in acts):
                continue
            gear = [abs(float(model.actuator_gear[a, 0])) for a in acts]
            lo = sum(float(model.actuator_forcerange[a, 0]) * g for a, g in zip(acts, gear))
            hi = sum(float(model.actuator_forcerange[a, 1]) * g for a, g in zip(acts, gear))
            joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_TRUE
            joint.actfrcrange = [lo, hi]


def _delay_actuators(spec: mujoco.MjSpec, arm: ArmBinding, delay: float, timestep: float) -> None:
    """MuJoCo's actuator delay on every actuator of the arm's joints, in the spec (servos, and
    the motors of a torque drive), added to any delay the file gives them; the history holds
    enough samples for the whole delay."""
    joints = set(arm.joint_names)
    for act in spec.actuators:
        if act.trntype == mujoco.mjtTrn.mjTRN_JOINT and act.target in joints:
            act.delay = float(act.delay) + delay
            act.nsample = max(int(act.nsample), int(math.ceil(act.delay / timestep)) + 2)


def scene_for(config: ExecutorConfig, control_period: float = 0.002,
              gravity: GravityCompensation = GravityCompensation.OFF) -> Scene:
    """The scene of a configuration's ``scene`` section (required) with its arms bound: what the
    replay check and the offline bring-up stage need (kinematics only)."""
    return Scene.from_config(scene_config(config, required=True), config.arms, control_period,
                             gravity)
