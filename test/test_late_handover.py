"""A replacement goal (speed change, stop, pause, resume) that the controller takes after its
ramp began: the controller joins it where it already is, and its reference jumps
(``core/goal_handover.py``). A speed change or a resume taken late fails the execution by name
(``late_acceptance``, with the jump); a stop taken late is said in the arm's report and the ramp
goes on. The simulated controller's goal callback holds its answer for ``accept_delay_s``, set
on one arm once the plan runs (real rclpy, real DDS, real MuJoCo); the jump is checked against
an independent evaluation of the two goals' splines."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from mj_manipulator_ros.core.goal_handover import handover_jump
from mj_manipulator_ros.core.plan import ArmTrajectory
from mj_manipulator_ros.core.report import ArmStatus, ExecutionStatus
from mj_manipulator_ros.core.sync import FailureReason
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from factories import wait_for_plan_time
from tiny_arm import swing, tiny_config

LEAD_S = 0.3


def run_with_a_slow_handover(tiny_sim, ros, tmp_path, delay: float, act: str,
                             **execution):
    """The tiny pair swings (4 s); at plan time 1.0 s (its fastest, 0.31 rad/s) the right
    arm's controller starts holding each goal's answer for ``delay`` s, then ``act`` ("speed":
    to 50 %, or "stop")."""
    sim = tiny_sim()
    # the progress-skew watch is off here: it sees the same fault its own way (the right arm
    # runs on at full speed while the left slows: 102 ms apart, the first failure when on)
    config = tiny_config(tmp_path, execution={"use_sim_time": True, "start_lead_s": LEAD_S,
                                              "max_progress_skew_s": 0.0, **execution}).executor
    with MultiArmExecutor(config, context=ros.context) as executor:
        asked = []

        def act_later() -> None:
            wait_for_plan_time(executor, 1.0)
            sim.set_faults("right", accept_delay_s=delay)
            asked.append(executor.set_speed(0.5) if act == "speed"
                         else executor.stop("operator stop (test)"))
        t = threading.Thread(target=act_later)
        t.start()
        report = executor.execute(swing(4.0))
        t.join(20)
    assert asked == [True], asked
    return report


def test_a_speed_change_taken_after_its_ramp_began_fails_by_name(tiny_sim, ros, tmp_path) -> None:
    report = run_with_a_slow_handover(tiny_sim, ros, tmp_path, delay=2 * LEAD_S, act="speed")
    f = report.first_failure
    assert report.status is ExecutionStatus.FAILED, report.summary()
    assert (f.arm, f.reason) == ("right", FailureReason.LATE_ACCEPTANCE), report.summary()
    assert "speed goal taken after its ramp began" in f.error_string, f.error_string
    assert "its reference jumped" in f.error_string and "start_lead_s above 0.3 s" in \
        f.error_string, f.error_string
    assert all(r.stop_confirmed for r in report.arms.values()), report.summary()


def test_a_speed_change_taken_in_time_runs_on(tiny_sim, ros, tmp_path) -> None:
    """The same delay, shorter than the lead: the handover is seamless and the plan ends."""
    report = run_with_a_slow_handover(tiny_sim, ros, tmp_path, delay=LEAD_S / 3, act="speed")
    assert report.succeeded, report.summary()


def test_a_stop_taken_after_its_ramp_began_is_said_and_the_ramp_goes_on(
        tiny_sim, ros, tmp_path) -> None:
    """A slow stop (0.5 rad/s^2: a 0.63 s ramp from 0.31 rad/s), taken 0.15 s into its ramp: a
    stop goal taken after its end would be refused as ending in the past (goal_rejected)."""
    report = run_with_a_slow_handover(tiny_sim, ros, tmp_path, delay=LEAD_S + 0.15, act="stop",
                                      stop_acceleration=0.5)
    right = report.arms["right"]
    assert report.status is ExecutionStatus.STOPPED, report.summary()
    assert right.status is ArmStatus.STOPPED and right.stop_confirmed, report.summary()
    assert "stop goal taken after its ramp began" in right.error_string, report.summary()
    assert "stop goal" not in report.arms["left"].error_string, report.summary()


def _ramp(t0: float, v: float, a: float, duration: float) -> ArmTrajectory:
    """One joint from rest at 0: constant acceleration ``a`` from ``t0``, reaching ``v``."""
    t = np.linspace(0.0, duration, 401)
    ta = v / a
    tau = np.clip(t - t0, 0.0, None)
    q = np.where(tau < ta, 0.5 * a * tau ** 2, 0.5 * a * ta ** 2 + v * (tau - ta))
    return ArmTrajectory(("j",), t, q[:, None])


@pytest.mark.parametrize("late", [0.05, 0.2])
def test_the_jump_is_where_the_two_goals_are_at_the_take(late: float) -> None:
    """A resume from rest (the running goal held at its end, 0) and the new goal ramping at
    1 rad/s^2 from its stamp + 0.5 s: taken ``late`` s after the ramp began, the reference
    jumps a t^2 / 2 in position and a t in velocity (closed form; the splines within 2 %)."""
    held = ArmTrajectory(("j",), np.array([0.0, 1.0]), np.zeros((2, 1)))
    new = _ramp(0.5, 0.8, 1.0, 3.0)
    jump = handover_jump((held, 100.0), (new, 200.0), 200.5 + late, ("j",))
    assert jump.position == pytest.approx(0.5 * late ** 2, rel=0.02, abs=2e-5)
    assert jump.velocity == pytest.approx(late, rel=0.02, abs=2e-3)
    seamless = handover_jump((held, 100.0), (new, 200.0), 200.4, ("j",))
    assert abs(seamless.position) < 1e-9 and abs(seamless.velocity) < 1e-9
