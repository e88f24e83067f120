"""Every bad plan is refused by validate_plan with a message naming arm, waypoint, joint, value."""

from __future__ import annotations

import re

import numpy as np
import pytest

from factories import make_config, make_plan
from mj_manipulator_ros.core import errors as E
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.plan_io import plan_from_mapping
from mj_manipulator_ros.core.validation import plan_problems, validate_plan


def replace_arm(plan: MultiArmPlan, arm: str, **changes) -> MultiArmPlan:
    t = plan[arm]
    fields = dict(joint_names=t.joint_names, times=t.times, positions=t.positions,
                  velocities=t.velocities, accelerations=t.accelerations)
    fields.update(changes)
    return MultiArmPlan({**plan.arms, arm: ArmTrajectory(**fields)})


def with_value(a: np.ndarray, i: int, j: int, v: float) -> np.ndarray:
    a = np.array(a)
    a[i, j] = v
    return a


CFG = make_config(velocity=2.0)
PLAN = make_plan()


def test_valid_plan_passes() -> None:
    assert plan_problems(PLAN, CFG) == []
    validate_plan(PLAN, CFG)


def test_unknown_arm() -> None:
    plan = MultiArmPlan({**PLAN.arms, "middle": PLAN["left"]})
    with pytest.raises(E.UnknownArmError, match=r"arm 'middle': not configured; configured arms: \['left', 'right'\]"):
        validate_plan(plan, CFG)


@pytest.mark.parametrize("names, kind, joint", [
    (("left_j0", "left_j1", "left_jX"), "unknown", "left_jX"),
    (("left_j0", "left_j0", "left_j2"), "duplicate", "left_j0"),
])
def test_joint_mismatch(names, kind, joint) -> None:
    plan = replace_arm(PLAN, "left", joint_names=names)
    with pytest.raises(E.JointMismatchError, match=f"arm 'left', joint '{joint}': {kind}") as info:
        validate_plan(plan, CFG)
    assert info.value.joint == joint


def test_missing_joint() -> None:
    t = PLAN["left"]
    plan = MultiArmPlan({**PLAN.arms, "left": ArmTrajectory(
        t.joint_names[:2], t.times, t.positions[:, :2], t.velocities[:, :2])})
    with pytest.raises(E.JointMismatchError, match=r"missing joint\(s\) \['left_j2'\]"):
        validate_plan(plan, CFG)


def test_empty_trajectory() -> None:
    t = PLAN["right"]
    plan = MultiArmPlan({**PLAN.arms, "right": ArmTrajectory(t.joint_names, np.zeros(0), np.zeros((0, 3)))})
    with pytest.raises(E.EmptyTrajectoryError, match="arm 'right': the trajectory has no waypoints"):
        validate_plan(plan, CFG)


@pytest.mark.parametrize("field, label", [("positions", "position"), ("velocities", "velocity")])
def test_non_finite(field, label) -> None:
    plan = replace_arm(PLAN, "left", **{field: with_value(getattr(PLAN["left"], field), 2, 1, np.nan)})
    with pytest.raises(E.NonFiniteValueError, match=f"arm 'left', waypoint 2, joint 'left_j1': {label} is nan"):
        validate_plan(plan, CFG)


def test_time_not_increasing() -> None:
    times = np.array(PLAN["left"].times)
    times[3] = times[2]
    plan = MultiArmPlan({a: ArmTrajectory(t.joint_names, times, t.positions, t.velocities)
                         for a, t in PLAN.arms.items()})
    with pytest.raises(E.TimeNotIncreasingError, match="arm 'left', waypoint 3: time_from_start 0.5 s is not after"):
        validate_plan(plan, CFG)


def test_negative_start_time() -> None:
    times = np.array(PLAN["left"].times) - 0.1
    plan = MultiArmPlan({a: ArmTrajectory(t.joint_names, times, t.positions, t.velocities)
                         for a, t in PLAN.arms.items()})
    with pytest.raises(E.TimeNotIncreasingError, match="waypoint 0: time_from_start is -0.1 s; expected >= 0"):
        validate_plan(plan, CFG)


def test_size_mismatch_names_waypoint() -> None:
    data = {"arms": {"left": {"joint_names": ["left_j0", "left_j1", "left_j2"], "points": [
        {"time_from_start": 0.0, "positions": [0, 0, 0]},
        {"time_from_start": 1.0, "positions": [0, 0]}]}}}
    with pytest.raises(E.ShapeMismatchError, match="arm 'left', waypoint 1: positions has 2 values, expected 3"):
        plan_from_mapping(data)


def test_position_limit() -> None:
    plan = replace_arm(PLAN, "right", positions=with_value(PLAN["right"].positions, 4, 0, 2.5),
                       velocities=None)
    cfg = make_config(velocity=100.0)
    with pytest.raises(E.JointLimitError, match=re.escape(
            "arm 'right', waypoint 4, joint 'right_j0': position 2.5 is outside the limits [-2, 2]")):
        validate_plan(plan, cfg)


def test_given_velocity_limit() -> None:
    plan = replace_arm(PLAN, "left", velocities=with_value(PLAN["left"].velocities, 1, 2, -3.0))
    with pytest.raises(E.VelocityLimitError, match="waypoint 1, joint 'left_j2': velocity -3 exceeds the limit 2"):
        validate_plan(plan, CFG)


def test_finite_difference_velocity_limit() -> None:
    fast = make_plan(duration=0.05, velocities=False)  # up to 0.3 rad in 12.5 ms ~ 20 rad/s
    with pytest.raises(E.VelocityLimitError, match="needs a mean velocity of"):
        validate_plan(fast, CFG)
    validate_plan(fast.time_scaled(0.02), CFG)  # 50x slower passes


