"""A controller gone mid-goal (its action server destroyed) is seen when DDS says so, not at the
arm's next periodic look at the graph (ros/arm_client.py: the departure watch)."""

from __future__ import annotations

import time

from mj_manipulator_ros.core.report import ArmStatus, FailureReason
from mj_manipulator_ros.ros import arm_client
from mj_manipulator_ros.ros.executor import MultiArmExecutor

from plan_moment import at_plan_time
from test_execution_watch import swing_plan
from tiny_arm import tiny_config

#: the periodic look at the graph, stretched so that only the departure event explains a
#: verdict before it
STRETCHED_CHECK_S = 30.0


def test_a_controller_gone_mid_goal_is_seen_at_once(tiny_sim, ros, tmp_path,
                                                    monkeypatch) -> None:
    """The left arm's action server destroyed 0.6 s into the swing, with the arms' periodic
    graph look stretched to 30 s: the left arm fails ``controller_gone`` and the right is
    canceled within a few seconds of the destruction (regression: with only the periodic
    look, nothing was seen for 30 s)."""
    monkeypatch.setattr(arm_client, "CHECK_PERIOD_S", STRETCHED_CHECK_S)
    sim = tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True,
                                              "black_box_s": 0.0}).executor
    gone: list[tuple[float, float]] = []   # (monotonic, controllers' clock) at the destruction

    with MultiArmExecutor(config, context=ros.context) as executor:
        def destroy() -> None:
            gone.append((time.monotonic(), executor.now()))
            sim.arms["left"].destroy()
        thread = at_plan_time(executor, 0.6, destroy)
        report = executor.execute(swing_plan())
        returned = time.monotonic()
        thread.join(25.0)
    assert gone, "the plan never reached 0.6 s"
    f = report.first_failure
    assert f is not None and f.arm == "left" and f.reason is FailureReason.CONTROLLER_GONE, \
        report.summary()
    canceled = report.arms["right"].cancel_requested_at
    assert canceled is not None and canceled - gone[0][1] < 5.0, \
        (f"the right arm's cancel asked {canceled and canceled - gone[0][1]} s after the left "
         f"server was destroyed: the departure event was not acted on (the graph is looked at "
         f"only every {STRETCHED_CHECK_S:g} s here)")
    # the evidence: DDS's word of the departure, between the destruction and the cancel (on
    # sim time: the clock is as coarse as the simulator's /clock messages)
    tick = 1.0 / sim.config.sim.clock_rate_hz
    assert f.evidence_at is not None and \
        gone[0][1] - tick <= f.evidence_at <= canceled + tick, (f.evidence_at, gone[0][1], canceled)
    assert returned - gone[0][0] < STRETCHED_CHECK_S / 2, report.summary()
    assert report.arms["right"].status in (ArmStatus.CANCELED, ArmStatus.STOPPED), \
        report.summary()
