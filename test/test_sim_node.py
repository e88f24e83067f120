"""The simulator node through real rclpy clients: JTC semantics, /joint_states, /clock, faults."""

from __future__ import annotations

import time

import numpy as np
import pytest
import rclpy
from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectoryPoint

from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.report import ArmStatus, StopKind
from mj_manipulator_ros.core.sync import FailureReason
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from mj_manipulator_ros.sim.goal import PREEMPTED_MESSAGE
from mj_manipulator_ros.sim.sim_node import SimNode
from action_helpers import result, send
from tiny_arm import tiny_config


@pytest.fixture(params=["position", "torque", "mit"])
def sim(ros, tmp_path, request):
    """Factory of simulator nodes; every test runs with each simulated controller kind (mit:
    the actuator twin co-simulated with MuJoCo)."""
    made = []
    kind = {"controller": request.param}
    physics = {"physics": "cosim"} if request.param == "mit" else {}

    def make(**sim_settings):
        settings = {"real_time_factor": 1.0, "arms": {"left": kind, "right": kind}, **physics,
                    **sim_settings}
        node = SimNode(tiny_config(tmp_path, sim=settings), context=ros.context).start()
        made.append(node)
        return node
    yield make
    for node in made:
        node.close()


@pytest.fixture
def client(ros):
    node = rclpy.create_node("sim_test_client", context=ros.context)
    executor = SingleThreadedExecutor(context=ros.context)
    executor.add_node(node)
    clients = {}

    def get(arm="left"):
        if arm not in clients:
            clients[arm] = ActionClient(node, FollowJointTrajectory,
                                        f"/{arm}_arm_controller/follow_joint_trajectory")
            assert clients[arm].wait_for_server(timeout_sec=10.0)
        return clients[arm]
    yield get, executor, node
    for c in clients.values():
        c.destroy()
    executor.shutdown()
    node.destroy_node()


def make_goal(arm="left", points=((0.5, (0.3, -0.2)), (1.0, (0.5, 0.3))), joints=None):
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = joints or [f"{arm}_j1", f"{arm}_j2"]
    for t, pos in points:
        p = JointTrajectoryPoint(positions=list(pos))
        p.time_from_start.sec, p.time_from_start.nanosec = int(t), int(round((t % 1) * 1e9))
        goal.trajectory.points.append(p)
    return goal


def test_goal_succeeds_with_feedback(sim, client) -> None:
    sim()
    get, ex, _ = client
    fb = []
    h = send(get(), ex, make_goal(), fb.append)
    assert h.accepted
    r = result(ex, h)
    assert r.status == GoalStatus.STATUS_SUCCEEDED and r.result.error_code == 0
    assert len(fb) >= 10  # 20 Hz over 1 s
    last = fb[-1].feedback
    assert list(last.joint_names) == ["left_j1", "left_j2"]
    assert len(last.desired.positions) == len(last.actual.positions) == len(last.error.positions) == 2
    assert len(last.desired.accelerations) == 2  # the spline's accelerations, as JTC sends
    if "index" in FollowJointTrajectory.Feedback.get_fields_and_field_types():  # 6.3+ (Kilted)
        assert last.index == 2  # past the last of 2 points: JTC reports N


def test_invalid_goal_is_rejected(sim, client) -> None:
    sim()
    get, ex, _ = client
    assert not send(get(), ex, make_goal(joints=["left_j1", "right_j2"])).accepted


def test_cancel_is_canceled_with_code_0(sim, client) -> None:
    node = sim()
    get, ex, _ = client
    h = send(get(), ex, make_goal(points=((3.0, (1.0, 1.0)),)))
    time.sleep(0.3)
    cancel = h.cancel_goal_async()
    ex.spin_until_future_complete(cancel, timeout_sec=5.0)
    assert len(cancel.result().goals_canceling) == 1
    r = result(ex, h)
    assert r.status == GoalStatus.STATUS_CANCELED and r.result.error_code == 0
    held = node.shared.snapshot().arms["left"].positions
    time.sleep(0.3)
    assert abs(node.shared.snapshot().arms["left"].positions - held).max() < 0.02


