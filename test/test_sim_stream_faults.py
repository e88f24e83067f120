"""The joint-state stream and clock faults' timing (sim/sim_config.ArmFaults), ROS-free; the
published stream is checked end to end by HIL stage 1 (test_hil_sim.py)."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.core.schema import from_mapping
from mj_manipulator_ros.sim.sim_config import ArmFaults

STEP = 0.002   # a 500 Hz control cycle, s


def times(seconds: float) -> np.ndarray:
    return np.arange(0.0, seconds, STEP)


def test_a_gap_withholds_exactly_its_span_and_repeats() -> None:
    f = ArmFaults(joint_state_gap_s=0.2, joint_state_gap_at_s=1.0, joint_state_gap_every_s=2.0)
    t = times(6.0)
    held = np.array([f.joint_state_withheld(x) for x in t])
    starts = t[1:][np.diff(held.astype(int)) == 1]
    ends = t[1:][np.diff(held.astype(int)) == -1]
    np.testing.assert_allclose(starts, [1.0, 3.0, 5.0], atol=STEP)
    np.testing.assert_allclose(ends - starts, 0.2, atol=STEP)
    once = ArmFaults(joint_state_gap_s=0.2, joint_state_gap_at_s=1.0)
    assert sum(once.joint_state_withheld(x) for x in t) == pytest.approx(0.2 / STEP, abs=1)


def test_clock_steps_add_up() -> None:
    f = ArmFaults(clock_offset_s=0.01, clock_step_s=-0.05, clock_step_at_s=1.0,
                  clock_step_every_s=2.0)
    assert f.clock_offset_at(0.99) == pytest.approx(0.01)
    assert f.clock_offset_at(1.0) == pytest.approx(-0.04)
    assert f.clock_offset_at(4.5) == pytest.approx(0.01 - 2 * 0.05)   # steps at 1 and 3 s
    assert f.clock_offset_at(5.0) == pytest.approx(0.01 - 3 * 0.05)
    once = ArmFaults(clock_step_s=0.5, clock_step_at_s=2.0)
    assert once.clock_offset_at(100.0) == pytest.approx(0.5)


def test_drops_count_their_occurrence() -> None:
    f = ArmFaults(joint_state_drop=20, joint_state_drop_at_s=0.5, joint_state_drop_every_s=2.0)
    assert [f.joint_state_drop_occurrence(x) for x in (0.4, 0.5, 2.49, 2.5, 4.6)] == \
        [0, 1, 1, 2, 3]
    assert ArmFaults().joint_state_drop_occurrence(10.0) == 0


def test_bad_values_are_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="joint_state_gap_s"):
        from_mapping(ArmFaults, {"joint_state_gap_s": -0.1}, "sim.faults.left")
    with pytest.raises(ConfigError, match="joint_state_drop"):
        from_mapping(ArmFaults, {"joint_state_drop": -3}, "sim.faults.left")


@pytest.mark.parametrize("source,expected", [
    ("right", None),
    ("left", r"sim.faults.left.joint_states_copied_from: expected another arm, one of \['right'\], "
             r"got 'left'"),
    ("middle", r"expected another arm, one of \['right'\], got 'middle'"),
])
def test_an_arm_copied_from_must_be_another_arm(tmp_path, source, expected) -> None:
    from mj_manipulator_ros.core.config import config_from_mapping
    from mj_manipulator_ros.sim.sim_config import sim_config

    from tiny_arm import tiny_mapping

    mapping = tiny_mapping(tmp_path, sim={"faults": {"left": {"joint_states_copied_from": source}}})
    if expected is None:
        cfg = sim_config(config_from_mapping(mapping))
        assert cfg.sim.faults["left"].joint_states_copied_from == "right"
        return
    with pytest.raises(ConfigError, match=expected):
        sim_config(config_from_mapping(mapping))
