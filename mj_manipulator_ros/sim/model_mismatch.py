"""The simulated arm heavier or lighter than the model the checks use (injected faults).

``sim.faults.<arm>``: ``link_mass_scale`` (joint -> k: the link the joint moves, its child body,
weighs k times the model's mass, its rotational inertia scaled alike, its centre of mass where
the model has it) and ``payload_kg`` at ``payload_offset_m`` in the frame of the arm's last
link (the body its last joint moves): a point mass added to that body, which moves the body's
centre of mass to the combined one (the point mass's own inertia about it, m d^2, is not added:
the statics are exact, the dynamics of a payload near the body's centre nearly so).

Applied once, to the simulator's own copy of the model (``SharedModel``): the scene the
bring-up and the executor weigh the arm with keeps the nominal masses, as the robot's URDF
does while the real arm carries more (openarm_description#49, openarm_ros2#72).

The fault is the simulated arm's truth, stated against the robot's description (its MJCF):
where the configuration names a measured load (``scene.mass_overlay``, which the checks then
carry), the simulated arm's bodies the overlay corrects are first set back to the
description's, then the fault applied. So a rehearsal that measures the hidden load
(``hil --measure-load``) and names the overlay it wrote weighs the same simulated arm again,
now with the corrected model; the overlay applied under the fault as well would have counted
the load twice.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Mapping

import mujoco
import numpy as np

from mj_manipulator_ros.model.mass_overlay import read_overlay
from mj_manipulator_ros.model.scene import compile_scene
from mj_manipulator_ros.sim.sim_config import ArmFaults


def has_mismatch(faults: Mapping[str, ArmFaults]) -> bool:
    """Does any arm's fault set change the model's masses?"""
    return any(f.link_mass_scale or f.payload_kg for f in faults.values())


def apply_mismatch(model: mujoco.MjModel, scene, faults: Mapping[str, ArmFaults]) -> None:
    """Change ``model`` (the simulator's copy of ``scene.model``) per ``faults`` (module
    docstring); its derived constants are recomputed."""
    _described(model, scene)
    for arm, f in faults.items():
        if arm not in scene.arms:
            continue
        binding = scene.arms[arm]
        names = list(binding.joint_names)
        for joint, k in f.link_mass_scale.items():
            body = int(model.jnt_bodyid[binding.joint_ids[names.index(joint)]])
            model.body_mass[body] *= k
            model.body_inertia[body] *= k
        if f.payload_kg:
            body = int(model.jnt_bodyid[binding.joint_ids[-1]])
            m0, m = float(model.body_mass[body]), float(f.payload_kg)
            model.body_ipos[body] = (m0 * model.body_ipos[body]
                                     + m * np.asarray(f.payload_offset_m, dtype=float)) / (m0 + m)
            model.body_mass[body] = m0 + m
    mujoco.mj_setConst(model, mujoco.MjData(model))


def _described(model: mujoco.MjModel, scene) -> None:
    """The bodies a mass overlay (``scene.mass_overlay``) corrected, set back to the robot's
    description in ``model``: mass, centre of mass, rotational inertia (the description
    compiled once more without the overlay; the overlay changes values only, so the bodies
    are the same)."""
    config = getattr(scene, "config", None)
    if config is None or not config.mass_overlay:
        return
    path = Path(config.mass_overlay)
    path = path if path.is_absolute() or config.base_dir is None else config.base_dir / path
    described = compile_scene(dataclasses.replace(config, mass_overlay=""), config.base_dir)
    for name in read_overlay(path):
        b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
        d = mujoco.mj_name2id(described, mujoco.mjtObj.mjOBJ_BODY, name)
        model.body_mass[b] = described.body_mass[d]
        model.body_ipos[b] = described.body_ipos[d]
        model.body_iquat[b] = described.body_iquat[d]
        model.body_inertia[b] = described.body_inertia[d]