def test_new_goal_preempts(sim, client) -> None:
    sim()
    get, ex, _ = client
    old = send(get(), ex, make_goal(points=((3.0, (1.0, 1.0)),)))
    time.sleep(0.2)
    new = send(get(), ex, make_goal(points=((0.3, (0.0, 0.0)),)))
    r_old = result(ex, old)
    assert r_old.status == GoalStatus.STATUS_ABORTED and r_old.result.error_code == -1
    assert r_old.result.error_string == "Current goal preempted by new incoming action."
    assert result(ex, new).status == GoalStatus.STATUS_SUCCEEDED


def test_joint_states_and_clock_while_moving(sim, client) -> None:
    """Joint states at their rate while moving; /clock at sim.clock_rate_hz of sim time (100 Hz
    here, against 500 Hz control cycles), never backwards."""
    node_ = sim(joint_state_rate_hz=100.0, clock_rate_hz=100.0)
    assert node_.shared.control_period < 0.01
    get, ex, node = client
    states, clocks = [], []
    node.create_subscription(JointState, "/joint_states", states.append, 100)
    node.create_subscription(Clock, "/clock", clocks.append, 100)
    h = send(get(), ex, make_goal())
    result(ex, h)
    assert clocks, "no /clock with use_sim_time"
    steps = np.diff([c.clock.sec + c.clock.nanosec * 1e-9 for c in clocks])
    assert np.median(steps) == pytest.approx(0.01, abs=1e-9), np.unique(steps.round(6))
    assert np.all(steps > 0) and np.allclose(steps / 0.01, np.round(steps / 0.01), atol=1e-6)
    moving = [s for s in states if abs(s.velocity[0]) > 0.05]
    assert len(moving) >= 20, "joint states must keep coming while the arm moves"
    assert list(states[-1].name) == ["left_j1", "left_j2", "right_j1", "right_j2"]
    stamps = [s.header.stamp.sec + s.header.stamp.nanosec * 1e-9 for s in states]
    assert all(b > a for a, b in zip(stamps, stamps[1:]))


def test_faults(sim, client) -> None:
    node = sim()
    get, ex, _ = client
    node.set_faults("left", reject_next_goal=True)
    assert not send(get(), ex, make_goal()).accepted
    assert send(get(), ex, make_goal()).accepted  # only the next one

    node.set_faults("left", abort_after_s=0.2)
    r = result(ex, send(get(), ex, make_goal()))
    assert r.status == GoalStatus.STATUS_ABORTED and r.result.error_code == -4
    assert "injected fault" in r.result.error_string

    node.set_faults("left", abort_after_s=None, stall=True)
    h = send(get(), ex, make_goal(points=((0.2, (0.1, 0.1)),)))
    f = h.get_result_async()
    ex.spin_until_future_complete(f, timeout_sec=1.0)
    assert not f.done(), "a stalled goal must not finish"
    cancel = h.cancel_goal_async()
    ex.spin_until_future_complete(cancel, timeout_sec=5.0)
    ex.spin_until_future_complete(f, timeout_sec=5.0)
    assert f.result().status == GoalStatus.STATUS_CANCELED

    # the accept delay is on the controller's clock (here sim time, faster than wall time at
    # real_time_factor 0: measured 0.497 s of wall time for 0.5 s of it)
    node.set_faults("left", stall=False, accept_delay_s=0.5)
    t0 = node.shared.controller_time("left")
    assert send(get(), ex, make_goal()).accepted
    assert node.shared.controller_time("left") - t0 >= 0.5


