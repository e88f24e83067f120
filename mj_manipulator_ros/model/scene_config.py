"""The ``scene`` section of a configuration file: which MJCF models make the scene, where.

::

    scene:
      timestep: auto            # or seconds; auto = largest control_period/2^j passing every step cap
      contact_gap: 0.005        # m (the link_gap cap)
      option: {cone: elliptic, impratio: 10, integrator: implicitfast}
      floor: true
      models:
        - {file: "openarm:v2/pedestal/openarm_pedestal.xml", prefix: "", pos: [0, 0, 0]}
      initial_positions: {openarm_left_joint4: 0.3}
      allowed_collisions:       # body pairs the replay check skips, besides the generated matrix
        - {a: openarm_left_link5, b: openarm_left_ee_base_link, reason: "wrist cover, measured"}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Union

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.core.schema import convert, from_mapping


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
    """The scene; ``base_dir`` resolves relative model paths (the config file's folder)."""

    models: tuple[SceneModel, ...]
    timestep: Union[str, float] = field(default="auto", metadata={
        "doc": "physics step, s, or auto: the largest control_period/2^j passing every step cap"})
    contact_gap: float = field(default=0.005, metadata={
        "doc": "m: the farthest a collision point may travel in one physics step (link_gap cap)",
        "min": 1e-6})
    option: SceneOption = SceneOption()
    floor: bool = field(default=True, metadata={
        "doc": "add a 6 m x 6 m ground plane at z = 0 under the models (checked for collisions "
               "like any geom of the scene); false when the model brings its own ground "
               "(init-config decides: a plane, or a world-fixed geom with its top at z = 0)"})
    initial_positions: Mapping[str, float] = field(default_factory=dict)
    allowed_collisions: tuple[Mapping[str, str], ...] = field(default=(), metadata={
        "doc": "[{a: BODY, b: BODY, reason: TEXT}]: pairs the replay check skips, added to the "
               "matrix generated from the model (model/allowed_collisions.py); every check that "
               "skips one says so"})
    mass_overlay: str = field(default="", metadata={
        "doc": "JSON file of measured body masses and centres of mass (model/mass_overlay.py; "
               "the bring-up's load fit writes one), applied to the scene's model before "
               "anything compiles it; relative to the configuration file; empty: the model's "
               "own"})
    base_dir: Optional[Path] = field(default=None, metadata={"internal": True})


DEFAULT_SCENE = {"models": [{"file": "openarm:v2/pedestal/openarm_pedestal.xml"}]}


def scene_config(config: ExecutorConfig, required: bool = False) -> SceneConfig:
    """The ``scene`` section of an executor configuration, validated strictly (the OpenArm
    pedestal pair when there is none, unless ``required``)."""
    if required and "scene" not in config.extra:
        raise ConfigError(f"{config.source or 'the configuration'}: needs a 'scene' section (the "
                          "MuJoCo model of the robot)")
    raw = dict(config.extra.get("scene") or DEFAULT_SCENE)
    initial = raw.pop("initial_positions", None) or {}
    allowed = raw.pop("allowed_collisions", None) or []
    if not isinstance(allowed, (list, tuple)) or not all(isinstance(e, Mapping) for e in allowed):
        raise ConfigError(f"scene.allowed_collisions: expected a list of {{a: BODY, b: BODY, "
                          f"reason: TEXT}}, got {allowed!r}")
    scene = from_mapping(SceneConfig, raw, "scene")
    if isinstance(scene.timestep, str) and scene.timestep != "auto":
        raise ConfigError(f"scene.timestep: expected 'auto' or seconds, got {scene.timestep!r}")
    if not isinstance(scene.timestep, str) and not scene.timestep > 0:
        raise ConfigError(f"scene.timestep: must be > 0, got {scene.timestep}")
    if not isinstance(initial, Mapping):
        raise ConfigError(f"scene.initial_positions: expected joint -> position, got {initial!r}")
    base = Path(config.source).resolve().parent if config.source else None
    return SceneConfig(scene.models, scene.timestep, scene.contact_gap, scene.option, scene.floor,
                       {str(k): convert(v, float, f"scene.initial_positions.{k}")
                        for k, v in initial.items()}, tuple(dict(e) for e in allowed),
                       scene.mass_overlay, base)
