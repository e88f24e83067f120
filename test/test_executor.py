"""MultiArmExecutor against real action servers over DDS on loopback (no fake goal handles)."""

from __future__ import annotations

import threading

import pytest

from factories import make_config, make_plan
from mj_manipulator_ros.core.errors import JointLimitError
from mj_manipulator_ros.core.report import ArmStatus, ExecutionStatus
from mj_manipulator_ros.core.sync import FailureReason
from mj_manipulator_ros.ros.executor import MultiArmExecutor


@pytest.fixture
def run(ros, scripted):
    """run(behaviors, plan=None, **execution) -> (report, controllers)."""
    executors = []

    def go(behaviors: dict, plan=None, duration: float = 0.6, **execution):
        arms = tuple(behaviors)
        controllers = scripted(behaviors)
        config = make_config(arms, **execution)
        executor = MultiArmExecutor(config, context=ros.context)
        executors.append(executor)
        report = executor.execute(plan or make_plan(arms, duration=duration))
        return report, controllers
    yield go
    for e in executors:
        e.close()


def test_every_arm_gets_the_same_future_stamp(run) -> None:
    report, ctl = run({"left": "succeed", "right": "succeed"}, start_lead_s=0.3)
    assert report.status is ExecutionStatus.SUCCEEDED, report.summary()
    stamps = {a: c.goals[0].stamp_ns for a, c in ctl.items()}
    assert len(set(stamps.values())) == 1
    stamp = next(iter(stamps.values())) * 1e-9
    assert report.start_stamp == pytest.approx(stamp, abs=1e-9)
    for arm, r in report.arms.items():
        assert r.status is ArmStatus.SUCCEEDED and r.stop_confirmed
        assert r.goal_sent_at < r.accepted_at < stamp < r.result_at
        assert 0.0 < stamp - r.goal_sent_at <= 0.3 + 1e-6  # stamp = now + lead, taken before sending
        assert ctl[arm].goals[0].received_at < stamp


def test_rejected_arm_stops_every_arm(run) -> None:
    report, ctl = run({"left": "reject", "right": "succeed"})
    assert report.status is ExecutionStatus.FAILED
    assert report.first_failure.arm == "left"
    assert report.first_failure.reason is FailureReason.GOAL_REJECTED
    assert report.arms["left"].status is ArmStatus.REJECTED
    right = report.arms["right"]
    assert right.stop_confirmed
    if right.accepted_at is not None:  # it got its goal in before the rejection: canceled, confirmed
        assert right.status is ArmStatus.CANCELED and right.cancel_acknowledged_at is not None
        assert ctl["right"].cancel_requests == 1


def test_abort_mid_motion_cancels_peers_confirmed(run) -> None:
    report, ctl = run({"left": "succeed", "right": ("abort_after", 0.2), "third": "succeed"},
                      duration=3.0)
    assert report.first_failure.arm == "right"
    assert report.first_failure.reason is FailureReason.ABORTED
    assert report.first_failure.error_code == -4
    assert report.arms["right"].status is ArmStatus.ABORTED
    for peer in ("left", "third"):
        r = report.arms[peer]
        assert r.status is ArmStatus.CANCELED and r.stop_confirmed
        assert r.cancel_requested_at <= r.cancel_acknowledged_at <= r.result_at
        assert r.cancel_requested_at >= report.arms["right"].result_at
        assert r.result_at < report.start_stamp + 3.0  # stopped well before its natural end
        assert ctl[peer].cancel_requests == 1


def test_arm_ignoring_cancel_is_unconfirmed(run) -> None:
    report, _ = run({"left": ("abort_after", 0.1), "right": "ignore_cancel"}, duration=4.0,
                    cancel_wait_s=0.5)
    assert report.status is ExecutionStatus.FAILED
    r = report.arms["right"]
    assert r.status is ArmStatus.UNCONFIRMED_STOP and not r.stop_confirmed
    assert "cancel refused" in r.error_string and "may be moving" in r.error_string
    assert report.unconfirmed_arms == ["right"]
    assert "STOP NOT CONFIRMED" in report.summary()


def test_server_missing(ros, scripted) -> None:
    ctl = scripted({"left": "succeed"})
    config = make_config(("left", "ghost"), server_wait_s=0.5)
    with MultiArmExecutor(config, context=ros.context) as ex:
        report = ex.execute(make_plan(("left", "ghost")))
    assert report.status is ExecutionStatus.FAILED
    f = report.first_failure
    assert f.arm == "ghost" and f.reason is FailureReason.SERVER_UNAVAILABLE
    assert "/ghost_arm_controller/follow_joint_trajectory not available within 0.5 s" in f.error_string
    assert report.arms["left"].status is ArmStatus.NOT_SENT
    assert ctl["left"].goals == []


def test_execution_timeout_cancels_all(run) -> None:
    report, _ = run({"left": "never_finish", "right": "succeed"}, duration=0.3,
                    timeout_scaling=1.0, timeout_margin_s=0.3)
    assert report.first_failure.arm == "left"
    assert report.first_failure.reason is FailureReason.TIMEOUT
    assert report.arms["left"].status is ArmStatus.CANCELED
    assert report.arms["left"].stop_confirmed
    assert report.arms["right"].status is ArmStatus.SUCCEEDED