def tiny_plan(duration=1.0):
    arms = {}
    for a, sign in (("left", 1), ("right", -1)):
        arms[a] = ArmTrajectory((f"{a}_j1", f"{a}_j2"), [0.0, duration / 2, duration],
                                [[0, 0], [sign * 0.4, 0.3], [0, 0]], [[0, 0], [0, 0], [0, 0]])
    return MultiArmPlan(arms)


def test_executor_on_sim_time(sim, ros, tmp_path) -> None:
    node = sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    with MultiArmExecutor(config, context=ros.context) as executor:
        report = executor.execute(tiny_plan())
    assert report.succeeded, report.summary()
    onsets = [t.motion_onset for t in (node.arms["left"].tickets[0], node.arms["right"].tickets[0])]
    assert abs(onsets[0] - onsets[1]) <= node.shared.control_period + 1e-9
    assert min(onsets) >= report.start_stamp - 1e-9


@pytest.mark.parametrize("cancel_peers", [False, True], ids=["controlled", "cancel"])
def test_executor_peer_stopped_by_sim_fault(sim, ros, tmp_path, cancel_peers) -> None:
    """The right controller aborts; the left arm is stopped along the plan (its plan goal
    preempted by a stop goal that succeeds at rest), or, with cancel_peers_on_failure,
    canceled."""
    node = sim()
    node.set_faults("right", abort_after_s=0.3)
    config = tiny_config(tmp_path, execution={"use_sim_time": True,
                                              "cancel_peers_on_failure": cancel_peers}).executor
    with MultiArmExecutor(config, context=ros.context) as executor:
        report = executor.execute(tiny_plan(duration=3.0))
    assert report.first_failure.arm == "right"
    assert report.first_failure.reason is FailureReason.ABORTED
    left = report.arms["left"]
    tickets = node.arms["left"].tickets
    # every stopped arm's stop measured on its joint states (the held one's from its result)
    for arm in ("left", "right"):
        r = report.arms[arm]
        assert r.stop_travel is not None and 0.0 <= r.stop_time_s <= r.stop_observed_s, r
    if cancel_peers:
        assert left.status is ArmStatus.CANCELED and left.stop_confirmed
        assert [t.outcome for t in tickets] == ["canceled"]
    else:
        assert left.status is ArmStatus.STOPPED and left.stop is StopKind.CONTROLLED, \
            report.summary()
        assert [t.outcome for t in tickets] == ["aborted", "succeeded"]  # preempted, at rest
        assert tickets[0].error_string == PREEMPTED_MESSAGE
        assert len(node.arms["right"].tickets) == 1
        # measured against computed: the travel the ramp predicts (the reference's, from the
        # plan) is the arm's, up to where it lagged its reference at the request (its tracking
        # error), and it rests at the plan's pose at the stop's plan time
        from mj_manipulator_ros.core.interpolation import sample
        expected, _, _ = sample(tiny_plan(duration=3.0)["left"], [report.stops[0].plan_time_end])
        rest_error = np.abs(node.shared.snapshot().arms["left"].positions - expected[0]).max()
        assert rest_error < 0.01, rest_error
        predicted = report.stops[0].travel["left"]
        assert abs(left.stop_travel - predicted) <= left.max_tracking_error + rest_error, \
            (left.stop_travel, predicted, left.max_tracking_error, rest_error)
    print({a: (r.stop.value if r.stop else None, r.stop_travel, r.stop_time_s)
           for a, r in report.arms.items()})


def test_goals_end_when_the_simulator_closes(sim, client) -> None:
    """A goal that starts, or is running, while the simulator closes is ended, never left
    waiting for a physics thread that has stopped (that would hang the executor's shutdown)."""
    node = sim()
    get, ex, _ = client
    running = send(get(), ex, make_goal(points=((5.0, (1.0, 1.0)),)))
    assert running.accepted  # a goal is running while the simulator closes
    node.arms["right"].closing.set()  # as close() does first
    late = send(get("right"), ex, make_goal("right"))
    r = result(ex, late, timeout=5.0)
    assert r.status == GoalStatus.STATUS_ABORTED
    assert r.result.error_string == "simulator shutting down"
    t0 = time.monotonic()
    node.close()  # with the left goal still running
    assert time.monotonic() - t0 < 10.0
    node.close = lambda: None  # the fixture's close is already done
    assert all(t.done.is_set() for t in node.arms["left"].tickets)


