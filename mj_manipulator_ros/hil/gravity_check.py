"""Gravity consistency: do an arm's measured efforts, standing still, match what the model says
its weight needs at the measured pose? (HIL stage 1: no motion.)

At rest, each joint's actuator carries the arm's weight: ``effort = qfrc_bias - qfrc_passive``
at the measured pose (MuJoCo's gravity torque, less what a passive gravity compensation of the
model carries; zero velocity). A joint whose state lies (a zero offset, a reversed sign, two
joints swapped, a gear ratio set wrong) or whose actuator cannot carry its load (a force limit
too low) leaves a residual ``effort - expected`` on the loaded joints.

The residual says that something is wrong; :func:`diagnose` says what: it tries each
single-fault explanation on the arm (a sign flip of one joint, a swap of two, a zero offset or a
gear factor of one, fitted on a grid), maps the measured state back to what the joints would
truly be under it, and keeps the explanation that leaves the smallest residual. One more
explanation competes: the arm heavier (or lighter) than the model, as a payload at its last
link (its mass and first moment fitted to the residual, ``hil/load_fit.py``): a model whose
masses are off, or a tool it lacks. Whichever leaves less is said first; the other too when it
also explains the residual (a wrong mass and a joint fault can look alike from one pose: a
zero offset of 0.28 rad at the left elbow leaves 0.24 N m of a 15 % heavier upper arm and a 0.3
kg payload, the load 0.08; the picture tells them apart, where the offset moves the arm). Nothing moves;
only faults that change the gravity load are visible (a joint that carries no load in the pose
needs the operator's eye: stage 2's picture).

Shapes: (J,) per arm; efforts in N m (or N).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from typing import Sequence

import mujoco
import numpy as np

#: zero offsets tried, rad
OFFSETS = np.arange(-0.6, 0.6 + 1e-9, 0.005)
#: gear factors tried
SCALES = np.exp(np.linspace(np.log(0.25), np.log(4.0), 121))


@dataclass(frozen=True)
class GravityResidual:
    """One arm at rest against its model.

    Attributes:
        expected, measured, residual: per joint (J,), N m.
        worst_joint: the joint with the largest |residual|.
        diagnosis: the best single-fault explanation ("" when none beats the plain residual).
        explained: the largest |residual| left under that explanation.
        estimate: its fitted value (offset rad, or factor), NaN for a flip or swap.
        alternative, alternative_explained: the runner-up explanation ("" when none) and
            the largest |residual| it leaves.
    """

    expected: np.ndarray
    measured: np.ndarray
    residual: np.ndarray
    worst_joint: str
    diagnosis: str = ""
    explained: float = float("nan")
    estimate: float = float("nan")
    alternative: str = ""
    alternative_explained: float = float("nan")

    @property
    def worst(self) -> float:
        return float(np.max(np.abs(self.residual)))


class GravityModel:
    """The gravity an arm's actuators carry at rest, from the scene's model (its own MjData).

    Args:
        scene: a :class:`~mj_manipulator_ros.model.scene.Scene` with the arm bound.
        arm: the arm's name.
    """

    def __init__(self, scene, arm: str) -> None:
        # its own copy of the model with contacts and constraints off: neither enters
        # qfrc_bias or qfrc_passive, and the collision pass was 6/7 of each evaluation (the
        # diagnosis evaluates thousands of poses)
        self.model = copy.deepcopy(scene.model)
        self.model.opt.disableflags |= (int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
                                        | int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT))
        self.data = mujoco.MjData(self.model)
        self.data.qpos[:] = scene.initial_qpos
        binding = scene.arms[arm]
        self.joint_names = tuple(binding.joint_names)
        self.qpos_adr = np.asarray(binding.qpos_adr)
        self.dof_adr = np.asarray(binding.dof_adr)
        # under co-simulation the twin owns the joints' friction (N m, (J,)); None otherwise
        twin = getattr(scene, "twin", {}).get(arm)
        self.twin_frictionloss = None if twin is None else np.asarray(twin.frictionloss)

    def expected(self, q: np.ndarray) -> np.ndarray:
        """Effort (J,) the actuators carry at rest at positions ``q`` (J,)."""
        d = self.data
        d.qpos[self.qpos_adr] = q
        d.qvel[:] = 0.0
        mujoco.mj_forward(self.model, d)
        return d.qfrc_bias[self.dof_adr] - d.qfrc_passive[self.dof_adr]

    def residual(self, q: np.ndarray, effort: np.ndarray) -> GravityResidual:
        expected = self.expected(q)
        r = effort - expected
        worst = self.joint_names[int(np.argmax(np.abs(r)))]
        return GravityResidual(expected, np.asarray(effort, float), r, worst)

    def diagnose(self, q: np.ndarray, effort: np.ndarray) -> GravityResidual:
        """:meth:`residual` with the best single-fault explanation (module docstring)."""
        base = self.residual(q, effort)
        best = (base.worst, "", float("nan"))
        names = self.joint_names
        for j, name in enumerate(names):
            q1, e1 = q.copy(), effort.copy()
            q1[j], e1[j] = -q[j], -effort[j]
            best = min(best, (self._left(q1, e1), f"{name} sign inverted", float("nan")))
            for o in OFFSETS:
                q1 = q.copy()
                q1[j] = q[j] - o
                best = min(best, (self._left(q1, effort), f"{name} zero offset about "
                                  f"{o:+.3f} rad", float(o)))
            def scaled(k: float, j=j) -> float:
                q1, e1 = q.copy(), effort.copy()
                q1[j], e1[j] = k * q[j], effort[j] / k
                return self._left(q1, e1)
            k = min(SCALES, key=scaled)
            k = min(k * (1.0 + np.linspace(-0.025, 0.025, 51)), key=scaled)  # refined
            best = min(best, (scaled(k), f"{name} moves {k:.2f} x its command (gear ratio)",
                              float(k)))
        for a, b in itertools.combinations(range(len(names)), 2):
            q1, e1 = q.copy(), effort.copy()
            q1[[a, b]], e1[[a, b]] = q[[b, a]], effort[[b, a]]
            best = min(best, (self._left(q1, e1), f"{names[a]} and {names[b]} swapped",
                              float("nan")))
        from mj_manipulator_ros.hil.load_fit import LoadRegressor, payload_explanation

        mass, load_left = payload_explanation(LoadRegressor(self, links=()), q, effort)
        load = (f"the arm {abs(mass):.2f} kg {'heavier' if mass >= 0 else 'lighter'} at its "
                "last link than the model carries (or its links' masses off: the model's "
                "masses, a tool the model lacks; hil/load_fit.py measures the load over poses)")
        left, diagnosis, estimate = best
        if load_left < left:
            return GravityResidual(base.expected, base.measured, base.residual,
                                   base.worst_joint, load, load_left, mass,
                                   diagnosis, left)
        if not diagnosis:
            return base
        return GravityResidual(base.expected, base.measured, base.residual, base.worst_joint,
                               diagnosis, left, estimate, load, load_left)

    def _left(self, q: np.ndarray, effort: np.ndarray) -> float:
        return float(np.max(np.abs(effort - self.expected(q))))


def at_rest(positions: np.ndarray, efforts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mean pose and effort (J,) of samples (M, J) of an arm standing still."""
    return np.nanmean(positions, axis=0), np.nanmean(efforts, axis=0)


def describe(arm: str, result: GravityResidual, threshold: float,
             joint_names: Sequence[str]) -> str:
    """A line for the check's detail: the residual, and the diagnosis when one explains it."""
    text = (f"largest residual {result.worst:.3f} N m at {result.worst_joint} (measured "
            f"{result.measured[list(joint_names).index(result.worst_joint)]:+.3f}, model "
            f"{result.expected[list(joint_names).index(result.worst_joint)]:+.3f})")
    if result.diagnosis and result.worst > threshold and result.explained <= threshold:
        subject = "" if result.diagnosis.startswith("the arm ") else f"{arm} "
        text += (f"; explained by: {subject}{result.diagnosis} (residual "
                 f"{result.explained:.3f} N m under it)")
        if result.alternative and result.alternative_explained <= threshold:
            subject = "" if result.alternative.startswith("the arm ") else f"{arm} "
            text += (f"; or by: {subject}{result.alternative} (residual "
                     f"{result.alternative_explained:.3f} N m under it)")
    elif result.worst > threshold:
        text += ("; no single joint fault explains it: check gravity compensation, force "
                 "limits and the model's masses")
    return text
