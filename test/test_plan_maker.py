"""Plans for any robot (check/plan_maker.py): a wave from the ready pose, within the limits,
collision-free, on one grid; refused by name where no wave is collision-free."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.check.plan_maker import (
    SPEED_FRACTION, PlanMakerError, wave_plan)
from mj_manipulator_ros.check.preflight import scene_checker
from mj_manipulator_ros.core.config import config_from_mapping, limit_or_inf
from mj_manipulator_ros.core.validation import validate_plan
from mj_manipulator_ros.model.limits import load_config_with_model
from mj_manipulator_ros.resources import config_file
from tiny_arm import tiny_mapping


def assert_a_good_wave(config, checker, plan) -> None:
    validate_plan(plan, config)
    times = {tuple(plan[a].times) for a in plan.arm_names}
    assert len(times) == 1                                  # one grid for every arm
    assert set(plan.arm_names) == set(config.arm_names)
    for name in plan.arm_names:
        t, q = plan[name].times, plan[name].positions
        ready = checker.base_qpos[checker.arms[name].qpos_adr]
        assert np.allclose(q[0], ready) and np.allclose(q[-1], ready)
        assert np.ptp(q, axis=0).max() > 0.01                # it moves
        speed = np.abs(np.diff(q, axis=0) / np.diff(t)[:, None]).max(axis=0)  # independent
        for k, joint in enumerate(config.arm(name).joint_names):
            v = limit_or_inf(config.arm(name).joint_limits.get(joint), "velocity")
            if np.isfinite(v):
                assert speed[k] <= SPEED_FRACTION * v * 1.001, (name, joint, speed[k], v)
    assert checker.check(plan).collision_free
    if len(plan.arm_names) > 1:
        assert checker.check(plan, mode="band", skew=config.execution.stop_skew_s).collision_free


def test_the_openarm_gets_a_wave_within_its_limits() -> None:
    config = load_config_with_model(config_file("sim_openarm.yaml"))
    checker = scene_checker(config)
    assert_a_good_wave(config, checker, wave_plan(config, checker))


@pytest.mark.parametrize("arms, separation", [(("a", "b", "c"), 0.5), (("solo",), 1.0)])
def test_any_number_of_arms(tmp_path, arms, separation) -> None:
    config = config_from_mapping(tiny_mapping(tmp_path, arms=arms, separation=separation))
    checker = scene_checker(config)
    assert_a_good_wave(config, checker, wave_plan(config, checker))


def test_arms_too_close_for_any_wave_are_refused_by_name(tmp_path) -> None:
    """Two tiny arms 3 cm apart: they touch at the ready pose, no halving helps."""
    config = config_from_mapping(tiny_mapping(tmp_path, separation=0.03))
    with pytest.raises(PlanMakerError, match=r"no collision-free wave: .* collides .*hil.plans"):
        wave_plan(config, scene_checker(config))


def test_the_openarm_wave_tool_refuses_another_robot_naming_make_plan(tmp_path) -> None:
    """tools/make_wave_plan.py writes the OpenArm's shipped wave (7 joints per arm, hard-coded
    offsets); another robot's configuration is refused by name, nothing written (it crashed
    with "arm ''", issue 42)."""
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(tiny_mapping(tmp_path, arms=("a", "b", "c"))))
    out = tmp_path / "wave.yaml"
    tool = Path(__file__).resolve().parents[1] / "tools" / "make_wave_plan.py"
    run = subprocess.run([sys.executable, str(tool), "--config", str(config), "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "make-plan --config" in run.stderr and "'a': 2" in run.stderr, run.stderr
    assert not out.exists()