def test_cancel_before_the_goal_starts_executing_is_kept(sim, client) -> None:
    """A cancel that arrives after acceptance but before the server's execute callback has
    registered the goal cancels it (regression: answered ACCEPT and lost; the goal ran on)."""
    # the cancel reaches the server while the goal waits to be picked up; the server's cancel
    # callback answers only after the goal has started executing
    node = sim(faults={"left": {"pickup_delay_s": 0.3, "cancel_delay_s": 0.6}})
    get, executor, _ = client
    start = node.shared.snapshot().arms["left"].positions.copy()
    handle = send(get("left"), executor, make_goal())
    assert handle.accepted
    cancel = handle.cancel_goal_async()
    executor.spin_until_future_complete(cancel, timeout_sec=5.0)
    res = result(executor, handle)
    assert res.status == GoalStatus.STATUS_CANCELED, res.result.error_string
    moved = abs(node.shared.snapshot().arms["left"].positions - start).max()
    assert moved < 1e-3, f"the arm moved {moved} rad"


def test_an_accepted_goal_is_not_aborted_for_its_stamp_at_execution(sim, client) -> None:
    """The goal's end passes between acceptance and execution (a busy controller): JTC checks
    the stamp only on arrival and then runs the goal (it joins past its end and holds the last
    point); regression: aborted with -3 at execution."""
    node = sim(faults={"left": {"pickup_delay_s": 0.4}})
    get, ex, _ = client
    goal = make_goal(points=((0.05, (0.3, -0.2)), (0.1, (0.3, -0.2))))
    now = node.shared.controller_time()
    stamp = now + 0.05
    goal.trajectory.header.stamp.sec = int(stamp)
    goal.trajectory.header.stamp.nanosec = int(round((stamp % 1) * 1e9))
    handle = send(get(), ex, goal)
    assert handle.accepted
    r = result(ex, handle)
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.error_string


def test_faults_applied_at_start_are_refused_at_run_time(sim) -> None:
    """A force limit or a command latency changed on a running simulator would be silently
    ignored (they are applied when it starts): refused by name, the faults unchanged."""
    node = sim()
    before = node.arms["left"].faults
    for change in ({"force_limit": {"left_j1": 1.0}}, {"command_latency_s": 0.01},
                   {"sign_flip": ("left_j1",)}):
        with pytest.raises(ValueError, match=f"{next(iter(change))}.*wired when the simulator"):
            node.set_faults("left", **change)
    assert node.arms["left"].faults == before


def test_goals_take_over_in_the_order_they_were_accepted(sim, client) -> None:
    """The first goal's execution starts late (a 0.5 s pickup delay) and the second's at once:
    the second, accepted later, is the one that runs; the first ends preempted without running
    (regression: the first, handed over last, preempted the second, the goal its client sent
    last; CI saw it as a test_faults failure)."""
    node = sim()
    get, ex, _ = client
    node.set_faults("left", pickup_delay_s=0.5)
    first = send(get(), ex, make_goal())
    node.set_faults("left", pickup_delay_s=0.0)
    second = send(get(), ex, make_goal(points=((0.5, (0.2, 0.1)), (1.5, (0.4, 0.2)))))
    assert first.accepted and second.accepted
    r1, r2 = result(ex, first), result(ex, second)
    assert r1.status == GoalStatus.STATUS_ABORTED and r1.result.error_code == -1 and \
        "preempted" in r1.result.error_string, r1
    assert r2.status == GoalStatus.STATUS_SUCCEEDED, r2
