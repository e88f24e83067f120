"""Continuing a plan after a stop: where each arm stands on its plan, the retrace that brings
every arm back to one plan time along its own path, and the rest of the plan from rest there.

After a stop the arms may stand at different plan times: a peer-failed stop holds the failed
arm where its controller stopped (plan time tA) while its peers ramp to rest further along
(tB > tA). Continuing the same plan:

1. :func:`locate` finds each arm's plan time from its measured position (its plan sampled
   every ``LOCATE_STEP_S``, the nearest refined by bisection); an arm farther from its plan
   than the start tolerance is off its plan (:class:`OffPlanError`, by arm and joint).
2. The common plan time is the earliest of them. :func:`retrace` moves every arm ahead of it
   back along its own path (each waypoint a configuration of its plan, the arms at that time
   the ones the stop passed through), rest to rest, within every joint's limits; arms at the
   common time hold.
3. :func:`remainder` is the plan from the common time, from rest: a smooth ramp to the
   plan's speed along its path (``core/time_scaling.plan_ramp``, as a resume), then the
   plan's own waypoints.

Each part is an ordinary plan: the executor validates, gates and start-checks it as any.
Shapes: N plan samples; J joints of an arm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

import numpy as np

from mj_manipulator_ros.core.errors import StartStateError
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.time_scaling import (
    JointBounds, TimeScaling, peak_use, plan_ramp, ramp_trajectory)

#: plan-time spacing of the search for where an arm stands, s
LOCATE_STEP_S = 0.005
#: plan times closer than this are one (arms at "the same" plan time), s
SAME_TIME_S = 1e-3
#: the retrace's shortest duration, s
MIN_RETRACE_S = 0.2
#: most rounds of lengthening a retrace until every joint is within its limits
RETRACE_ROUNDS = 40


class OffPlanError(StartStateError):
    """An arm stands off its plan (moved by hand, by another client, or never on it): the plan
    cannot be continued from where it is without a move nobody checked. ``reason`` is
    ``off_plan``."""

    reason = "off_plan"

    def __init__(self, message: str, plan_time: float = 0.0, **where) -> None:
        super().__init__(message, **where)
        #: the message without the arm and joint it names
        self.detail = message
        #: the plan time nearest where the arm stands, s
        self.plan_time = plan_time


class AmbiguousPlanTimeError(StartStateError):
    """An arm stands where its plan passes more than once, and nothing says which pass it
    stopped on. ``reason`` is ``ambiguous_plan_time``."""

    reason = "ambiguous_plan_time"


def locate(traj: ArmTrajectory, q: np.ndarray, tolerance: np.ndarray,
           hint: Optional[float] = None) -> float:
    """The plan time where an arm measured at ``q`` (J,) stands on ``traj``.

    Every plan time whose configuration is within ``tolerance`` (J,; rad or m per joint) of
    ``q`` qualifies; of several stretches of them (a path that passes the pose more than once)
    the one nearest ``hint`` (s; the plan time the report suggests).

    Raises:
        AmbiguousPlanTimeError: several stretches and no ``hint``.
        OffPlanError: no plan time is within tolerance: names the arm, the joint farthest
            beyond its tolerance at the nearest plan time, both values and the tolerance.
    """
    q = np.asarray(q, dtype=float)
    tol = np.asarray(tolerance, dtype=float)
    duration = float(traj.times[-1] - traj.times[0])
    ts = np.linspace(traj.times[0], traj.times[-1],
                     max(2, int(np.ceil(duration / LOCATE_STEP_S)) + 1))
    pos = sample(traj, ts)[0]
    excess = np.max(np.abs(pos - q) - tol, axis=1)          # (N,): <= 0 within tolerance
    inside = excess <= 0.0
    if not inside.any():
        k = int(np.argmin(excess))
        t = _refine(traj, q, tol, ts, k)
        p = sample(traj, [t])[0][0]
        j = int(np.argmax(np.abs(p - q) - tol))
        raise OffPlanError(
            f"measured {q[j]:.4f}, its plan's nearest point (plan time {t:.3f} s) has "
            f"{p[j]:.4f} (|difference| {abs(p[j] - q[j]):.4f} > start tolerance {tol[j]:g}): "
            "the arm is off its plan; continue with approach (--approach) to bring it back "
            "there, checked", arm=traj.arm, joint=traj.joint_names[j], value=float(q[j]),
            plan_time=t)
    # stretches of qualifying samples; the best sample of the chosen stretch, refined
    edges = np.flatnonzero(np.diff(np.concatenate([[0], inside.astype(int), [0]])))
    stretches = list(zip(edges[::2], edges[1::2]))
    if hint is not None:
        first, end = min(stretches, key=lambda se: min(abs(ts[se[0]] - hint),
                                                       abs(ts[se[1] - 1] - hint)))
    elif len(stretches) > 1:
        where = ", ".join(f"{ts[a]:.3f}-{ts[b - 1]:.3f} s" for a, b in stretches)
        raise AmbiguousPlanTimeError(
            f"stands where its plan passes more than once (plan times {where}): which one it "
            "stopped at is not known here; say near which plan time it stopped (continue_plan "
            "hints, --continue-near)", arm=traj.arm)
    else:
        first, end = stretches[0]
    k = first + int(np.argmin(excess[first:end]))
    return _refine(traj, q, tol, ts, k)


def _refine(traj: ArmTrajectory, q: np.ndarray, tol: np.ndarray, ts: np.ndarray,
            k: int) -> float:
    """The plan time near sample ``k`` of ``ts`` where the arm's largest normalized distance
    to ``q`` is least (ternary search over the neighbouring samples)."""
    lo, hi = ts[max(k - 1, 0)], ts[min(k + 1, ts.size - 1)]
    scale = np.where(tol > 0, tol, 1.0)

    def cost(t: float) -> float:
        return float(np.max(np.abs(sample(traj, [t])[0][0] - q) / scale))
    for _ in range(40):
        a, b = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        if cost(a) <= cost(b):
            hi = b
        else:
            lo = a
    return 0.5 * (lo + hi)


def common_time(times: Mapping[str, float]) -> float:
    """The plan time every arm can be brought to along its path: the earliest."""
    return min(times.values())


def _reversed(traj: ArmTrajectory, t_from: float, t_to: float) -> ArmTrajectory:
    """``traj`` run backwards from plan time ``t_from`` to ``t_to`` (< t_from): its own
    waypoints between them and the two ends with their exact state, times from 0, velocities
    negated (the same polynomial pieces, run the other way)."""
    inner = traj.times[(traj.times > t_to + 1e-9) & (traj.times < t_from - 1e-9)]
    at = np.concatenate([[t_from], inner[::-1], [t_to]])
    q, v, a = sample(traj, at)
    return ArmTrajectory(traj.joint_names, t_from - at, q, -v, a, arm=traj.arm)


def retrace(plan: MultiArmPlan, times: Mapping[str, float], to: float,
            bounds: Mapping[str, JointBounds]) -> Optional[MultiArmPlan]:
    """Every arm of ``times`` (arm -> its plan time, s) ahead of plan time ``to`` back along
    its own path to ``to``, rest to rest, one duration for all (each arm's scaling spans its own
    distance: arms that stand at one plan time keep one plan time); arms at ``to`` hold. The
    shortest duration (from ``MIN_RETRACE_S``) at which every joint's sampled velocity and
    acceleration are within ``bounds``. None when every arm is at ``to`` already."""
    ahead = {a: t for a, t in times.items() if t > to + SAME_TIME_S}
    if not ahead:
        return None
    backwards = {a: _reversed(plan[a], t, to) for a, t in ahead.items()}
    duration = MIN_RETRACE_S
    for _ in range(RETRACE_ROUNDS):
        arms = {a: ramp_trajectory(backwards[a], 0.0,
                                   TimeScaling.rest_to_rest(ahead[a] - to, duration), False)
                for a in ahead}
        peak, _where = peak_use(arms, bounds, 0.0, duration)
        if peak <= 1.0:
            break
        duration *= max(peak, np.sqrt(peak)) * 1.02
    else:   # pragma: no cover - a peak that does not fall with the duration
        raise StartStateError(f"no retrace within the limits in {RETRACE_ROUNDS} rounds "
                              f"(last {duration:.2f} s, peak {peak:.3f} of a limit)")
    # one time grid for every arm (a plan's arms share one): each retracing arm's goal
    # sampled on the union of their knots (exact: the same splines), the others standing
    grid = np.unique(np.concatenate([t.times for t in arms.values()]))
    out = {}
    for a in times:
        if a in arms:
            q, v, acc = sample(arms[a], grid)
        else:
            q = np.repeat(sample(plan[a], [to])[0], grid.size, axis=0)
            v = acc = np.zeros_like(q)
        out[a] = ArmTrajectory(plan[a].joint_names, grid, q, v, acc, arm=a)
    return MultiArmPlan(out)


def remainder(plan: MultiArmPlan, at: float, bounds: Mapping[str, JointBounds]) -> MultiArmPlan:
    """The plan from plan time ``at`` with every arm at rest there: the speed ramps from 0 to
    the plan's along its path within ``bounds``, then the plan's own waypoints (a plan's end
    reached first: a rest-to-rest move there)."""
    ramp = plan_ramp(plan, at, 0.0, 1.0, bounds)
    return MultiArmPlan({a: ArmTrajectory(plan[a].joint_names, t.times, t.positions,
                                          t.velocities, t.accelerations, arm=a)
                         for a, t in ramp.trajectories.items()})


def report_hints(report, plan: MultiArmPlan) -> dict[str, float]:
    """Where an execution's report says each arm of ``plan`` stopped, plan time (s), to choose
    among the stretches of a path that passes one pose more than once: the latest controlled
    stop's end for the arms it stopped, its request for the arms it held (their controllers
    held where they were); an arm canceled without one, its cancel's time from the stamp."""
    hints: dict[str, float] = {}
    stops = [r for r in report.stops if r.superseded_at is None]
    if stops:
        last = stops[-1]
        for a in plan.arm_names:
            hints[a] = last.plan_time_requested if a in last.held else last.plan_time_end
    elif report.start_stamp is not None:
        for a in plan.arm_names:
            r = report.arms.get(a)
            t = None if r is None else (r.cancel_requested_at or r.result_at)
            if t is not None:
                hints[a] = min(max(t - report.start_stamp, 0.0), plan.duration)
    return hints


