"""Synchronized changes of plan speed along the plan's own path: controlled stop, pause,
resume, speed change.

A running plan is followed at plan time s(t) on the controllers' clock. Every change of speed
here is one shared time scaling for every arm: from a shared stamp, the plan's rate ds/dt goes
smoothly from f0 to f1 over T seconds,

    rate(tau) = f0 + (f1 - f0) h(tau / T),  h(u) = 3u^2 - 2u^3    (tau: s since the stamp)

so every arm passes only configurations of the synchronized plan (the certificate of the
plan covers them) and every arm reaches each plan time at the same instant. Each arm's
reference is its plan composed with s:

    q(tau) = p(s),  dq = p'(s) rate,  ddq = p''(s) rate^2 + p'(s) rate'

(p', p'': the plan's own velocity and acceleration at speed 1). At tau = 0 the rate's
derivative is 0, so the reference continues the running one in position, velocity and
acceleration; T is the shortest (to a few percent) at which no sample of the spline the
controllers will run exceeds any joint's velocity or acceleration limit: the tightest joint of
any arm sets it. A ramp that would run past the plan's end is replaced by the plan's own end
(a stop), or by a rest-to-rest move to it (a resume).

Shapes: J joints of an arm, K knots of a ramp. Times in s, positions rad (or m).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from mj_manipulator_ros.core.errors import RampLimitError
from mj_manipulator_ros.core.interpolation import sample, sample_rates
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan

#: knot spacing of a ramp's trajectory, s (quintic between knots carrying p, v, a exactly)
KNOT_SPACING_S = 0.02
#: the limits are checked on the sent spline at this spacing, s
CHECK_SPACING_S = 0.001
#: the shortest ramp, s (a few control periods of any controller)
MIN_RAMP_S = 0.02
#: the longest ramp searched, s, before a ramp is declared impossible within the limits
MAX_RAMP_S = 60.0
#: the search for the ramp's length measures the exact composed motion every this many s and
#: allows this share of each limit; the goal as sent is then checked against the limit itself
SEARCH_SPACING_S = 0.002
SEARCH_USE = 0.97
#: lengthenings by 5 % of a ramp whose sent splines overshoot before giving up
FINAL_TRIES = 10
FINAL_GROWTH = 1.05
#: the search lengthens a ramp by this factor until it fits, then halves the last step this
#: many times (core/stop_ends.py runs the same search for many stops at once)
SEARCH_GROWTH = 1.4
REFINE_STEPS = 5


class ScalingKind(str, enum.Enum):
    RAMP = "ramp"                   # rate f0 -> f1 (smoothstep), then f1
    REST_TO_REST = "rest_to_rest"   # rate 0 -> 0 covering a given plan time (minimum jerk)


@dataclass(frozen=True)
class TimeScaling:
    """Plan time advanced as a function of time since the stamp.

    Attributes:
        kind: RAMP (``f0`` -> ``f1``) or REST_TO_REST (covers ``span`` of plan time, rate 0 at
            both ends).
        duration: T, s (> 0).
        f0, f1: plan speeds at the start and end of a RAMP (plan s per s, >= 0).
        span: plan time covered by a REST_TO_REST, s.
    """

    kind: ScalingKind
    duration: float
    f0: float = 0.0
    f1: float = 0.0
    span: float = 0.0

    @classmethod
    def ramp(cls, f0: float, f1: float, duration: float) -> "TimeScaling":
        return cls(ScalingKind.RAMP, float(duration), float(f0), float(f1))

    @classmethod
    def rest_to_rest(cls, span: float, duration: float) -> "TimeScaling":
        return cls(ScalingKind.REST_TO_REST, float(duration), span=float(span))

    @property
    def covered(self) -> float:
        """Plan time covered over [0, T], s."""
        if self.kind is ScalingKind.RAMP:
            return 0.5 * (self.f0 + self.f1) * self.duration
        return self.span

    @property
    def final_rate(self) -> float:
        return self.f1 if self.kind is ScalingKind.RAMP else 0.0

    def at(self, tau) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Plan time advanced, rate and rate derivative at ``tau`` (s since the stamp, any
        shape); after T the final rate holds."""
        tau = np.asarray(tau, dtype=float)
        T = self.duration
        u = np.clip(tau / T, 0.0, 1.0)
        after = np.maximum(tau - T, 0.0)
        if self.kind is ScalingKind.RAMP:
            df = self.f1 - self.f0
            advanced = self.f0 * np.minimum(tau, T) + df * T * (u**3 - 0.5 * u**4) + \
                self.f1 * after
            rate = self.f0 + df * (3 * u**2 - 2 * u**3)
            rate_dot = np.where(tau < T, df * (6 * u - 6 * u**2) / T, 0.0)
            return advanced, rate, rate_dot
        D = self.span
        advanced = D * (10 * u**3 - 15 * u**4 + 6 * u**5)
        rate = D * (30 * u**2 - 60 * u**3 + 30 * u**4) / T
        rate_dot = np.where(tau < T, D * (60 * u - 180 * u**2 + 120 * u**3) / T**2, 0.0)
        return advanced, rate, rate_dot


