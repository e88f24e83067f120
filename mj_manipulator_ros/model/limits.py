"""Joint limits read from the MuJoCo model (``joint_limits: from_model`` in a configuration).

:func:`mj_manipulator_ros.core.config.load_config` returns plain values and only records that an
arm wants its limits from the model; every program entry point applies :func:`with_model_limits`
(or :func:`load_config_with_model`). Validation refuses an arm whose limits were never resolved.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mujoco

from mj_manipulator_ros.core.config import ExecutorConfig, JointLimit, load_config
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.scene import compile_scene
from mj_manipulator_ros.model.scene_config import scene_config


def with_model_limits(config: ExecutorConfig) -> ExecutorConfig:
    """The configuration with every ``joint_limits: from_model`` arm's limits read from the
    scene: position limits from the joint ranges (unlimited joints stay unbounded); velocity
    limits (which MJCF does not have) from the arm's ``max_velocity``, if given. A
    configuration without such arms is returned unchanged (no model is compiled).

    Raises:
        ConfigError: no ``scene`` section, or a joint that is not in the model.
    """
    wanted = [a.name for a in config.arms if a.limits_from_model]
    if not wanted:
        return config
    if "scene" not in config.extra:
        raise ConfigError(f"arms {wanted}: joint_limits: from_model needs a 'scene' section (the "
                          "MuJoCo model to read the joint ranges from)")
    scene = scene_config(config)
    model = compile_scene(scene, scene.base_dir)
    arms = []
    for arm in config.arms:
        if not arm.limits_from_model:
            arms.append(arm)
            continue
        vmax = arm.max_velocity
        limits = {}
        for j in arm.joint_names:
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j)
            if jid < 0:
                raise ConfigError(f"arm {arm.name!r}: joint {j!r} is not in the scene model, so its "
                                  "limits cannot come from it")
            lo, hi = (model.jnt_range[jid] if model.jnt_limited[jid] else (None, None))
            limits[j] = JointLimit(None if lo is None else float(lo), None if hi is None else float(hi),
                                   None if vmax is None else float(vmax), None)
        arms.append(dataclasses.replace(arm, joint_limits=limits, limits_from_model=False))
    return dataclasses.replace(config, arms=tuple(arms))


def load_config_with_model(path: str | Path) -> ExecutorConfig:
    """:func:`load_config` then :func:`with_model_limits`: what a program entry point loads."""
    config = load_config(path)
    try:
        return with_model_limits(config)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
