"""Torque-mode simulated controllers on the OpenArm pair (the measurements of
bench/torque_bench.py, asserted as behaviour: each trap shows, the right law holds)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import torque_bench as tb  # noqa: E402

from mj_manipulator_ros.core.errors import ConfigError  # noqa: E402
from mj_manipulator_ros.sim.controllers.torque import TorqueController  # noqa: E402
from mj_manipulator_ros.sim.sim_config import sim_config  # noqa: E402
from mj_manipulator_ros.core.config import config_from_mapping  # noqa: E402


def test_holds_the_ready_pose_and_reports_the_motor_torques() -> None:
    shared = tb.simulator()
    assert tb.hold_error(shared) < 1e-4  # 0.1 mrad
    ctrl = shared.controllers["left"]
    assert isinstance(ctrl, TorqueController)
    efforts = shared.snapshot().arms["left"].efforts
    # /joint_states effort is what the motors apply (servos disabled, no gravity compensation)
    np.testing.assert_allclose(efforts, ctrl.last_torque, atol=1e-9)
    assert abs(efforts[0]) > 1.0  # holding the arm's weight
    m = shared.model
    assert not m.body_gravcomp[list(shared.scene.arms["left"].body_ids)].any()


def test_sine_tracking_and_the_partial_nulling_trap() -> None:
    disabled = tb.sine_error(tb.simulator())
    full = tb.sine_error(tb.simulator(nulling="full"))
    partial = tb.sine_error(tb.partial_nulling(tb.simulator(nulling="full")))
    # measured: 0.33 mrad servos disabled, 0.67 nulled fully, 38.5 nulled partially
    assert disabled.max() <= 2e-3
    assert partial.max() >= 10 * full.max() and full.max() <= 2e-3


def test_the_wrong_bridge_drifts_with_double_gravity() -> None:
    assert tb.wrong_bridge_drift() > 0.03  # measured 63 mrad on the left J1


def test_a_command_beyond_the_force_range_is_applied_as_the_range() -> None:
    c = tb.clamp_check()
    assert c["applied_Nm"] == pytest.approx(c["force_range_Nm"][1]) and c["applied_Nm"] < 100


def test_the_feed_forward_does_not_read_the_scene() -> None:
    """0.5 kg added to each simulated hand, not to the arm's own model: the hold now errs."""
    shared = tb.simulator(payload_kg=0.5)
    own = shared.controllers["left"].own
    hands = [b for b in range(own.model.nbody) if own.model.body(b).name.endswith("ee_base_link")]
    scene_hands = [b for b in range(shared.model.nbody)
                   if shared.model.body(b).name.endswith("ee_base_link")]
    assert own.model.body_mass[hands[0]] + 0.5 == pytest.approx(shared.model.body_mass[scene_hands[0]])
    # the sag a feed-forward of the own model alone must show: M_own^-1 J' m g / Kp (7.2 mrad);
    # one that read the scene would hold (measured 6.8 mrad: the joints' dry friction carries
    # a little of the load)
    predicted = tb.payload_prediction(shared)
    assert predicted > 3e-3
    assert 0.8 * predicted <= tb.hold_error(shared) <= 1.2 * predicted


def test_crossing_plan_in_torque_mode() -> None:
    torque, position = tb.crossing("torque"), tb.crossing("position")
    assert set(torque["outcomes"].values()) == {"succeeded"}
    assert torque["start_skew_s"] <= tb.PERIOD
    assert torque["max_tracking_error_rad"] <= 2 * position["max_tracking_error_rad"]


def test_torque_needs_its_arms_own_file(tmp_path) -> None:
    """An arm whose joints are not all in one robot file of the scene cannot have a dynamics
    model of its own: refused, naming the arm."""
    from tiny_arm import ARM_XML

    (tmp_path / "a.xml").write_text(ARM_XML)
    cfg = sim_config(config_from_mapping({
        "arms": [{"name": "mixed", "joint_names": ["x_j1", "y_j2"]}],
        "scene": {"models": [{"file": str(tmp_path / "a.xml"), "prefix": "x_"},
                             {"file": str(tmp_path / "a.xml"), "prefix": "y_"}], "floor": False},
        "sim": {"arms": {"mixed": {"controller": "torque"}}}}))
    from mj_manipulator_ros.sim.shared_model import SharedModel

    with pytest.raises(ConfigError, match=r"arm 'mixed': no single robot file"):
        SharedModel.from_config(cfg)


def test_task_space_hold_through_constrained_dynamics() -> None:
    """Gauss's principle with the RNEA bridge holds the TCP (2,500 steps); the constraint
    torque alone leaves gravity out and sags (measured: 0.0000004 mm against 8.5 mm)."""
    rnea, constraint = tb.task_hold("rnea"), tb.task_hold("constraint")
    assert rnea < 1e-5 and constraint > 4 * rnea and constraint > 1e-3
    # a subset of the axes: linear z left free still holds (the free motion is damped and
    # carried by RNEA)
    assert tb.task_hold("rnea", ("x", "y", "rx", "ry", "rz"), steps=500) < 1e-4


def test_task_space_hold_refuses_unknown_axes() -> None:
    from mj_manipulator_ros.sim.controllers.task_hold import TaskSpaceHold

    own = tb.simulator().controllers["left"].own
    with pytest.raises(ConfigError, match=r"axes \['q'\]; expected a non-empty subset"):
        TaskSpaceHold(own, "left_ee_control_point", ["q"])
    with pytest.raises(ConfigError, match="no site 'nope'"):
        TaskSpaceHold(own, "nope")


@pytest.mark.parametrize("bad, words", [
    ("abc", "bandwidth_hz: expected one of"), (-1.0, "bandwidth_hz: must be > 0 Hz, got -1.0"),
    ({"nope": 3}, "bandwidth_hz.nope: not a joint of arm 'a'"),
    ({"j": 0.0}, "bandwidth_hz.j: must be > 0 Hz"), ("full", "expected one of")])
def test_bad_torque_settings_are_named(bad, words) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace("[", r"\[")):
        sim_config(config_from_mapping({"arms": [{"name": "a", "joint_names": ["j"]}],
                                        "sim": {"arms": {"a": {"controller": "torque",
                                                               "bandwidth_hz": bad}}}}))
    with pytest.raises(ConfigError, match=r"sim.arms.a.nulling: expected 'disable' or 'full'"):
        sim_config(config_from_mapping({"arms": [{"name": "a", "joint_names": ["j"]}],
                                        "sim": {"arms": {"a": {"nulling": "half"}}}}))
