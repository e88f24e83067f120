"""Configuration files: every mistake is named by key path, with what was expected."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.core.config import config_from_mapping, load_config
from mj_manipulator_ros.core.errors import ConfigError

GOOD = {"arms": [{"name": "left", "joint_names": ["a", "b"],
                  "joint_limits": {"a": {"lower": -1, "upper": 1, "velocity": 2}}},
                 {"name": "right", "joint_names": ["c"], "action": "/r/fjt"}],
        "execution": {"start_lead_s": 0.4}}


def test_good_config() -> None:
    cfg = config_from_mapping(GOOD)
    assert cfg.arm_names == ("left", "right")
    assert cfg.arm("left").action_name == "/left_arm_controller/follow_joint_trajectory"
    assert cfg.arm("right").action_name == "/r/fjt"
    assert cfg.execution.start_lead_s == 0.4 and cfg.execution.cancel_wait_s == 2.0
    assert cfg.arm("left").joint_limits["a"].velocity == 2.0


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["execution"].update(start_lead=1), r"execution: unknown key\(s\) \['start_lead'\]; allowed: \[.*'start_lead_s'"),
    (lambda d: d["execution"].update(start_lead_s=-1), r"execution.start_lead_s: must be >= 0.0, got -1"),
    (lambda d: d["execution"].update(cancel_wait_s="soon"), r"execution.cancel_wait_s: expected a number, got 'soon'"),
    (lambda d: d["arms"][0].update(joint_names=["a", "a"]), r"arms\[0\].joint_names: duplicate joint\(s\) \['a'\]"),
    (lambda d: d["arms"][1].update(name="left"), r"arms: duplicate arm names"),
    (lambda d: d["arms"][1].update(joint_names=["a"]), r"joint 'a' belongs to both 'left' and 'right'"),
    (lambda d: d["arms"][0]["joint_limits"].update(z={"lower": 0}), r"arms\[0\].joint_limits: unknown joint 'z'; the arm's joints are \['a', 'b'\]"),
    (lambda d: d["arms"][0]["joint_limits"]["a"].update(lower=2), r"joint_limits.a: lower 2.0 > upper 1.0"),
    (lambda d: d["arms"][0]["joint_limits"]["a"].update(effort=3), r"joint_limits.a: unknown key\(s\) \['effort'\]"),
    (lambda d: d["arms"][0].pop("name"), r"arms\[0\].name: required key missing"),
    (lambda d: d.update(robot="x"), r"unknown top-level key\(s\) \['robot'\]"),
])
def test_bad_config(mutate, message) -> None:
    import copy
    data = copy.deepcopy(GOOD)
    mutate(data)
    with pytest.raises(ConfigError, match=message):
        config_from_mapping(data)


def test_load_names_file(tmp_path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("arms: [{name: left}]\n")
    with pytest.raises(ConfigError, match=rf"{p}: arms\[0\].joint_names: required key missing"):
        load_config(p)
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml")


def test_limits_from_the_model() -> None:
    import yaml

    from mj_manipulator_ros.core.errors import UnresolvedLimitsError
    from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
    from mj_manipulator_ros.core.validation import validate_plan
    from mj_manipulator_ros.model.limits import with_model_limits
    from mj_manipulator_ros.resources import config_file

    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    data["arms"][0]["joint_limits"] = "from_model"
    data["arms"][0]["max_velocity"] = 1.5
    plain = config_from_mapping(data)  # plain values: the model is not read here
    assert plain.arm("left").limits_from_model and not plain.arm("left").joint_limits
    # a plan is never validated against limits that were not read: refused, naming the arm
    joints = plain.arm("left").joint_names
    plan = MultiArmPlan({"left": ArmTrajectory(joints, np.array([0.0, 1.0]), np.zeros((2, 7)))})
    with pytest.raises(UnresolvedLimitsError, match="arm 'left'.*from_model"):
        validate_plan(plan, plain)
    cfg = with_model_limits(plain)
    lim = cfg.arm("left").joint_limits["openarm_left_joint4"]
    assert (lim.lower, lim.upper, lim.velocity) == pytest.approx((0.0, 2.44346, 1.5), abs=1e-4)
    assert cfg.arm("right").joint_limits["openarm_right_joint4"].upper == 2.4434  # as written
    assert not cfg.arm("left").limits_from_model
    del data["scene"]
    with pytest.raises(ConfigError, match="from_model needs a 'scene' section"):
        with_model_limits(config_from_mapping(data))


@pytest.mark.parametrize("where, text", [
    ("config.scene.initial_positions.openarm_left_joint1", "&i [*i]"),
    ("config.execution.loop.x", "&l {x: *l}")])
def test_a_self_referencing_yaml_alias_is_bad_input_through_the_cli(tmp_path, where, text) -> None:
    """Regression: a YAML alias to itself gave a TypeError traceback and exit 1; now exit 2 and
    a message naming the key path. (The first also caught a plain list where a number belongs.)"""
    import subprocess
    import sys

    from mj_manipulator_ros.resources import config_file, share_dir

    body = config_file("sim_openarm.yaml").read_text()
    if where.endswith("openarm_left_joint1"):
        body = body.replace("    openarm_left_joint1: -0.630151", f"    openarm_left_joint1: {text}")
    else:
        body = body.replace("  start_lead_s: 0.25", f"  start_lead_s: 0.25\n  loop: {text}")
    cfg = tmp_path / "alias.yaml"
    cfg.write_text(body)
    out = subprocess.run([sys.executable, "-m", "mj_manipulator_ros.cli", "execute",
                          str(share_dir() / "config/plans/openarm_crossing.yaml"),
                          "--config", str(cfg)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and where in out.stderr, out.stderr[-2000:]
    assert "refers to a node that contains it" in out.stderr


def test_a_self_referencing_plan_is_bad_input(tmp_path) -> None:
    from mj_manipulator_ros.core.errors import PlanError
    from mj_manipulator_ros.core.plan_io import load_plan

    path = tmp_path / "plan.yaml"
    path.write_text("arms:\n  left: &l\n    joint_names: [a]\n    points: [*l]\n")
    with pytest.raises(PlanError, match=r"plan\.arms\.left\.points\[0\]: refers to a node"):
        load_plan(path)


def test_a_faster_clock_scales_the_start_lead_and_its_floor() -> None:
    """Regression: the bring-up's rehearsal at 2x scaled start_lead_s for the wall-clock work
    it covers but not the measured lead's floor (0.06 s of sim time: 30 ms of wall time), and
    beside a busy loop the ALOHA and three-arm bring-ups had goals taken 4-12 ms late."""
    from mj_manipulator_ros.core.config import config_from_mapping

    base = config_from_mapping({"arms": [{"name": "a", "joint_names": ["j"]}]})
    s = base.execution
    fast = base.with_pace(2.0).execution
    assert (fast.start_lead_s, fast.start_lead_floor_s) == (2 * s.start_lead_s,
                                                            2 * s.start_lead_floor_s)
    slow = base.with_pace(0.5).execution      # a slower clock keeps the wall time's share
    assert (slow.start_lead_s, slow.start_lead_floor_s) == (s.start_lead_s, s.start_lead_floor_s)


def test_the_bring_up_gives_every_goal_the_full_lead_at_its_pace(tmp_path) -> None:
    """The rehearsal at 2x scales the lead for the wall-clock work it covers; and every goal of
    the bring-up gets that full lead, not the lead measured from its recent goals (regression:
    CI's rehearsed ALOHA jog ran on the measured 0.12 s of sim time, and a 190 ms stall of the
    simulator had it taken 2 ms late: stage 2 failed, its joint "not measured")."""
    from mj_manipulator_ros.hil.session import HilSession
    from mj_manipulator_ros.model.limits import load_config_with_model
    from mj_manipulator_ros.resources import config_file

    config = load_config_with_model(config_file("sim_openarm.yaml"))
    session = HilSession(config, sim=True, real_time_factor=2.0)
    try:
        assert session.wait_for_joint_states(), "no joint states from the session's simulator"
        leads = []
        for step in (0.02, -0.02):    # the second goal has a history to measure a lead from
            arm = config.arms[0]
            target = session.pose(arm.name).copy()
            target[0] += step
            report, _ = session.run(session.move_plan({arm.name: target}, min_duration=0.3),
                                    settle=0.0)
            assert report.succeeded, report.summary()
            leads.append(report.start_lead_s)
        full = 2 * config.execution.start_lead_s
        assert leads == [full, full], (
            f"the bring-up's goals got leads {leads} s of sim time, not the full "
            f"start_lead_s at 2x, {full} s")
    finally:
        session.close()
