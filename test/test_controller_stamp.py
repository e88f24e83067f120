"""The simulated controllers stamp a goal's acceptance on their own controller clock, as a
controller node does on its clock (ros2_control gives each controller a node): on sim time the
executor can use the stamp, and a goal taken after its start stamp is judged by when the
controller took it, not by when a busy executor read the answer on its /clock (which lags
physics). Before, the stamp was the simulator node's system clock: not usable on sim time
(``taken_at`` None), and under load a goal answered 24 ms after its stamp was read 4 ms before
it on the executor's lagging /clock and passed as taken in time."""

from __future__ import annotations

import pytest

from mj_manipulator_ros.core.sync import FailureReason
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from test_start_state import plan_from
from tiny_arm import tiny_config

START = {"left": [0.0, 0.0], "right": [0.0, 0.0]}


@pytest.mark.parametrize("sim_time", [True, False])
def test_the_acceptance_stamp_is_the_controllers_answer_on_its_clock(
        sim_time, ros, tmp_path) -> None:
    from mj_manipulator_ros.sim.sim_node import SimNode

    cfg = tiny_config(tmp_path, sim={"real_time_factor": 1.0, "use_sim_time": sim_time},
                      execution={"use_sim_time": sim_time, "black_box_s": 0.0})
    with SimNode(cfg, context=ros.context) as node, \
            MultiArmExecutor(cfg.executor, context=ros.context) as executor:
        report = executor.execute(plan_from(START, 0.6))
        assert report.succeeded, report.summary()
        for arm, a in report.arms.items():
            answered = node.arms[arm].answers[-1][1]   # the server's answer, controller clock
            assert a.taken_at is not None, (arm, a)
            # 1 us: a float of seconds since 1970 resolves 0.24 us (the stamp is whole ns)
            assert a.taken_at == pytest.approx(answered, abs=1e-6), (arm, a.taken_at, answered)
            assert a.goal_sent_at <= a.taken_at < report.start_stamp, (arm, a)


def test_a_goal_the_controller_takes_after_the_stamp_fails_by_its_own_stamp(ros, tmp_path) -> None:
    """The right controller answers 0.33 s of its clock after a goal arrives (an injected
    delay), the lead is 0.25 s: late by at least 0.08 s by the controller's stamp, which the
    failure names. The plan is slow (4 s): the left arm 0.1 s into it is 4 mrad along, so
    the watch's path tolerance cannot trip first (on a 0.6 s plan it did, in a loaded suite)."""
    from mj_manipulator_ros.sim.sim_node import SimNode

    cfg = tiny_config(tmp_path, sim={"real_time_factor": 1.0,
                                     "faults": {"right": {"accept_delay_s": 0.33}}},
                      execution={"use_sim_time": True, "black_box_s": 0.0,
                                 "start_lead_floor_s": 0.25})
    with SimNode(cfg, context=ros.context) as node, \
            MultiArmExecutor(cfg.executor, context=ros.context) as executor:
        report = executor.execute(plan_from(START, 4.0))
    assert report.first_failure.reason is FailureReason.LATE_ACCEPTANCE, report.summary()
    right = report.arms["right"]
    assert right.taken_at is not None, right
    late = right.taken_at - report.start_stamp
    # sent 0.25 s before the stamp, answered 0.33 s of the same clock after it arrived
    assert 0.08 <= late < 1.0, (late, report.summary())
    assert "taken by the controller at +" in report.first_failure.error_string, report.summary()
    assert right.taken_at == pytest.approx(node.arms["right"].answers[-1][1], abs=1e-6)
