"""Which joint faults gravity can see at a pose, and the poses that let it see every joint's.

A joint whose sign is reversed (commands and states alike) reads ``q_j`` where it stands at
``-q_j`` and reports its effort negated: at rest the measured efforts differ from the model's by

    r(q) = flip_j(G(flip_j(q))) - G(q)

(``G``: the gravity load the actuators carry, :class:`~mj_manipulator_ros.hil.gravity_check.
GravityModel`; ``flip_j`` negates entry ``j``). Its largest entry is the joint's **sign margin**
at ``q``: the residual the fault would leave there, N m. A joint that carries no load where it
stands (the OpenArm's joint 5 with the wrist hanging: 0.09 N m at the start pose) keeps its
sign from gravity; turning another joint (joint 7) loads it.

:func:`pose_set` picks, for each joint whose margin at the poses already visited is below
``want``, the smallest single-joint move from the start pose (one joint turned, within the
limits and ``max_move``) where it is, and groups joints one pose serves. It then adds one
**gain pose**: a gear ratio set wrong (the joint turns k times what it reads, commands and
states alike) is invisible where the joint stands at its zero, and a jog shows the eye only
|k - 1| x the jog; every joint that no pose so far took ``gain_reach`` from its zero is turned
there, together (the picture then shows a gear error of ``picture tolerance / gain_reach``: 17 %
at 0.3 rad). Nothing here moves: the bring-up visits the poses (stage 2,
``runners/gravity_poses.py``) after every joint's jog passed.

Shapes: (J,) per arm; margins in N m.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import numpy as np

#: the step of the pose search, rad
SEARCH_STEP = 0.05


def sign_margin(model, q: np.ndarray, j: int) -> float:
    """The largest |residual| (N m) joint ``j``'s sign reversed would leave at rest at ``q``."""
    true = np.array(q, dtype=float)
    true[j] = -q[j]
    measured = model.expected(true)
    measured[j] = -measured[j]
    return float(np.max(np.abs(measured - model.expected(q))))


#: the gear errors a pose must show (the joint turns k times what it reads)
GAIN_PROBES = (0.8, 1.25)


def gain_margin(model, q: np.ndarray, j: int) -> float:
    """The smallest, over :data:`GAIN_PROBES`, of the largest |residual| (N m) joint ``j``'s
    gear error would leave at rest at reading ``q`` (it stands at ``k q_j``, its effort reads
    ``k`` times the true one)."""
    out = np.inf
    for k in GAIN_PROBES:
        true = np.array(q, dtype=float)
        true[j] = k * q[j]
        measured = model.expected(true)
        measured[j] *= k
        out = min(out, float(np.max(np.abs(measured - model.expected(q)))))
    return out


def margins(model, poses: Iterable[np.ndarray]) -> np.ndarray:
    """Each joint's best sign margin (J,) over ``poses``."""
    best = np.zeros(len(model.joint_names))
    for q in poses:
        best = np.maximum(best, [sign_margin(model, q, j) for j in range(len(best))])
    return best


@dataclass(frozen=True)
class GravityPose:
    """One pose of the set: the start pose with ``mover`` turned by ``move`` rad.

    Attributes:
        q: the pose (J,), rad.
        mover: the index of the joint turned.
        move: by how much, rad.
        serves: the joints whose sign it shows (indices), with their margins there (N m).
    """

    q: np.ndarray
    mover: int
    move: float
    serves: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class GainPose:
    """The start pose with ``joints`` (indices) turned to ``q[joints]``, each ``gain_reach``
    from its zero."""

    q: np.ndarray
    joints: tuple[int, ...]


