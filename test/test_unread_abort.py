"""A goal its controller aborted, whose result this process reads late: the joint states it
judged meanwhile (the arm held by its controller, against a plan that moved on) are not the
arm's tracking error. The left controller aborts 0.7 s into the plan (an injected fault, real
MuJoCo, real DDS); the left arm's own thread is kept busy from 0.8 s to 1.4 s (a feedback
handler that takes 0.6 s, as a slow user callback or a starved thread does), while the joint
states go on being judged on another thread."""

from __future__ import annotations

import time

import numpy as np

from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.report import ArmStatus
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from tiny_arm import swing, tiny_config

ABORT_AT_S, BUSY_FROM_S, BUSY_S = 0.7, 0.5, 0.6


def test_the_states_after_an_abort_read_late_are_not_tracking_error(tiny_sim, ros,
                                                                    tmp_path) -> None:
    tiny_sim(left={"abort_after_s": ABORT_AT_S})
    # the path tolerance out of the way: the figure is the subject, not a trip on it
    config = tiny_config(tmp_path, execution={"use_sim_time": True,
                                              "path_tolerance_rad": 1.0}).executor
    plan = swing()
    busy = []
    with MultiArmExecutor(config, context=ros.context) as executor:
        def slow_handler(arm: str, _feedback) -> None:
            stamp = executor.current_stamp
            if arm == "left" and not busy and stamp is not None and \
                    executor.now() >= stamp.seconds + BUSY_FROM_S:
                busy.append(executor.now() - stamp.seconds)
                time.sleep(BUSY_S)
        executor.on_feedback = slow_handler
        report = executor.execute(plan)
    left = report.arms["left"]
    assert left.status is ArmStatus.ABORTED, report.summary()
    # the premise: the left thread was busy across the abort, its result read late
    assert busy and busy[0] < ABORT_AT_S, busy
    assert left.result_at - report.start_stamp > ABORT_AT_S + 0.3, report.summary()
    # what the plan moved on by, had the held arm been judged until its result was read
    p, _, _ = sample(plan["left"], [ABORT_AT_S, left.result_at - report.start_stamp])
    assert np.max(np.abs(p[1] - p[0])) > 0.1
    assert left.max_tracking_error is not None and left.max_tracking_error < 0.05, \
        report.summary()
