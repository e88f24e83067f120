"""The OpenArm driver's default MIT settings on the actuator twin (KP 20, KD 2.75, no gravity
feed-forward: config/sim_openarm_driver_defaults.yaml), against an independent reference: the
equilibrium where a P controller's torque balances the model's gravity, found by bisection on
the model (bench/field_report_72.py runs the whole enactic/openarm_ros2#72 comparison)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from mj_manipulator_ros.core.config import config_from_mapping, load_config
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.resources import config_file
from mj_manipulator_ros.sim.sim_config import sim_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from field_report_72 import run, static_prediction  # noqa: E402


@pytest.mark.slow
def test_without_feed_forward_the_shoulder_sags_to_the_p_equilibrium() -> None:
    base = sim_config(load_config(config_file("sim_openarm_driver_defaults.yaml")))
    assert base.sim.arm("left").mit_kp == 20.0 and not base.sim.arm("left").mit_feed_forward
    reached, _ = run(base, 60.0)
    assert reached == pytest.approx(static_prediction(base, 60.0, 20.0), abs=0.3)
    assert reached < 45.0                       # far from the command: the field's complaint
    with_ff = dataclasses.replace(base, sim=dataclasses.replace(base.sim, arms={
        a: dataclasses.replace(s, mit_feed_forward=True) for a, s in base.sim.arms.items()}))
    reached_ff, _ = run(with_ff, 60.0)
    assert reached_ff == pytest.approx(60.0, abs=0.5)


def test_mit_settings_only_with_the_mit_controller() -> None:
    import yaml

    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    data["sim"]["arms"] = {"left": {"controller": "position", "mit_kp": 20.0}}
    with pytest.raises(ConfigError, match="apply to controller 'mit' only"):
        sim_config(config_from_mapping(data, "t"))