def test_final_velocity_nonzero() -> None:
    plan = replace_arm(PLAN, "left", velocities=with_value(PLAN["left"].velocities, 4, 0, 0.01))
    with pytest.raises(E.FinalVelocityError, match="waypoint 4, joint 'left_j0': final velocity is 0.01; expected 0"):
        validate_plan(plan, CFG)


def test_time_grids_must_match() -> None:
    other = make_plan(duration=1.2)
    plan = MultiArmPlan({"left": PLAN["left"], "right": other["right"]})
    with pytest.raises(E.TimeGridMismatchError, match="arm 'right', waypoint 1: time_from_start 0.3 s differs from arm 'left'"):
        validate_plan(plan, CFG)


def test_all_problems_are_collected() -> None:
    plan = replace_arm(PLAN, "left", velocities=with_value(PLAN["left"].velocities, 4, 0, 0.01))
    plan = replace_arm(plan, "right", positions=with_value(plan["right"].positions, 1, 1, 9.0))
    problems = plan_problems(plan, CFG)
    assert {type(p) for p in problems} >= {E.FinalVelocityError, E.JointLimitError}
    with pytest.raises(E.PlanError, match=r"and \d+ more problem"):
        validate_plan(plan, CFG)


def test_time_scaled_is_consistent() -> None:
    slow = PLAN.time_scaled(0.5)
    assert slow.duration == pytest.approx(2 * PLAN.duration)
    np.testing.assert_allclose(slow["left"].velocities, 0.5 * PLAN["left"].velocities)
    np.testing.assert_allclose(slow["left"].positions, PLAN["left"].positions)
    with pytest.raises(E.PlanError, match="positive finite"):
        PLAN.time_scaled(0.0)


# ---- what a plan may cost (issue 29 item 8) ----

def test_a_plan_that_lasts_too_long_is_refused_before_anything_is_sampled() -> None:
    from mj_manipulator_ros.core.errors import PlanCostError
    from mj_manipulator_ros.core.plan_io import load_plan
    from mj_manipulator_ros.model.limits import load_config_with_model
    from mj_manipulator_ros.resources import config_file, share_dir

    config = load_config_with_model(config_file("sim_openarm.yaml"))
    plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    validate_plan(plan, config)
    with pytest.raises(PlanCostError, match=r"lasts 1\.4e\+07 s .*max_plan_duration_s = 600 s"):
        validate_plan(plan.time_scaled(1e-6), config)
    few = config.with_execution(max_plan_points=1000)
    with pytest.raises(PlanCostError, match="1401 waypoints, more than execution.max_plan_points"):
        validate_plan(plan, few)


def test_check_plan_refuses_a_plan_at_3e9_s_within_a_memory_bound(tmp_path) -> None:
    """A plan whose last point is at 3e9 s, through ``check-plan`` in a process limited to 3 GB
    of address space: exit 2 naming the bound (regression: MemoryError traceback; ``--speed
    1e-6`` grew to 23 GB before the kernel killed it)."""
    import resource
    import subprocess
    import sys

    from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
    from mj_manipulator_ros.core.plan_io import load_plan, save_plan
    from mj_manipulator_ros.resources import config_file, share_dir

    crossing = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    arms = {}
    for name in crossing.arm_names:
        t = crossing[name]
        arms[name] = ArmTrajectory(t.joint_names, np.array([0.0, 3e9]), t.positions[[0, 0]])
    path = tmp_path / "forever.yaml"
    save_plan(MultiArmPlan(arms), path)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    out = subprocess.run([sys.executable, "-m", "mj_manipulator_ros.cli", "check-plan", str(path),
                          "--config", str(config_file("sim_openarm.yaml"))],
                         capture_output=True, text=True, timeout=120, preexec_fn=limit)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "max_plan_duration_s" in out.stderr and "Traceback" not in out.stderr
    assert load_plan(path)  # the file itself is fine: the refusal is the cost bound's


def test_speed_factors_below_the_minimum_are_refused() -> None:
    from mj_manipulator_ros.core.errors import PlanCostError
    from mj_manipulator_ros.core.validation import check_speed_factor

    config = make_config(("left",), joints=1)
    assert check_speed_factor(0.01, config) == 0.01 and check_speed_factor(1.0, config) == 1.0
    for bad in (1e-9, 1e-300, 0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(PlanCostError, match=r"expected a number in \[0.01, 1\]"):
            check_speed_factor(bad, config)


def test_a_plan_read_again_is_its_text_now_never_a_kept_one(tmp_path) -> None:
    """Plans read in a process are kept by their text: the same text again gives the same
    (read-only) trajectories without parsing, in a plan of the caller's own; a file rewritten in
    place (same size, same modification time) gives the new text's plan."""
    import os

    from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
    from mj_manipulator_ros.core.plan_io import load_plan, save_plan

    def plan_with(x: float) -> MultiArmPlan:
        return MultiArmPlan({"left": ArmTrajectory(("j1", "j2"), np.array([0.0, 1.0]),
                                                   np.array([[0.0, 0.0], [x, 0.25]]))})
    path = tmp_path / "p.yaml"
    save_plan(plan_with(0.5), path)
    first, again = load_plan(path), load_plan(path)
    assert again.arms["left"] is first.arms["left"], "the same text was parsed again"
    assert again is not first and again.arms is not first.arms
    again.arms.pop("left")
    assert "left" in load_plan(path).arms, "one caller's plan changed what the next one reads"
    with pytest.raises(ValueError):
        first["left"].positions[1, 0] = 9.0
    stat = path.stat()
    save_plan(plan_with(0.7), path)          # same length of text, same times on the file
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert load_plan(path)["left"].positions[1, 0] == 0.7