@dataclass(frozen=True)
class JointBounds:
    """One arm's velocity and acceleration bounds in its plan's joint order, (J,) each
    (inf: not bounded)."""

    joint_names: tuple[str, ...]
    velocity: np.ndarray
    acceleration: np.ndarray


@dataclass(frozen=True)
class RunningGoal:
    """The goal an arm's controller runs: ``trajectory`` (times from its stamp) from
    ``stamp`` (s, controllers' clock)."""

    trajectory: ArmTrajectory
    stamp: float


@dataclass(frozen=True)
class Ramp:
    """A synchronized speed change, ready to send: every arm's trajectory from one stamp.

    Attributes:
        start_plan_time: s0, the plan time where the scaling starts, s.
        scaling: the time scaling from the ramp's start.
        trajectories: per arm, the goal to send; its time 0 is ``lead_s`` before the ramp
            starts (the lead-in: the running goal, unchanged, up to the ramp).
        end_plan_time: the plan time where the scaling ends (a stop: where the arms stand), s.
        duration: from the ramp's start until the scaling ends (a stop: until every arm
            stands), s.
        peak: largest |v| / v_max or |a| / a_max of any sampled reference from the ramp's
            start on (<= 1).
        binding: (arm, joint, "velocity" or "acceleration") of that peak.
        reaches_end: the plan's end came first (a stop that is the plan's own end, a resume
            that is a rest-to-rest move to it).
        lead_s: where the ramp starts on the goals' time, s (0 without a lead-in).
    """

    start_plan_time: float
    scaling: TimeScaling
    trajectories: Mapping[str, ArmTrajectory]
    end_plan_time: float
    duration: float
    peak: float
    binding: tuple[str, str, str]
    reaches_end: bool = False
    lead_s: float = 0.0

    @property
    def stops(self) -> bool:
        return self.scaling.final_rate == 0.0


