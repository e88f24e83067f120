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
"""

from __future__ import annotations

from typing import Mapping

import mujoco
import numpy as np

from mj_manipulator_ros.sim.sim_config import ArmFaults


def has_mismatch(faults: Mapping[str, ArmFaults]) -> bool:
    """Does any arm's fault set change the model's masses?"""
    return any(f.link_mass_scale or f.payload_kg for f in faults.values())


def apply_mismatch(model: mujoco.MjModel, scene, faults: Mapping[str, ArmFaults]) -> None:
    """Change ``model`` (the simulator's copy of ``scene.model``) per ``faults`` (module
    docstring); its derived constants are recomputed."""
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