@dataclass(frozen=True)
class ContinuationReport:
    """How a plan was continued (``MultiArmExecutor.continue_plan``).

    Attributes:
        found: arm -> the plan time where it stood (s); an arm off its plan, its nearest.
        off_plan: the arms that stood off their plan (brought back by the approach).
        common_time: the plan time every arm was brought to, s.
        approach, retrace, rest: the report of each part that ran (None: not needed, or not
            reached because an earlier part did not succeed).
    """

    found: Mapping[str, float]
    off_plan: tuple[str, ...]
    common_time: float
    approach: Optional[object] = None
    retrace: Optional[object] = None
    rest: Optional[object] = None

    @property
    def succeeded(self) -> bool:
        return self.rest is not None and self.rest.succeeded

    def to_dict(self) -> dict:
        return {"found": {a: float(t) for a, t in self.found.items()},
                "off_plan": list(self.off_plan), "common_time": float(self.common_time),
                "succeeded": self.succeeded,
                **{name: None if getattr(self, name) is None else getattr(self, name).to_dict()
                   for name in ("approach", "retrace", "rest")}}

    def summary(self) -> str:
        lines = [f"continued from plan time {self.common_time:.3f} s ("
                 + ", ".join(f"{a} stood at {t:.3f} s"
                             + (" (off its plan: brought back)" if a in self.off_plan else "")
                             for a, t in self.found.items()) + ")"]
        for name in ("approach", "retrace", "rest"):
            part = getattr(self, name)
            if part is not None:
                lines.append(f"{name}: " + part.summary().replace("\n", "\n  "))
        return "\n".join(lines)
