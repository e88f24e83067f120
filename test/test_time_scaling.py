"""Synchronized speed changes along the plan (core/time_scaling.py), against independent
references: finite differences of the sent splines for the limits, a numerically integrated
rate for the plan time, the plan itself for the path."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.core.errors import RampLimitError
from mj_manipulator_ros.core.interpolation import rest_to_rest, sample
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.sync import PlanClock
from mj_manipulator_ros.core.time_scaling import (
    RunningGoal, ScalingKind, TimeScaling, joint_bounds, plan_ramp)

V_MAX, A_MAX = 2.0, 4.0


def two_arm_plan(duration: float = 3.0, n: int = 61) -> MultiArmPlan:
    """Two 2-joint arms, each a rest-to-rest move (cubic: positions and velocities)."""
    t = np.linspace(0.0, duration, n)
    arms = {}
    for arm, target in (("left", [1.2, -0.8]), ("right", [-0.6, 1.5])):
        p, v = rest_to_rest(np.zeros(2), np.array(target), t)
        arms[arm] = ArmTrajectory((f"{arm}_j1", f"{arm}_j2"), t, p, v)
    return MultiArmPlan(arms)


def bounds_for(plan: MultiArmPlan, acceleration: float | None = None):
    limits = {a: {j: (V_MAX, acceleration) for j in plan[a].joint_names} for a in plan.arm_names}
    return joint_bounds(plan, limits, A_MAX)


def fd_peaks(traj: ArmTrajectory, start: float = 0.0, h: float = 1e-4) -> tuple[float, float]:
    ts = np.arange(start, traj.duration, h)
    q, _, _ = sample(traj, ts)
    v = np.diff(q, axis=0) / h
    a = np.diff(v, axis=0) / h
    return float(np.abs(v).max()), float(np.abs(a).max())


@pytest.mark.parametrize("s0", [0.4, 1.1, 1.5, 2.2])
def test_a_stop_stays_on_the_path_within_the_limits_and_ends_on_one_plan_time(s0) -> None:
    plan = two_arm_plan()
    ramp = plan_ramp(plan, s0, 1.0, 0.0, bounds_for(plan))
    assert ramp.stops and not ramp.reaches_end
    # the plan time reached, by integrating the rate numerically (not the closed form)
    tau = np.linspace(0.0, ramp.duration, 20001)
    _, rate, _ = ramp.scaling.at(tau)
    covered = float(np.sum(0.5 * (rate[1:] + rate[:-1]) * np.diff(tau)))
    assert ramp.end_plan_time == pytest.approx(s0 + covered, abs=1e-9)
    for arm, traj in ramp.trajectories.items():
        v, a = fd_peaks(traj)
        assert v <= V_MAX and a <= A_MAX, (arm, v, a)
        # on the plan's path: at every knot exactly, between knots within the spline's error
        s_num = s0 + np.concatenate([[0.0], np.cumsum(0.5 * (rate[1:] + rate[:-1])
                                                      * np.diff(tau))])
        goal_q, _, _ = sample(traj, tau)
        plan_q, _, _ = sample(plan[arm], s_num)
        assert np.abs(goal_q - plan_q).max() < 1e-5, arm
        # at rest at the shared plan time
        final, _, _ = sample(plan[arm], [ramp.end_plan_time])
        assert np.abs(traj.positions[-1] - final[0]).max() < 1e-12
        assert not traj.velocities[-1].any()


def test_the_tightest_joint_of_any_arm_sets_the_ramp() -> None:
    """Halving one joint's acceleration limit (right arm only) lengthens both arms' ramp."""
    plan = two_arm_plan()
    loose = plan_ramp(plan, 1.5, 1.0, 0.0, bounds_for(plan))
    limits = {a: {j: (V_MAX, None) for j in plan[a].joint_names} for a in plan.arm_names}
    limits["right"]["right_j2"] = (V_MAX, A_MAX / 2)
    tight = plan_ramp(plan, 1.5, 1.0, 0.0, joint_bounds(plan, limits, A_MAX))
    assert tight.duration > 1.3 * loose.duration
    assert tight.binding[:2] == ("right", "right_j2")
    assert fd_peaks(tight.trajectories["right"])[1] <= A_MAX / 2 * 1.0001


def test_the_goal_begins_with_the_running_goal_unchanged() -> None:
    """The lead-in: from t_from to the ramp the goal is the running goal's own spline (a
    controller joining it mid-way runs on continuously)."""
    plan = two_arm_plan()
    stamp = 50.0
    running = {a: RunningGoal(plan[a], stamp) for a in plan.arm_names}
    ramp = plan_ramp(plan, 1.2, 1.0, 0.0, bounds_for(plan), running=running,
                     t_from=stamp + 0.93, t_ramp=stamp + 1.2)
    assert ramp.lead_s == pytest.approx(0.27)
    ts = np.linspace(0.0, ramp.lead_s, 500)
    for arm, traj in ramp.trajectories.items():
        q, v, _ = sample(traj, ts)
        q0, v0, _ = sample(plan[arm], ts + 0.93)
        assert np.abs(q - q0).max() < 1e-12 and np.abs(v - v0).max() < 1e-12
        assert fd_peaks(traj)[1] <= A_MAX


def test_a_speed_change_ends_on_the_plans_own_knots_at_the_new_speed() -> None:
    plan = two_arm_plan()
    ramp = plan_ramp(plan, 1.0, 1.0, 0.5, bounds_for(plan))
    traj = ramp.trajectories["left"]
    after = traj.times > ramp.duration + 1e-9
    later = plan["left"].times[plan["left"].times > ramp.end_plan_time + 1e-6]
    assert np.allclose(traj.times[after], ramp.duration + (later - ramp.end_plan_time) / 0.5)
    assert np.allclose(traj.positions[after], plan["left"].positions[-later.size:])
    assert np.allclose(traj.velocities[after], 0.5 * plan["left"].velocities[-later.size:])


def test_a_resume_near_the_end_is_a_rest_to_rest_move_to_it() -> None:
    plan = two_arm_plan()
    ramp = plan_ramp(plan, plan.duration - 0.01, 0.0, 1.0, bounds_for(plan))
    assert ramp.reaches_end and ramp.scaling.kind is ScalingKind.REST_TO_REST
    assert ramp.end_plan_time == plan.duration
    for arm, traj in ramp.trajectories.items():
        assert np.abs(traj.positions[-1] - plan[arm].positions[-1]).max() < 1e-12
        assert fd_peaks(traj)[1] <= A_MAX


def test_a_stop_the_plans_end_comes_before_is_the_plans_end() -> None:
    plan = two_arm_plan()
    ramp = plan_ramp(plan, plan.duration - 0.005, 1.0, 0.0, bounds_for(plan))
    assert ramp.reaches_end and ramp.end_plan_time == plan.duration


def test_no_ramp_within_limits_the_plan_itself_breaks_is_refused_by_name() -> None:
    """A bound below the plan's own acceleration: no stop along it exists."""
    plan = two_arm_plan()
    with pytest.raises(RampLimitError, match=r"arm '(left|right)', joint '\w+_j\d'"):
        plan_ramp(plan, 0.3, 1.0, 0.0, bounds_for(plan, acceleration=0.05))