@dataclass(frozen=True)
class PoseSet:
    """The poses for one arm and what is left to the eye.

    Attributes:
        seen: each joint's best margin (J,) over the poses already visited, N m.
        poses: the poses to visit.
        unseen: joints no pose within reach loads enough (index, best margin found).
        gain: the gain pose (None: every joint is already far enough from its zero somewhere).
    """

    seen: np.ndarray
    poses: tuple[GravityPose, ...]
    unseen: tuple[tuple[int, float], ...]
    gain: Optional[GainPose] = None

    def describe(self, names: Sequence[str], want: float) -> str:
        """One line: the margins, the poses, the joints left to the eye."""
        text = ("sign margins (N m) at the poses so far: "
                + ", ".join(f"{_short(n)} {m:.2f}" for n, m in zip(names, self.seen))
                + f"; wanted >= {want:.2f}")
        for p in self.poses:
            text += (f"; pose set: {_short(names[p.mover])} {p.move:+.2f} rad shows "
                     + ", ".join(f"{_short(names[j])} ({m:.2f})" for j, m in p.serves))
        if self.gain is not None:
            text += ("; gain pose: " + ", ".join(f"{_short(names[j])} {self.gain.q[j]:+.2f}"
                                                 for j in self.gain.joints) + " rad")
        if self.unseen:
            text += ("; gravity cannot tell the sign of "
                     + ", ".join(f"{_short(names[j])} (at most {m:.2f} within reach)"
                                 for j, m in self.unseen)
                     + ": the operator's eye (the pictures) must")
        return text


def _short(name: str) -> str:
    """``openarm_left_joint5`` -> ``joint5`` (the arm is said once per line)."""
    return name.rsplit("_", 1)[-1] if "_" in name else name


def pose_set(model, start: np.ndarray, visited: Sequence[np.ndarray], lower: np.ndarray,
             upper: np.ndarray, want: float, max_move: float,
             gain_reach: float = 0.0) -> PoseSet:
    """The poses that show every joint's sign with at least ``want`` N m (module docstring).

    Args:
        model: the arm's GravityModel.
        start: the pose the moves start from (J,).
        visited: poses already weighed (the start pose, the jogs).
        lower, upper: the joint limits (J,); candidate poses stay ``SEARCH_STEP`` inside.
        want: the margin wanted, N m.
        max_move: the largest single-joint move considered, rad.
        gain_reach: how far from its zero every joint must stand in some pose, rad (0: no
            gain pose).
    """
    seen = margins(model, [start, *visited])
    todo = [j for j in range(len(seen)) if seen[j] < want]
    poses: list[GravityPose] = []
    unseen: list[tuple[int, float]] = []
    steps = np.arange(SEARCH_STEP, max_move + 1e-9, SEARCH_STEP)
    while todo:
        j = todo[0]
        found, best = None, seen[j]
        for d in steps:               # the smallest move first, any joint, either way
            for k in range(len(start)):
                for sign in (1.0, -1.0):
                    q = np.array(start, dtype=float)
                    q[k] += sign * d
                    if not (lower[k] + SEARCH_STEP <= q[k] <= upper[k] - SEARCH_STEP):
                        continue
                    m = sign_margin(model, q, j)
                    best = max(best, m)
                    if m >= want and found is None:
                        found = (q, k, sign * d)
            if found is not None:
                break
        if found is None:
            unseen.append((j, float(best)))
            todo.pop(0)
            continue
        q, k, move = found
        serves = tuple((i, sign_margin(model, q, i)) for i in todo)
        serves = tuple((i, float(m)) for i, m in serves if m >= want)
        poses.append(GravityPose(q, k, float(move), serves))
        todo = [i for i in todo if i not in {s for s, _ in serves}]
    return PoseSet(seen, tuple(poses), tuple(unseen),
                   _gain_pose(model, start, [start, *visited, *(p.q for p in poses)], lower,
                              upper, gain_reach, want))


def _gain_pose(model, start: np.ndarray, poses: Sequence[np.ndarray], lower: np.ndarray,
               upper: np.ndarray, reach: float, want: float) -> Optional[GainPose]:
    """Every joint whose gear error no pose shows (gravity: :func:`gain_margin` under
    ``want``; the eye: no pose takes it ``reach`` from its zero), turned ``reach`` from its zero
    (the side with room; none where neither side has it)."""
    if reach <= 0:
        return None
    farthest = np.max(np.abs(np.array(poses)), axis=0)
    q = np.array(start, dtype=float)
    joints = []
    for j in np.flatnonzero(farthest < reach - 1e-9):
        if max(gain_margin(model, p, int(j)) for p in poses) >= want:
            continue   # its load shows it
        for target in (reach, -reach):
            if lower[j] + SEARCH_STEP <= target <= upper[j] - SEARCH_STEP:
                q[j] = target
                joints.append(int(j))
                break
    return GainPose(q, tuple(joints)) if joints else None
