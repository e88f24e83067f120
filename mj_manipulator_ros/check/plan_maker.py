"""A synchronized plan for any configured robot: every arm waves out of its ready pose and back.

The bring-up needs plans the robot can run (``hil.plans``); a new robot has none. From the
configuration and its scene alone: each arm starts at the scene's initial pose (the model's
keyframe or ``scene.initial_positions``), every joint swings toward the side of its range with
more room, by ``SWING_FRACTION`` of that room and at most ``MAX_SWING`` (rad, or m for a
slide), twice out and back (quintic rest-to-rest moves on one ``DT`` grid, every arm on the
same instants). Each move lasts long enough that no joint exceeds ``SPEED_FRACTION`` of its
velocity limit (and of its acceleration limit where one is set), at least ``MIN_MOVE_S``.

The plan is validated and replayed by the checker (synchronized, each arm alone with its peers
held at the ready pose, and with the arms up to the configured stop band apart); where any
collides the swings are halved, up to ``HALVINGS`` times, and then :class:`PlanMakerError`
names the collision. A plan returned is collision-free by the same checks the pre-flight gate
makes.
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from mj_manipulator_ros.check.replay_checker import PlanReplayChecker
from mj_manipulator_ros.check.timeline import build_timeline
from mj_manipulator_ros.core.config import ExecutorConfig, limit_or_inf
from mj_manipulator_ros.core.errors import PlanError
from mj_manipulator_ros.core.interpolation import rest_to_rest_chain
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.validation import validate_plan

#: waypoint spacing, s
DT = 0.01
#: a joint swings by at most this much (rad; m for a slide joint: ``MAX_SLIDE``)
MAX_SWING = 0.25
MAX_SLIDE = 0.02
#: ... and by at most this fraction of the room between its ready position and its limit
SWING_FRACTION = 0.3
#: the plan's speeds and accelerations stay within this fraction of the joints' limits
SPEED_FRACTION = 0.5
#: the shortest move, s
MIN_MOVE_S = 1.0
#: collisions: the swings are halved at most this many times
HALVINGS = 4
#: a quintic rest-to-rest move's peak speed and acceleration per unit distance, x T and x T^2
PEAK_SPEED = 1.875
PEAK_ACCEL = 5.7735


class PlanMakerError(PlanError):
    """No collision-free wave for this configuration: names what collided and how small the
    swings were when it still did."""


def wave_plan(config: ExecutorConfig, checker: PlanReplayChecker, swings: int = 2) -> MultiArmPlan:
    """The wave of the module docstring for every configured arm (``swings`` out-and-backs).

    Raises:
        PlanMakerError: it collides even with the swings halved ``HALVINGS`` times, or an arm
            has no joint that can move.
    """
    ready = {name: np.asarray(checker.base_qpos[arm.qpos_adr], dtype=float)
             for name, arm in checker.arms.items() if name in config.arm_names}
    offsets = {a: _swing(config, checker, a, ready[a]) for a in config.arm_names}
    still = [a for a, o in offsets.items() if not np.any(o)]
    if still:
        raise PlanMakerError(f"arms {still}: no joint has room to move from the ready pose "
                             "(every joint at a limit?)")
    scale, last = 1.0, ""
    for _ in range(HALVINGS + 1):
        plan = _plan(config, ready, {a: o * scale for a, o in offsets.items()}, swings)
        validate_plan(plan, config)
        problem = _collision(plan, checker, ready, config)
        if problem is None:
            return plan
        scale, last = scale / 2.0, problem
    raise PlanMakerError(f"no collision-free wave: with the swings at {scale * 2:.3g} of "
                         f"{MAX_SWING} rad it still collides ({last}); give hil.plans")


def _swing(config: ExecutorConfig, checker: PlanReplayChecker, arm: str,
           ready: np.ndarray) -> np.ndarray:
    """Per joint (J,): the signed swing from ``ready`` toward the side with more room."""
    binding = checker.arms[arm]
    cfg = config.arm(arm)
    out = np.zeros(len(cfg.joint_names))
    for k, joint in enumerate(cfg.joint_names):
        limit = cfg.joint_limits.get(joint)
        lower = max(float(binding.lower[k]), limit_or_inf(limit, "lower"))
        upper = min(float(binding.upper[k]), limit_or_inf(limit, "upper"))
        below, above = ready[k] - lower, upper - ready[k]
        room = max(below, above)
        biggest = MAX_SLIDE if _is_slide(checker, binding, k) else MAX_SWING
        size = min(biggest, SWING_FRACTION * room) if np.isfinite(room) else biggest
        out[k] = size if above >= below else -size
    return out


def _is_slide(checker: PlanReplayChecker, binding, k: int) -> bool:
    import mujoco
    return int(checker.model.jnt_type[binding.joint_ids[k]]) == mujoco.mjtJoint.mjJNT_SLIDE


def _plan(config: ExecutorConfig, ready: Mapping[str, np.ndarray],
          offsets: Mapping[str, np.ndarray], swings: int) -> MultiArmPlan:
    move = MIN_MOVE_S
    for arm, offset in offsets.items():
        cfg = config.arm(arm)
        for k, joint in enumerate(cfg.joint_names):
            limit = cfg.joint_limits.get(joint)
            v = limit_or_inf(limit, "velocity")
            a = limit_or_inf(limit, "acceleration")
            d = abs(offset[k])
            if np.isfinite(v) and v > 0:
                move = max(move, PEAK_SPEED * d / (SPEED_FRACTION * v))
            if np.isfinite(a) and a > 0:
                move = max(move, np.sqrt(PEAK_ACCEL * d / (SPEED_FRACTION * a)))
    move = np.ceil(move / DT) * DT
    n = int(round(move / DT)) + 1
    t = np.linspace(0.0, move, n)
    arms = {}
    for arm, offset in offsets.items():
        q0 = ready[arm]
        positions, velocities = rest_to_rest_chain([q0] + [q0 + offset, q0] * swings, t)
        times = np.round(np.arange(positions.shape[0]) * DT, 6)
        velocities[-1] = 0.0
        arms[arm] = ArmTrajectory(config.arm(arm).joint_names, times, positions, velocities)
    return MultiArmPlan(arms)


def _collision(plan: MultiArmPlan, checker: PlanReplayChecker,
               ready: Mapping[str, np.ndarray], config: ExecutorConfig) -> Optional[str]:
    """What collides (first found), or None: synchronized, each arm alone, the stop band."""
    report = checker.check(plan)
    if not report.collision_free:
        return "synchronized: " + report.summary().splitlines()[0]
    for arm in plan.arm_names:
        others = {a: ready[a] for a in plan.arm_names if a != arm}
        timeline = build_timeline(plan.subset([arm]), "synchronized").with_holds(others)
        alone = checker.check(timeline=timeline, mode="recorded")
        if not alone.collision_free:
            return f"{arm} alone: " + alone.summary().splitlines()[0]
    if len(plan.arm_names) > 1:
        band = checker.check(plan, mode="band", skew=config.execution.stop_skew_s)
        if not band.collision_free:
            return "stop band: " + band.summary().splitlines()[0]
    return None