def test_the_plan_clock_follows_a_ramp_with_a_continuous_rate() -> None:
    clock = PlanClock(10.0)
    scaling = TimeScaling.ramp(1.0, 0.0, 0.4)
    clock.rescale(11.0, 1.0, scaling)
    assert clock.plan_time(10.5) == pytest.approx(0.5)
    assert clock.rate(10.999999) == pytest.approx(1.0)
    assert clock.rate(11.0) == pytest.approx(1.0) and clock.rate(11.2) == pytest.approx(0.5)
    assert clock.plan_time(12.0) == pytest.approx(1.0 + 0.2)    # f0 T / 2 covered, then rest
    assert clock.rate(12.0) == 0.0 and clock.slowest_moving == 1.0


def linear_plan(duration: float = 3.0, n: int = 31) -> MultiArmPlan:
    """Two 2-joint arms out and back on a sin^2 profile, positions only (a controller runs them
    linearly: the velocity steps at each waypoint)."""
    t = np.linspace(0.0, duration, n)
    s = np.sin(np.pi * t / duration) ** 2
    return MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), t, np.outer(s, [0.4, 0.3]))
                         for a in ("left", "right")})


def test_a_position_only_plan_stops_and_resumes_from_any_plan_time_on_its_own_path() -> None:
    """A plan of positions only: a stop asked at any plan time (with the running goal as its
    lead-in) and a resume from rest at any plan time stay within the limits and on the plan's
    polyline; the goals are sent as the plan is, positions only, and their velocity steps are
    the plan's own (at its waypoints) or the ramp's deceleration (elsewhere). Regression: sent
    with velocities, 941 of 3,429 stops and 160 of 270 resumes of this plan were refused
    (1.2-2.6 x the acceleration limit), and the executor canceled instead."""
    plan = linear_plan()
    bounds = bounds_for(plan)
    stamp = 10.0
    running = {a: RunningGoal(plan[a], stamp) for a in plan.arm_names}
    waypoint_step = np.abs(np.diff(np.diff(plan["left"].positions, axis=0) / 0.1, axis=0)).max()
    cases = [(s0, 1.0, 0.0) for s0 in np.arange(0.3, 2.7, 0.0237)] + \
        [(s0, 0.0, 1.0) for s0 in np.arange(0.0, 2.7, 0.0531)]
    for s0, f0, f1 in cases:
        lead_in = dict(running=running, t_from=stamp + s0 - 0.3, t_ramp=stamp + s0) \
            if f0 > 0 else {}
        ramp = plan_ramp(plan, s0, f0, f1, bounds, **lead_in)
        for arm, traj in ramp.trajectories.items():
            assert traj.velocities is None, (s0, f0, arm)
            after = traj.times >= ramp.lead_s - 1e-12
            # every knot on the plan's path: the plan's position at some plan time
            ts = np.linspace(0.0, plan.duration, 6001)
            path, _, _ = sample(plan[arm], ts)
            gap = np.abs(traj.positions[after][:, None, :] - path[None, :, :]).max(axis=2)
            slope = np.abs(np.diff(plan[arm].positions, axis=0) / 0.1).max()
            assert gap.min(axis=1).max() <= slope * (ts[1] - ts[0]) / 2 + 1e-9, (s0, f0, arm)
            # the reference's speed and its steps, from the knots (not from the sampler)
            h = np.diff(traj.times[after])
            v = np.diff(traj.positions[after], axis=0) / h[:, None]
            assert np.abs(v).max() <= V_MAX, (s0, f0, arm)
            steps = np.abs(np.diff(v, axis=0)).max(axis=1)
            inner = traj.positions[after][1:-1]
            on_waypoint = np.abs(inner[:, None, :] - plan[arm].positions[None, :, :]).max(
                axis=2).min(axis=1) < 1e-9
            allowed = A_MAX * 0.5 * (h[1:] + h[:-1]) + np.where(on_waypoint, waypoint_step, 0.0)
            assert (steps <= allowed + 1e-9).all(), (s0, f0, arm, steps - allowed)
