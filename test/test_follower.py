"""joint_trajectory_controller semantics of the simulated controller, driven synchronously
(one control cycle at a time, sim time = controller time) on a tiny inline arm."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.core.tolerances import JointTolerance
from mj_manipulator_ros.sim.goal import GoalRequest, check_goal
from mj_manipulator_ros.sim.shared_model import SharedModel
from tiny_arm import tiny_config

J = ("left_j1", "left_j2")


@pytest.fixture(params=["position", "torque"])
def sim(tmp_path, request):
    """The JTC rows hold for every simulated controller kind."""
    kind = {"controller": request.param}
    config = tiny_config(tmp_path, sim={"arms": {"left": kind, "right": kind}})
    return SharedModel.from_config(config)


def goal(sim, times, positions, velocities=(), stamp=0.0, **kw):
    req = GoalRequest(J, list(times), [list(p) for p in positions], [list(v) for v in velocities]
                      or [[] for _ in times], [[] for _ in times], stamp, **kw)
    reason, g = check_goal(req, J, sim.controller_time(), sim.settings.tolerances)
    assert reason is None, reason
    return sim.controllers["left"].submit(g)


def run_until_done(sim, ticket, max_cycles=5000):
    for _ in range(max_cycles):
        if ticket.done.is_set():
            return
        sim.step_cycle()
    raise AssertionError("goal did not finish")


def q(sim):
    return sim.snapshot().arms["left"].positions


def test_stamp_zero_starts_next_cycle_and_succeeds(sim) -> None:
    t = goal(sim, [0.5, 1.0], [[0.3, -0.2], [0.5, 0.4]], [[0.4, 0.4], [0, 0]])
    start = sim.controller_time()
    run_until_done(sim, t)
    assert t.outcome == "succeeded" and t.error_code == 0
    assert t.started_at == pytest.approx(start, abs=sim.control_period + 1e-9)
    # onset: once the trajectory proper begins (its first point is at 0.5 s), the first cycle
    # the reference leaves that point
    assert start + 0.5 <= t.motion_onset <= start + 0.5 + 2 * sim.control_period
    assert np.allclose(q(sim), [0.5, 0.4], atol=0.05)
    for _ in range(200):  # holds the last point
        sim.step_cycle()
    assert np.allclose(q(sim), [0.5, 0.4], atol=0.02)


def test_future_stamp_moves_from_state_at_acceptance_to_first_point_at_stamp(sim) -> None:
    for _ in range(10):
        sim.step_cycle()
    now = sim.controller_time()
    stamp = now + 0.4
    t = goal(sim, [0.2, 0.6], [[0.4, 0.0], [0.6, 0.2]], stamp=stamp)
    sim.step_cycle()  # pick-up
    reached = None
    while not t.done.is_set():
        sim.step_cycle()
        with t.lock:
            if reached is None and np.allclose(t.desired, [0.4, 0.0], atol=1e-9):
                reached = t.time
    assert t.started_at == pytest.approx(stamp)
    assert reached == pytest.approx(stamp + 0.2, abs=sim.control_period + 1e-9)
    assert t.outcome == "succeeded"


def test_past_stamp_joins_mid_trajectory(sim) -> None:
    for _ in range(500):  # 1 s
        sim.step_cycle()
    now = sim.controller_time()
    t = goal(sim, [0.0, 2.0], [[0.0, 0.0], [1.0, 1.0]], stamp=now - 1.0)
    sim.step_cycle()
    with t.lock:
        desired = t.desired.copy()
    assert np.allclose(desired, [0.5, 0.5], atol=0.01)  # linear, half way


def test_trajectory_entirely_in_the_past_is_rejected(sim) -> None:
    for _ in range(500):
        sim.step_cycle()
    req = GoalRequest(J, [0.0, 0.5], [[0, 0], [0.1, 0.1]], [[], []], [[], []],
                      sim.controller_time() - 1.0)
    reason, g = check_goal(req, J, sim.controller_time(), sim.settings.tolerances)
    assert g is None and "ends in the past" in reason


def test_path_tolerance_violation_aborts_minus_4(sim) -> None:
    t = goal(sim, [0.1], [[1.5, 1.5]], path_tolerance=(JointTolerance("left_j1", 0.01),))
    run_until_done(sim, t)
    assert t.outcome == "aborted" and t.error_code == -4
    assert "path tolerance violated: joint left_j1: position error" in t.error_string


def test_goal_tolerance_not_met_aborts_minus_5(sim, tmp_path) -> None:
    # Unreachable: 1.9 rad in 10 ms with a goal tolerance of 1e-4 and 0.05 s to get there.
    t = goal(sim, [0.01], [[1.9, 0.0]], goal_tolerance=(JointTolerance("left_j1", 1e-4),),
             goal_time_tolerance=0.05)
    run_until_done(sim, t)
    assert t.outcome == "aborted" and t.error_code == -5
    assert "goal tolerance violated 0.05 s after the end" in t.error_string


def test_minus_one_means_unchecked(sim) -> None:
    # position and velocity erased (the stopped-velocity default of 0.01 would apply otherwise)
    t = goal(sim, [0.01], [[1.9, 0.0]], goal_tolerance=(JointTolerance("left_j1", -1.0, -1.0),
                                                          JointTolerance("left_j2", -1.0, -1.0)))
    for _ in range(10):  # 20 ms: past the 10 ms end
        sim.step_cycle()
    assert t.outcome == "succeeded"  # nothing checked: done at the end


def test_cancel_holds_measured_position_within_one_cycle(sim) -> None:
    t = goal(sim, [2.0], [[1.0, -1.0]])
    for _ in range(250):
        sim.step_cycle()
    sim.controllers["left"].cancel(t)
    measured = q(sim)
    sim.step_cycle()
    assert t.done.is_set() and t.outcome == "canceled" and t.error_code == 0
    held = sim.controllers["left"].follower.position
    assert np.allclose(held, measured)  # the reference is the position measured at the cancel
    for _ in range(300):
        sim.step_cycle()
    assert np.allclose(q(sim), held, atol=0.02)


def test_new_goal_preempts_the_old_one(sim) -> None:
    old = goal(sim, [2.0], [[1.0, 1.0]])
    for _ in range(50):
        sim.step_cycle()
    new = goal(sim, [0.5], [[0.0, 0.0]])
    sim.step_cycle()
    assert old.outcome == "aborted" and old.error_code == -1
    assert old.error_string == "Current goal preempted by new incoming action."
    run_until_done(sim, new)
    assert new.outcome == "succeeded"


@pytest.mark.parametrize("kind, vel, acc", [("linear", False, False), ("cubic", True, False),
                                            ("quintic", True, True)])
def test_interpolation_kinds_hit_waypoints(sim, kind, vel, acc) -> None:
    times, pos = [0.2, 0.4], [[0.2, 0.1], [0.3, 0.3]]
    v = [[0.5, 0.5], [0, 0]] if vel else [[], []]
    a = [[0, 0], [0, 0]] if acc else [[], []]
    req = GoalRequest(J, times, pos, v, a, 0.0)
    _, g = check_goal(req, J, sim.controller_time(), sim.settings.tolerances)
    t = sim.controllers["left"].submit(g)
    samples = []
    while not t.done.is_set():
        sim.step_cycle()
        with t.lock:
            samples.append((t.time - t.started_at, t.desired.copy()))
    at = {round(s, 3): d for s, d in samples}
    assert np.allclose(at[0.4], [0.3, 0.3], atol=1e-6)
    if kind == "cubic":
        # the spline passes the first waypoint at t=0.2 with the given velocity
        assert np.allclose(at[0.2], [0.2, 0.1], atol=1e-6)


@pytest.mark.parametrize("req, message", [
    (dict(joint_names=("left_j1", "left_jX")), "unknown joint(s) ['left_jX']"),
    (dict(joint_names=("left_j1",)), "missing joint(s) ['left_j2']"),
    (dict(joint_names=("left_j1", "left_j1")), "duplicate joint(s) ['left_j1']"),
    (dict(times=[], positions=[], velocities=[], accelerations=[]), "no points"),
    (dict(times=[0.5, 0.5]), "not strictly increasing"),
    (dict(positions=[[0, 0], [0.1]]), "point 1: positions has 1 values, expected 2"),
    (dict(velocities=[[0, 0], [0.1, 0]]), "final velocity of left_j1 is 0.1"),
])
def test_rejections(sim, req, message) -> None:
    base = dict(joint_names=J, times=[0.5, 1.0], positions=[[0, 0], [0.1, 0.1]],
                velocities=[[], []], accelerations=[[], []], stamp_s=0.0)
    base.update(req)
    if "joint_names" in req and len(req["joint_names"]) == 1:
        base["positions"] = [[0], [0.1]]
    reason, g = check_goal(GoalRequest(**base), J, 0.0, sim.settings.tolerances)
    assert g is None and message in reason


def test_command_latency_delays_the_servo(tmp_path) -> None:
    """With 100 ms of command latency the arm starts moving 100 ms after the reference does."""
    from tiny_arm import tiny_config

    sim = SharedModel.from_config(tiny_config(
        tmp_path, sim={"faults": {"left": {"command_latency_s": 0.1}}}))
    onsets = {}
    for arm in ("left", "right"):
        joints = (f"{arm}_j1", f"{arm}_j2")
        req = GoalRequest(joints, [0.5], [[0.5, 0.5]], [[]], [[]], 0.0)
        _, g = check_goal(req, joints, 0.0, sim.settings.tolerances)
        sim.controllers[arm].submit(g)
    for _ in range(200):
        snap = sim.step_cycle() or sim.snapshot()
        for arm, state in snap.arms.items():
            if arm not in onsets and abs(state.positions[0]) > 1e-3:
                onsets[arm] = snap.sim_time
    assert onsets["left"] - onsets["right"] == pytest.approx(0.1, abs=2 * sim.control_period + 1e-9)


def _reference_spline(times, pos, vel, acc, t):
    """Independent reference: per segment, the polynomial matching position, velocity (and
    acceleration) at both ends, solved as a linear system (cubic: 4 conditions, quintic: 6)."""
    k = int(np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(times) - 2))
    T, s = times[k + 1] - times[k], t - times[k]
    order = 6 if acc is not None else 4

    def rows(x):  # d^0, d^1, d^2 of [1, x, x^2, ...]
        p = [x ** i for i in range(order)]
        d = [i * x ** (i - 1) if i else 0.0 for i in range(order)]
        dd = [i * (i - 1) * x ** (i - 2) if i > 1 else 0.0 for i in range(order)]
        return p, d, dd
    A, b = [], []
    for x, idx in ((0.0, k), (T, k + 1)):
        p, d, dd = rows(x)
        A += [p, d] + ([dd] if acc is not None else [])
        b += [pos[idx], vel[idx]] + ([acc[idx]] if acc is not None else [])
    coef = np.linalg.solve(np.array(A), np.array(b))
    return rows(s)[0] @ coef


@pytest.mark.parametrize("quintic", [False, True])
def test_interior_reference_matches_the_analytic_spline(sim, quintic) -> None:
    """Between waypoints the commanded reference is the spline JTC would run (cubic with
    velocities, quintic with accelerations), checked at every control cycle against an
    independent solve of the boundary conditions, not only at the held final point."""
    times = np.array([0.2, 0.6, 1.0])
    pos = np.array([[0.3, -0.2], [0.5, 0.4], [0.1, 0.2]])
    vel = np.array([[0.0, 0.5], [0.4, -0.3], [0.0, 0.0]])
    acc = np.array([[0.0, 0.0], [-1.0, 2.0], [0.0, 0.0]]) if quintic else None
    req = GoalRequest(J, list(times), pos.tolist(), vel.tolist(),
                      acc.tolist() if quintic else [[] for _ in times], 0.0)
    reason, g = check_goal(req, J, sim.controller_time(), sim.settings.tolerances)
    assert reason is None, reason
    t = sim.controllers["left"].submit(g)
    seen = 0
    while not t.done.is_set():
        sim.step_cycle()
        with t.lock:
            if t.started_at is None or t.desired is None:
                continue
            local = t.time - t.started_at
            if times[0] < local < times[-1]:
                expected = np.array([_reference_spline(times, pos[:, j], vel[:, j],
                                                       None if acc is None else acc[:, j], local)
                                     for j in range(2)])
                assert np.allclose(t.desired, expected, atol=1e-9), (local, t.desired, expected)
                seen += 1
    assert seen > 300  # 0.8 s at 500 Hz


def test_the_freeze_fault_stops_the_reference_where_the_arm_is_and_never_finishes(sim) -> None:
    """``sim.faults.<arm>.freeze`` (a controller that stops following mid-motion): from the
    cycle it is set, the goal's reference is the arm's pose then, the goal does not end."""
    import dataclasses

    t = goal(sim, [0.0, 1.5], [[0.0, 0.0], [0.8, 0.6]], [[0, 0], [0, 0]])
    for _ in range(int(0.6 / sim.control_period)):
        sim.step_cycle()
    controller = sim.controllers["left"]
    follower = controller.follower
    follower.faults = dataclasses.replace(follower.faults, freeze=True)
    at_freeze = q(sim).copy()
    for _ in range(int(1.5 / sim.control_period)):   # past the trajectory's end
        sim.step_cycle()
    assert not t.done.is_set(), t.outcome
    held = q(sim)
    # the arm stays near where it froze (its run-on as its servo stops it), far from the goal
    assert np.abs(held - at_freeze).max() < 0.05, (held, at_freeze)
    assert np.abs(held - [0.8, 0.6]).max() > 0.3, held