def test_silent_controller_trips_the_feedback_watchdog(run) -> None:
    report, ctl = run({"left": "silent", "right": "succeed"}, duration=3.0, feedback_timeout_s=0.3)
    f = report.first_failure
    assert f.arm == "left" and f.reason is FailureReason.FEEDBACK_TIMEOUT
    assert "presumed dead" in f.error_string
    right = report.arms["right"]
    assert right.status is ArmStatus.CANCELED and right.stop_confirmed
    assert right.result_at < report.start_stamp + 3.0  # stopped mid-motion, not at its end


def test_late_acceptance_fails_and_cancels(run) -> None:
    report, ctl = run({"left": "succeed", "right": ("slow_accept", 0.4)}, duration=2.0,
                      start_lead_s=0.1)
    assert report.first_failure.arm == "right"
    assert report.first_failure.reason is FailureReason.LATE_ACCEPTANCE
    assert "after the start stamp" in report.first_failure.error_string
    for arm in ("left", "right"):
        assert report.arms[arm].status is ArmStatus.CANCELED and report.arms[arm].stop_confirmed


def test_late_acceptance_allowed_when_configured(run) -> None:
    report, _ = run({"left": "succeed", "right": ("slow_accept", 0.3)}, duration=0.5,
                    start_lead_s=0.05, allow_late_acceptance=True)
    assert report.status is ExecutionStatus.SUCCEEDED, report.summary()


def test_abort_from_another_thread(ros, scripted) -> None:
    ctl = scripted({"left": "never_finish", "right": "never_finish"})
    with MultiArmExecutor(make_config(), context=ros.context) as ex:
        timer = threading.Timer(0.8, ex.abort, args=("operator pressed stop",))
        timer.start()
        report = ex.execute(make_plan(duration=5.0))
        timer.join(5.0)
    assert report.status is ExecutionStatus.CANCELED
    assert report.first_failure.arm is None
    assert report.first_failure.error_string == "operator pressed stop"
    for arm in ("left", "right"):
        assert report.arms[arm].status is ArmStatus.CANCELED
        assert ctl[arm].cancel_requests == 1


def test_exception_in_arm_thread_stops_all(ros, scripted) -> None:
    scripted({"left": "succeed", "right": "never_finish"})
    with MultiArmExecutor(make_config(), context=ros.context) as ex:
        def boom(arm, _fb):
            if arm == "left":
                raise RuntimeError("feedback handler broke")
        ex.on_feedback = boom
        report = ex.execute(make_plan(duration=3.0))
    assert report.first_failure.reason is FailureReason.EXCEPTION
    assert "feedback handler broke" in report.first_failure.error_string
    assert report.arms["right"].status is ArmStatus.CANCELED
    # the arm whose thread raised had an accepted goal: it is canceled too, and confirmed
    left = report.arms["left"]
    assert left.status is ArmStatus.CANCELED and left.stop_confirmed
    assert left.cancel_acknowledged_at is not None


@pytest.mark.parametrize("n_arms", [3, 4])
def test_three_and_four_arms(run, n_arms) -> None:
    arms = ("a", "b", "c", "d")[:n_arms]
    report, ctl = run({a: "succeed" for a in arms}, duration=0.4)
    assert report.succeeded, report.summary()
    assert len({c.goals[0].stamp_ns for c in ctl.values()}) == 1


def test_bad_plan_sends_nothing(ros, scripted) -> None:
    ctl = scripted({"left": "succeed", "right": "succeed"})
    plan = make_plan()
    bad = plan.time_scaled(1.0)
    import numpy as np
    from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
    pos = np.array(bad["right"].positions)
    pos[2, 1] = 3.0
    t = bad["right"]
    bad = MultiArmPlan({"left": bad["left"], "right": ArmTrajectory(t.joint_names, t.times, pos, t.velocities)})
    with MultiArmExecutor(make_config(velocity=100.0), context=ros.context) as ex:
        with pytest.raises(JointLimitError, match="arm 'right', waypoint 2, joint 'right_j1'"):
            ex.execute(bad)
    assert ctl["left"].goals == [] and ctl["right"].goals == []


def test_many_executions_never_hang(run, ros, scripted) -> None:
    """rclpy#1123: requests made and spun on one thread per arm; 25 back-to-back 4-arm runs."""
    arms = ("a", "b", "c", "d")
    ctl = scripted({a: "succeed" for a in arms})
    with MultiArmExecutor(make_config(arms, start_lead_s=0.05), context=ros.context) as ex:
        plan = make_plan(arms, duration=0.1, points=3)
        reports = [ex.execute(plan) for _ in range(25)]
    assert all(r.succeeded for r in reports), [r.summary() for r in reports if not r.succeeded][:1]
    assert all(len(c.goals) == 25 for c in ctl.values())
