"""A process that reads its joint states late (a loaded machine: each reading's handling held
READING_DELAY_S here, slower than the stream, so a backlog of unread messages builds up to the
subscription's depth) on sim time. The backlog is not the controllers' clock being behind (CI
and loaded suites refused plans with "its controller's clock is 42-250 ms behind"): messages
read late are no offset samples, and a backlog that never clears is said as one. The start
check's positions are measured after it began, not read from the backlog (a homing move that
had just succeeded was read 0.14 rad short of its end)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from mj_manipulator_ros.core.errors import ClockOffsetError
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from mj_manipulator_ros.ros.joint_state_monitor import WITH_MESSAGE_INFO
from test_execution_watch import swing_plan
from tiny_arm import tiny_config

READING_DELAY_S = 0.010
JOINTS = ["left_j1", "left_j2", "right_j1", "right_j2"]


def _slow_reading(executor: MultiArmExecutor) -> None:
    """Each joint state's handling held READING_DELAY_S after it was read (the monitor's
    listener: the execution watch's place), in the thread that handles /clock too."""
    def slow(*reading) -> None:
        time.sleep(READING_DELAY_S)
    executor.monitor.listener = slow


@pytest.mark.parametrize("part", ["offset", "measured"])
def test_a_reading_backlog_on_sim_time_is_said_as_one_and_never_measured(ros, tmp_path,
                                                                         part) -> None:
    """``offset``: the clock check names the backlog (needs the middleware's receipt time,
    MessageInfo: skipped where rclpy hands none over); ``measured``: the start check's positions
    are stamped after it was asked (everywhere)."""
    if part == "offset" and not WITH_MESSAGE_INFO:
        pytest.skip("rclpy hands over no MessageInfo before Kilted: a backlog cannot be told "
                    "from an offset there")
    from mj_manipulator_ros.sim.sim_node import SimNode

    node = SimNode(tiny_config(tmp_path, sim={"real_time_factor": 2.0, "faults": {}}),
                   context=ros.context).start()
    try:
        config = tiny_config(tmp_path, execution={"use_sim_time": True, "black_box_s": 0.0,
                                                  "server_wait_s": 2.0}).executor
        with MultiArmExecutor(config, context=ros.context) as executor:
            _slow_reading(executor)
            time.sleep(1.5)   # the backlog builds and fills the offset window (1 s)
            latest = executor.monitor.readings(JOINTS)
            lag = max(r.received - r.stamp for r in latest.values())
            assert lag > 0.03, f"no backlog built (the latest reading {lag * 1e3:.1f} ms old)"
            if part == "offset":
                with pytest.raises(ClockOffsetError) as refused:   # every message read late
                    executor.check_start(swing_plan())
                assert "a backlog in this process" in str(refused.value), refused.value
                assert "behind this machine" not in str(refused.value), refused.value
                return
            # measured after it was asked: stamped no earlier than this clock's now then
            asked = executor.now()
            q = executor.start_check.measured(["left", "right"])
            readings = executor.monitor.readings(JOINTS)
            assert min(r.stamp for r in readings.values()) >= \
                asked - config.execution.max_clock_offset_s, (asked, readings)
            truth = node.shared.snapshot()
            for arm in ("left", "right"):
                assert np.allclose(q[arm], truth.arms[arm].positions, atol=1e-3)
    finally:
        node.close()
