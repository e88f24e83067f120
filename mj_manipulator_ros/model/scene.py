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
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import mujoco
import numpy as np

from mj_manipulator_ros.core.config import ArmConfig, ExecutorConfig
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.arm_binding import ActuatorKind, ArmBinding, bind_arm, joint_actuator
from mj_manipulator_ros.model.physics_check import choose_timestep
from mj_manipulator_ros.model.scene_config import SceneConfig, scene_config
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
        child = mujoco.MjSpec.from_file(str(resolve_model(m.file, base_dir)))
        frame = parent.worldbody.add_frame(pos=list(m.pos), quat=list(m.quat))
        with _quiet_attach():
            parent.attach(child, prefix=m.prefix, frame=frame)
    return parent


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


@dataclass
class Scene:
    """A compiled scene with its arms bound. Build with :meth:`from_config` or :func:`scene_for`.

    Attributes:
        model: the compiled model (timestep chosen, gravity compensation applied).
        arms: arm name -> binding, in configuration order.
        initial_qpos: the start pose, shape (nq,).
        control_period: the control period the timestep was chosen for, s.
    """

    model: mujoco.MjModel
    arms: dict[str, ArmBinding]
    initial_qpos: np.ndarray
    control_period: float

    @classmethod
    def from_config(cls, scene: SceneConfig, arms: Sequence[ArmConfig], control_period: float = 0.002,
                    gravity_compensation: bool = False) -> "Scene":
        """Compose and compile ``scene``, bind ``arms``, choose the timestep.

        Args:
            scene: the scene section (models, options, initial positions, timestep).
            arms: the arms to bind (joints in controller order).
            control_period: s; ``timestep: auto`` picks a step dividing it.
            gravity_compensation: cancel gravity on every arm body (``body_gravcomp``).
        """
        spec = compose_spec(scene, scene.base_dir)
        with _quiet_attach():
            model = spec.compile()
        bound = {a.name: bind_arm(model, a) for a in arms}
        if gravity_compensation:
            # gravity compensation is sized at compile time: mark the arms' bodies, recompile
            for arm in bound.values():
                for b in arm.body_ids:
                    spec.body(model.body(b).name).gravcomp = 1.0
            with _quiet_attach():
                model = spec.compile()
            bound = {a.name: bind_arm(model, a) for a in arms}
        qpos = model.qpos0.copy()
        for joint, value in scene.initial_positions.items():
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
            if jid < 0:
                raise ConfigError(f"scene.initial_positions: joint {joint!r} is not in the model")
            if model.jnt_limited[jid] and not (model.jnt_range[jid, 0] <= value <= model.jnt_range[jid, 1]):
                raise ConfigError(f"scene.initial_positions.{joint}: {value} is outside the joint "
                                  f"range {model.jnt_range[jid].tolist()}")
            qpos[model.jnt_qposadr[jid]] = value
        if scene.timestep == "auto":
            model.opt.timestep = choose_timestep(model, bound.values(), qpos, control_period)
        else:
            model.opt.timestep = float(scene.timestep)
        return cls(model, bound, qpos, control_period)

    def initial_data(self) -> mujoco.MjData:
        """A fresh MjData at the initial pose, every position servo holding its joint there
        (other actuators' ``ctrl`` stays 0)."""
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
        mujoco.mj_forward(self.model, data)
        return data


def scene_for(config: ExecutorConfig, control_period: float = 0.002,
              gravity_compensation: bool = False) -> Scene:
    """The scene of a configuration's ``scene`` section (required) with its arms bound: what the
    replay check and the offline bring-up stage need (kinematics only)."""
    return Scene.from_config(scene_config(config, required=True), config.arms, control_period,
                             gravity_compensation)