def _knots(traj: ArmTrajectory, s: np.ndarray, rate: np.ndarray, rate_dot: np.ndarray,
           accelerations: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The plan ``traj`` at plan times ``s`` under the given rate: p, p' rate and (if asked)
    p'' rate^2 + p' rate'."""
    p, v, a = sample(traj, s)
    vel = v * rate[:, None]
    acc = a * (rate**2)[:, None] + v * rate_dot[:, None] if accelerations else None
    return p, vel, acc


def ramp_trajectory(traj: ArmTrajectory, s0: float, scaling: TimeScaling, then_plan: bool,
                    running: RunningGoal | None = None, t_from: float = 0.0,
                    t_ramp: float = 0.0) -> ArmTrajectory:
    """``traj`` (a plan arm, times from its start) followed from plan time ``s0`` under
    ``scaling``: knots every ~KNOT_SPACING_S over [0, T] carrying exact p, v (and a where the
    plan has accelerations: the goal keeps the plan's interpolation); with ``then_plan`` (a
    RAMP to f1 > 0), the plan's own knots after T at f1.

    With ``running`` the goal starts at ``t_from`` (controllers' clock, s; before the
    controller can pick it up) and its first part is the running goal itself up to ``t_ramp``
    where the ramp starts: its own knots there, and its own spline's state at ``t_from`` and
    ``t_ramp`` (a polynomial segment split at a point with its exact state is the same
    polynomial). A controller picking the goal up after ``t_from`` joins it mid-way and its
    reference goes on continuous in position, velocity (and acceleration): no move from the
    measured state, no step (joint_trajectory_controller interpolates from the measured state
    only before a goal's first point). Without ``running`` the goal starts at the ramp.

    A plan of positions only is run linearly between its waypoints (its velocity steps at
    each one): its ramp is sent the same way, positions only, with a knot wherever the ramp
    passes one of the plan's waypoints, so the reference keeps the plan's path exactly and its
    velocity steps are the plan's own, scaled by the rate. (Sent with velocities, a cubic
    segment across a waypoint must make the step smoothly within one knot spacing: a stop
    from 40 % of the request times near a 10 Hz plan's waypoints reached 1.2-2.4 x the
    acceleration limit, and the executor canceled instead.)
    """
    accelerations = traj.accelerations is not None
    linear = traj.velocities is None
    T = scaling.duration
    k = max(2, int(np.ceil(T / KNOT_SPACING_S)) + 1)
    tau = np.linspace(0.0, T, k)
    if linear:
        tau = _with_waypoints(traj, s0, scaling, tau)
    advanced, rate, rate_dot = scaling.at(tau)
    p, vel, acc = _knots(traj, s0 + advanced, rate, rate_dot, accelerations)
    parts = [(tau, p, vel, acc)]
    s_end = s0 + scaling.covered
    if then_plan and scaling.final_rate > 0 and s_end < traj.duration - 1e-9:
        # the plan's own knots after the ramp, at f1 (a time-scaled spline keeps its path)
        f = scaling.final_rate
        later = traj.times[traj.times > s_end + 1e-6]
        p_r, v_r, a_r = _knots(traj, later, np.full(later.size, f), np.zeros(later.size),
                               accelerations)
        parts.append((T + (later - s_end) / f, p_r, v_r, a_r))
    offset = 0.0
    if running is not None:
        offset = t_ramp - t_from
        g, stamp = running.trajectory, running.stamp
        inner = g.times[(g.times > t_from - stamp + 1e-6) & (g.times < t_ramp - stamp - 1e-6)]
        local = np.concatenate([[t_from - stamp], inner])
        gp, gv, ga = sample(g, local)
        if g.velocities is None:
            gv = None
        lead = (local - (t_from - stamp), gp, gv, ga if g.accelerations is not None else None)
        # the ramp's first knot takes the running goal's own state at t_ramp (exactly
        # continuous; equal to the plan's there up to the running goal's own interpolation)
        jp, jv, ja = sample(g, [t_ramp - stamp])
        tau0, p0, v0, a0 = parts[0]
        p0, v0 = p0.copy(), v0.copy()
        p0[0], v0[0] = jp[0], jv[0]
        if a0 is not None:
            a0 = a0.copy()
            a0[0] = ja[0]
        parts[0] = (tau0, p0, v0, a0)
        parts = [lead] + [(t + offset, pp, vv, aa) for t, pp, vv, aa in parts]
    times = np.concatenate([x[0] for x in parts])
    pos = np.vstack([x[1] for x in parts])
    vel = np.vstack([x[2] if x[2] is not None else np.zeros_like(x[1]) for x in parts])
    acc = np.vstack([x[3] if x[3] is not None else np.zeros_like(x[1]) for x in parts]) \
        if accelerations else None
    if scaling.final_rate == 0.0:
        vel[-1] = 0.0
        if acc is not None:
            acc[-1] = 0.0
    return ArmTrajectory(traj.joint_names, times, pos, None if linear else vel, acc,
                         arm=traj.arm)


def _with_waypoints(traj: ArmTrajectory, s0: float, scaling: TimeScaling,
                    tau: np.ndarray) -> np.ndarray:
    """``tau`` (the ramp's knot times, s from its start) and the times where the ramp passes
    each of ``traj``'s waypoints (found by bisection: the scaled plan time never decreases);
    a knot of ``tau`` closer than a quarter spacing to one of those is left out."""
    T = scaling.duration
    covered = float(scaling.at(np.array([T]))[0][0])
    inner = traj.times[(traj.times > s0 + 1e-9) & (traj.times < s0 + covered - 1e-9)]
    if not inner.size:
        return tau
    lo, hi = np.zeros(inner.size), np.full(inner.size, T)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        below = s0 + scaling.at(mid)[0] < inner
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    at = 0.5 * (lo + hi)
    at = at[(at > 0.0) & (at < T)]
    if not at.size:
        return tau
    near = np.abs(tau[:, None] - at[None, :]).min(axis=1) < 0.25 * KNOT_SPACING_S
    near[0] = near[-1] = False   # the ramp's own ends stay
    return np.unique(np.concatenate([tau[~near], at]))


def peak_use(trajectories: Mapping[str, ArmTrajectory], bounds: Mapping[str, JointBounds],
             start: float, horizon: float) -> tuple[float, tuple[str, str, str]]:
    """Largest |v| / v_max or |a| / a_max of the splines (as the controllers run them) sampled
    every CHECK_SPACING_S over [start, horizon] of their time and on both sides of every knot;
    and (arm, joint, which) where."""
    worst, where = 0.0, ("", "", "")
    for arm, traj in trajectories.items():
        b = bounds[arm]
        end = min(horizon, traj.duration)
        ts = np.arange(start, end + CHECK_SPACING_S / 2, CHECK_SPACING_S)
        # and each knot from both sides: a cubic's acceleration is extreme at its knots
        knots = traj.times[(traj.times >= start) & (traj.times <= end)]
        ts = np.concatenate([ts, knots - 1e-9, np.minimum(knots + 1e-9, end)])
        v, a = sample_rates(traj, ts[ts >= start])
        for which, values, limit in (("velocity", v, b.velocity),
                                     ("acceleration", a, b.acceleration)):
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(np.isfinite(limit), np.abs(values) / limit, 0.0)
            if not ratio.size:
                continue
            j = int(np.argmax(ratio.max(axis=0)))
            if ratio[:, j].max() > worst:
                worst, where = float(ratio[:, j].max()), (arm, traj.joint_names[j], which)
    return worst, where


def plan_ramp(plan: MultiArmPlan, s0: float, f0: float, f1: float,
              bounds: Mapping[str, JointBounds], *,
              running: Mapping[str, RunningGoal] | None = None, t_from: float = 0.0,
              t_ramp: float = 0.0, min_duration: float = MIN_RAMP_S,
              refine: int = REFINE_STEPS) -> Ramp:
    """The shortest smooth change of the plan's speed from ``f0`` to ``f1`` starting at plan
    time ``s0``, within every joint's bounds (see the module docstring); with ``running``
    (every arm's running goal), goals that begin at ``t_from`` with the running goals up to
    ``t_ramp`` where the ramp starts (:func:`ramp_trajectory`).

    A stop (``f1 == 0``) from plan time 0 or before (nothing has moved yet) is a hold at the
    plan's start from the ramp's start (duration 0). A stop whose ramp would pass the plan's
    end is the plan's own end at ``f0`` (``reaches_end``); a start from rest (``f0 == 0``, a resume) whose ramp would pass it is a
    rest-to-rest move there.

    Raises:
        RampLimitError: no ramp up to ``MAX_RAMP_S`` stays within the bounds (the plan's own
            speed or acceleration at ``f0``/``f1`` is beyond them): names arm, joint, plan time.
    """
    duration = plan.duration
    s0 = float(min(max(s0, 0.0), duration))
    arms = plan.arms
    remaining = duration - s0
    lead = (t_ramp - t_from) if running is not None else 0.0
    if f1 == 0.0 and s0 <= 0.0:
        # the ramp starts where the plan has not begun: no arm has left its start, so the stop
        # is a hold there, at once (a ramp from the plan's speed would carry its acceleration
        # at the start, which may be above the bounds: the swing's 5.3 rad/s^2 against 4)
        return Ramp(0.0, TimeScaling.ramp(0.0, 0.0, min_duration),
                    {a: _rest_at(t, 0.0, lead + min_duration) for a, t in arms.items()}, 0.0,
                    0.0, 0.0, ("", "the plan's start", "(nothing had moved)"), False, lead)

    def shape(T: float) -> tuple[TimeScaling, bool]:
        """The scaling a ramp of T becomes, and whether the plan's end comes first."""
        scaling = TimeScaling.ramp(f0, f1, T)
        if scaling.covered < remaining - 1e-9:
            return scaling, False
        if f1 == 0.0:      # the plan ends (at rest) before the ramp would: its own end at f0
            return TimeScaling.ramp(f0, f0, max(remaining / f0 if f0 > 0 else 0.0, 1e-9)), True
        return TimeScaling.rest_to_rest(remaining, T), True   # from rest: a move to the end

    def composed(scaling: TimeScaling) -> tuple[float, tuple[str, str, str]]:
        """Peak use of the exact composed motion p(s(t)) over the scaling (the search's
        measure: one plan sample per arm)."""
        tau = np.arange(0.0, scaling.duration + SEARCH_SPACING_S / 2, SEARCH_SPACING_S)
        advanced, rate, rate_dot = scaling.at(tau)
        worst, where = 0.0, ("", "", "")
        for arm, traj in arms.items():
            v, a = sample_rates(traj, s0 + advanced)
            b = bounds[arm]
            for which, values, limit in (
                    ("velocity", v * rate[:, None], b.velocity),
                    ("acceleration", a * (rate**2)[:, None] + v * rate_dot[:, None],
                     b.acceleration)):
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.where(np.isfinite(limit), np.abs(values) / limit, 0.0)
                if ratio.size and ratio.max() > worst:
                    j = int(np.argmax(ratio.max(axis=0)))
                    worst, where = float(ratio.max()), (arm, traj.joint_names[j], which)
        return worst, where

    # a lower bound from the dominant term: |p'| |rate'| <= a_max with |rate'| peaking at
    # 1.5 |f1 - f0| / T
    T = min_duration
    for arm, t in arms.items():
        _, v, _ = sample(t, [s0])
        a_max = bounds[arm].acceleration
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(np.isfinite(a_max), 1.5 * abs(f1 - f0) * np.abs(v[0]) / a_max, 0.0)
        if need.size:
            T = max(T, float(need.max()))
    bad = None
    while True:
        scaling, ends = shape(T)
        peak, where = composed(scaling)
        if peak <= SEARCH_USE or (ends and f1 == 0.0):
            break
        bad = T
        T *= SEARCH_GROWTH
        if T > MAX_RAMP_S:
            arm, joint, which = where
            raise RampLimitError(
                f"no speed change {f0:g} -> {f1:g} from plan time {s0:.3f} s within the limits "
                f"up to {MAX_RAMP_S:g} s: {which} reaches {peak:.2f} x its limit (the "
                f"plan's own {which} at that speed is beyond it)", arm=arm, joint=joint,
                value=s0)
    if bad is not None and not (ends and f1 == 0.0):
        lo_T, hi_T = bad, T
        for _ in range(refine):
            mid = 0.5 * (lo_T + hi_T)
            if composed(shape(mid)[0])[0] <= SEARCH_USE:
                hi_T = mid
            else:
                lo_T = mid
        T = hi_T
    # the goals as sent, checked on the splines the controllers will run (from the ramp's
    # start on); a ramp whose splines overshoot the limit is lengthened
    for _ in range(FINAL_TRIES):
        scaling, ends = shape(T)
        then_plan = not ends and f1 > 0
        trajs = {a: ramp_trajectory(t, s0, scaling, then_plan,
                                    None if running is None else running[a], t_from, t_ramp)
                 for a, t in arms.items()}
        horizon = lead + scaling.duration + (0.5 if then_plan else 0.0)
        peak, where = peak_use(trajs, bounds, lead, horizon)
        if peak <= 1.0:
            end = duration if ends else s0 + scaling.covered
            return Ramp(s0, scaling, trajs, end, scaling.duration, peak, where, ends, lead)
        if ends and f1 == 0.0:
            break
        T *= FINAL_GROWTH
    arm, joint, which = where
    raise RampLimitError(f"the {which} of the goal from plan time {s0:.3f} s at speed {f0:g} "
                         f"-> {f1:g} reaches {peak:.3f} x its limit", arm=arm, joint=joint,
                         value=s0)


def _rest_at(traj: ArmTrajectory, s: float, until: float) -> ArmTrajectory:
    """``traj``'s position at plan time ``s``, held from the goal's stamp until ``until`` s
    after it (two equal points, at rest: a goal whose last point is in the future, as a
    controller requires of a goal it takes)."""
    p, _, _ = sample(traj, [s])
    p = np.repeat(p, 2, axis=0)
    z = np.zeros_like(p)
    return ArmTrajectory(traj.joint_names, [0.0, float(until)], p, z, z, arm=traj.arm)


def joint_bounds(plan: MultiArmPlan, limits: Mapping[str, Mapping[str, tuple]],
                 default_acceleration: float) -> dict[str, JointBounds]:
    """Per arm of ``plan``: ``limits[arm][joint] = (velocity or None, acceleration or None)``
    in the plan's joint order; a joint without an acceleration limit is bounded by
    ``default_acceleration`` (the configured bound of any speed change)."""
    out = {}
    for arm, traj in plan.arms.items():
        vel, acc = [], []
        for j in traj.joint_names:
            v, a = limits.get(arm, {}).get(j, (None, None))
            vel.append(np.inf if v is None else float(v))
            acc.append(default_acceleration if a is None else float(a))
        out[arm] = JointBounds(traj.joint_names, np.array(vel), np.array(acc))
    return out


def config_bounds(plan: MultiArmPlan, config) -> dict[str, JointBounds]:
    """:func:`joint_bounds` from an :class:`~mj_manipulator_ros.core.config.ExecutorConfig`:
    its arms' limits, ``execution.stop_acceleration`` where a joint has none."""
    limits = {a: {j: (lim.velocity, lim.acceleration)
                  for j, lim in config.arm(a).joint_limits.items()} for a in plan.arm_names}
    return joint_bounds(plan, limits, config.execution.stop_acceleration)


def stop_after_lead(plan: MultiArmPlan, bounds: Mapping[str, JointBounds], request: float,
                    lead: float, speed: float) -> tuple[float, "Ramp"]:
    """A controlled stop asked at plan time ``request`` with the plan at ``speed``: the arms
    keep the plan for ``lead`` s, then ramp to rest. Returns (plan time where the ramp starts,
    the ramp).

    Raises:
        RampLimitError: no stop within the bounds from there.
    """
    s0 = min(float(request) + lead * speed, plan.duration)
    return s0, plan_ramp(plan, s0, speed, 0.0, bounds)
