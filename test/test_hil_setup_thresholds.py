"""A robot's own bring-up thresholds (``hil.stages`` in its configuration): applied to the
stage that reads them, validated before anything runs, and part of the setup fingerprint."""

from __future__ import annotations

import json

import pytest
import yaml

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.hil.runner import run_hil
from mj_manipulator_ros.hil.setup_thresholds import with_setup
from mj_manipulator_ros.hil.stages import load_protocol
from mj_manipulator_ros.resources import config_file


def config_with(tmp_path, hil=None, widen_rad: float = 0.0, name: str = "c.yaml"):
    """The simulated OpenArm pair's configuration, left joint 1's upper limit ``widen_rad``
    beyond the model's range, and ``hil`` as its bring-up section."""
    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    data["arms"][0]["joint_limits"]["openarm_left_joint1"]["upper"] += widen_rad
    if hil is not None:
        data["hil"] = hil
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_threshold_set_by_the_robot_decides_its_check(tmp_path) -> None:
    """Limits 0.05 rad beyond the model fail stage 0 at hil/stages.yaml's 0.001 rad, and pass
    at the 0.1 rad the configuration sets; the record says which threshold was used."""
    said = []
    wide = config_with(tmp_path, widen_rad=0.05, name="wide.yaml")
    assert run_hil(str(wide), stage=0, results=str(tmp_path / "a"), say=said.append) == 1, said
    assert any("[FAIL] limits_within_model" in s for s in said), said
    said.clear()
    ok = config_with(tmp_path, widen_rad=0.05, name="ok.yaml", hil={
        "stages": {"offline_consistency": {"checks": {"limits_within_model": 0.1}}}})
    assert run_hil(str(ok), stage=0, results=str(tmp_path / "b"), say=said.append) == 0, said
    rows = [json.loads(line) for p in (tmp_path / "b").glob("*/checks.jsonl")
            for line in p.read_text().splitlines()]
    used = {r["threshold"] for r in rows if r.get("name") == "limits_within_model"}
    assert used == {0.1}, rows


def test_the_section_is_part_of_the_setup_fingerprint(tmp_path) -> None:
    from mj_manipulator_ros.hil.records import fingerprint
    from mj_manipulator_ros.model.limits import load_config_with_model
    plain = load_config_with_model(config_with(tmp_path, name="p.yaml"))
    set_ = load_config_with_model(config_with(tmp_path, name="s.yaml", hil={
        "stages": {"stop_latency": {"checks": {"controlled_stop_time_error": 0.35}}}}))
    assert fingerprint(plain, "sim") != fingerprint(set_, "sim")


@pytest.mark.parametrize("hil, message", [
    ({"stage": {}}, r"hil: unknown key\(s\) \['stage'\]; allowed: \['plans', 'stages'\]"),
    ({"stages": {"stop_latncy": {}}}, r"hil.stages: no stage 'stop_latncy'; stages are \[.*'stop_latency'"),
    ({"stages": {"stop_latency": {"check": {}}}},
     r"hil.stages.stop_latency: unknown key\(s\) \['check'\]; allowed: \['checks', 'params'\]"),
    ({"stages": {"stop_latency": {"checks": {"stop_time": 1}}}},
     r"hil.stages.stop_latency.checks: stage 3 \(stop_latency\) has no check 'stop_time'; its checks are \["),
    ({"stages": {"connected": {"checks": {"action_server": 1}}}},
     r"hil.stages.connected.checks.action_server: a pass/fail check .* has no threshold"),
    ({"stages": {"connected": {"checks": {"gravity_consistency": "0.4"}}}},
     r"checks.gravity_consistency: expected a finite number >= 0 \(N m\), got str '0.4'"),
    ({"stages": {"connected": {"checks": {"gravity_consistency": float("nan")}}}},
     r"expected a finite number >= 0 \(N m\), got float nan"),
    ({"stages": {"connected": {"checks": {"gravity_consistency": -1}}}}, r"got int -1"),
    ({"stages": {"connected": {"checks": {"gravity_consistency": True}}}}, r"got bool True"),
    ({"stages": {"connected": {"params": {"listen": 4}}}},
     r"stage 1 \(connected\) has no parameter 'listen'; its parameters are \["),
    ({"stages": {"small_motion": {"params": {"runs": 2.5}}}},
     r"small_motion.params.runs: expected a whole number \(as its default 10\), got 2.5"),
    ({"stages": {"connected": {"params": {"picture_word": ""}}}},
     r"params.picture_word: expected a non-empty string"),
    ({"stages": {"stop_latency": {"params": {"fractions": 0.5}}}},
     r"params.fractions: expected a non-empty list of numbers \(as its default \[0.3, 0.5, "
     r"0.85\]\), got float 0.5"),
    ({"stages": {"stop_latency": {"params": {"fractions": [0.5, "x"]}}}},
     r"params.fractions\[1\]: expected a finite number >= 0, got str 'x'"),
    ({"stages": {"stop_latency": {"params": {"table_poses": [1]}}}},
     r"params.table_poses: expected names \(strings\), got \[1\]"),
    ({"stages": {"stop_latency": {"params": {"table_poses": []}}}},
     r"params.table_poses: expected a non-empty list of names"),
    ({"stages": {"stop_latency": {"params": {"table_speeds": ["fast"]}}}},
     r"params.table_speeds\[0\]: expected a finite number >= 0, got str 'fast'"),
    ({"stages": {"stop_latency": {"params": {"table_arms": [2]}}}},
     r"params.table_arms: expected names \(strings\), got \[2\]"),
    ({"stages": ["stop_latency"]}, r"hil.stages: expected a mapping of stage id"),
    ("x", r"hil: expected a mapping"),
])
def test_a_wrong_entry_is_refused_by_name(hil, message) -> None:
    with pytest.raises(ConfigError, match=message):
        with_setup(load_protocol(), hil)


def test_the_bring_up_refuses_a_wrong_entry_before_anything_runs(tmp_path) -> None:
    said: list[str] = []
    path = config_with(tmp_path, hil={"stages": {"connected": {"checks": {"listen": 1}}}})
    assert run_hil(str(path), stage=0, results=str(tmp_path / "r"), say=said.append) == 2
    assert any("stage 1 (connected) has no check 'listen'" in s for s in said), said
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").glob("*/checks.jsonl"))


def test_a_set_threshold_says_what_it_replaced() -> None:
    protocol = with_setup(load_protocol(), {"stages": {"stop_latency": {
        "checks": {"controlled_stop_time_error": 0.35}, "params": {}}}})
    spec = protocol.by_id("stop_latency").check("controlled_stop_time_error")
    default = load_protocol().by_id("stop_latency").check("controlled_stop_time_error").threshold
    assert spec.threshold == 0.35 and spec.default == default
    assert f"(set by the configuration's hil.stages; hil/stages.yaml: {default:g})" in \
        spec.criterion()
