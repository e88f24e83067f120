"""A speed change asked in the start lead is deferred (the caller hears yes) and applied once
the plan has started; when no ramp within the limits exists then, it is dropped and said in the
report, and the execution runs on (tiny pair, real rclpy and DDS, the in-process simulator).
Regression: the RampLimitError rose out of the run's wait in the caller's thread, ``execute``
raised with both arms' threads still running and no report (found by the random sequences
through the execution node, seed 14 on a loaded machine)."""

from __future__ import annotations

import threading
import time

from mj_manipulator_ros.ros.executor import MultiArmExecutor
from test_execution_watch import swing_plan
from tiny_arm import tiny_config


def test_a_deferred_speed_change_with_no_ramp_is_dropped_and_said(tiny_sim, ros,
                                                                  tmp_path) -> None:
    tiny_sim()
    # every ramp keeps to stop_acceleration (joints without their own limit): 0.5 rad/s^2 is
    # below the swing's own acceleration at 0.8 of its speed (0.64 x 5.3), wherever it starts
    config = tiny_config(tmp_path, execution={"use_sim_time": True, "start_lead_s": 1.0,
                                              "stop_acceleration": 0.5}).executor
    plan = swing_plan(duration=1.5, amplitude=0.6)
    out: dict = {}
    with MultiArmExecutor(config, context=ros.context) as executor:
        def slow_down_in_the_lead() -> None:
            deadline = time.monotonic() + 20.0
            while executor.current_stamp is None and time.monotonic() < deadline:
                time.sleep(0.002)
            out["deferred"] = executor.set_speed(0.8)
        thread = threading.Thread(target=slow_down_in_the_lead)
        thread.start()
        report = executor.execute(plan)
        thread.join(30)
        left = [t.name for t in threading.enumerate() if t.name.startswith("mjmr-arm-")]
    assert out["deferred"] is True
    assert not left, left
    assert report.succeeded, report.summary()
    assert len(report.speed_changes_dropped) == 1, report.summary()
    text = report.speed_changes_dropped[0]
    assert "speed 0.8 (asked before the stamp, deferred) not applied" in text
    assert "left_j1" in text or "right_j1" in text or "j2" in text, text
    assert text in report.summary()
