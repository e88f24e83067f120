"""`make demo` end to end: the simulated OpenArm pair runs the crossing plan through the combined
action, synchronized (real MuJoCo model, real DDS, ~15 s)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import mujoco
import pytest

from bag_reader import read_bag
from mj_manipulator_ros.apps.demo import run_demo, summary


def lag_warnings_only_above_the_threshold(health: str, captured) -> None:
    """Regression: one `make demo` on an idle machine printed ~200 WARN lines "simulator
    behind real time by 2.x ms (more than one control period, 2.0 ms)", each harmless. The
    simulator warns only while a goal runs and the lag is above half the smaller of
    sim.max_lag_s and execution.joint_state_timeout_s that is on (docs/simulator.md): under it
    the demo's output (every line the process wrote, rclpy's logging included) holds no lag
    warning; over it (a loaded machine), it holds one, and the health line counts them."""
    import re

    from mj_manipulator_ros.core.config import load_config
    from mj_manipulator_ros.resources import config_file
    from mj_manipulator_ros.sim.sim_config import sim_config

    cfg = sim_config(load_config(config_file("sim_openarm.yaml")))
    bounds = [b for b in (cfg.sim.max_lag_s, cfg.executor.execution.joint_state_timeout_s)
              if b > 0]
    threshold = 0.5 * min(bounds)   # the documented rule
    active = float(re.search(r"with a goal active ([0-9.]+) ms", health).group(1)) * 1e-3
    text = captured.out + captured.err
    assert "combined goal: execution succeeded" in text, "rclpy's log lines were not captured"
    lag_warnings = [line for line in text.splitlines()
                    if "WARN" in line and "behind real time" in line]
    print(f"worst lag with a goal active {active * 1e3:.1f} ms (threshold "
          f"{threshold * 1e3:.0f} ms), {len(lag_warnings)} lag warning(s); {health}")
    if active <= threshold:
        assert lag_warnings == [], lag_warnings[:5]
    else:
        assert lag_warnings, health
    said = int(re.search(r"(\d+) warning\(s\)", health).group(1))
    assert f"warns above {threshold * 1e3:.0f} ms" in health and said == len(lag_warnings)


#: one control cycle (2 ms) as a difference of two motion onsets: the onsets are epoch seconds
#: in float64 (resolution 2.4e-7 s near 1.7e9 s), so a difference of two is exact to 5e-7 s,
#: not to 1e-9 (measured: 0.0020000935 for one cycle; with 1e-9 the torque demo failed on
#: exactly one cycle beside two busy loops, where the arms start a cycle apart more often)
ONE_CYCLE = 0.002 + 5e-7


@pytest.mark.slow
def test_demo_runs_the_crossing_plan_synchronized(tmp_path, monkeypatch, capfd) -> None:
    monkeypatch.setenv("MUJOCO_GL", os.environ.get("MUJOCO_GL", "egl"))
    out = tmp_path / "demo_report.json"
    doc = run_demo(out=out)
    lag_warnings_only_above_the_threshold(doc["simulator"], capfd.readouterr())
    assert json.loads(out.read_text()) == json.loads(json.dumps(doc))
    assert set(doc) == {"start_stamp", "start_skew_s", "arms", "execution", "replay",
                        "scene_xml", "physics_step", "bag", "simulator", "moveit_monitoring"}
    within_moveits_default_monitoring(doc)
    assert "control cycles" in doc["simulator"]
    # the composed scene is kept beside the report and loads on its own
    scene = mujoco.MjModel.from_xml_path(str(tmp_path / doc["scene_xml"]))
    assert scene.opt.timestep == doc["physics_step"]["timestep_s"] == 0.002
    assert doc["physics_step"]["binding"] is None and not doc["physics_step"]["broken"]
    # the run is left as a bag, read back by the independent reader
    bag = read_bag(Path(doc["bag"]))
    assert Path(doc["bag"]).parent == tmp_path / "demo_bags"
    assert len(bag.decoded("/joint_states")) > 500  # 14 s at 100 Hz
    assert json.loads(bag.metadata["custom_data"]["report"]) == doc["execution"]
    assert bag.metadata["custom_data"]["scene_xml"] == (tmp_path / doc["scene_xml"]).read_text()
    assert doc["replay"]["synchronized"]["colliding_states"] == 0
    assert doc["replay"]["sequential"]["colliding_states"] > 0
    assert (tmp_path / "demo_sequential_worst.png").stat().st_size > 10000
    assert doc["execution"]["status"] == "succeeded", summary(doc)
    for arm in ("left", "right"):
        a = doc["arms"][arm]
        assert set(a) == {"status", "motion_onset_s", "max_tracking_error_rad", "final_error_rad"}
        assert a["status"] == "succeeded"
        assert a["motion_onset_s"] >= 0.0  # nothing moves before the shared stamp
        # (how soon after the stamp is timing, measured in bench/sim_bench.py)
        assert a["max_tracking_error_rad"] < 0.1 and a["final_error_rad"] < 0.05
    # One physics thread serves both arms: both start within one control cycle (2 ms).
    assert doc["start_skew_s"] <= ONE_CYCLE


def within_moveits_default_monitoring(doc: dict) -> None:
    """The demo's client watched the goal as MoveIt's execution manager does with its defaults
    (it cancels a goal with no result ``duration x 1.2 + 0.5 s`` after sending it; the checks
    before the start stamp and the start lead count against that): the result came within the
    bound and nothing was canceled."""
    m = doc["moveit_monitoring"]
    assert m["bound_s"] == pytest.approx(14.0 * 1.2 + 0.5), m   # the crossing plan's 14 s
    assert not m["canceled"] and 0.0 < m["slack_s"], (
        f"MoveIt's default execution monitoring would have canceled the crossing plan: {m}")
    assert m["accepted_after_s"] < m["result_after_s"] < m["bound_s"], m


# Its verdict includes a wall-clock figure (MoveIt's bound, counted from sending), as the
# position-mode demo's above does in the shared part. It ran alone from 4d41340 to c2a971c: in
# a fresh suite run beside one busy loop the goal was then accepted 1.56 s after sending (the
# pre-flight gate took ~1 s on a loaded machine) and the result came 32 ms past the bound; the
# gate now takes ~0.1 s idle (issue 46: bench/goal_phases.py), the slack beside a busy loop
# 2.9 s (bench/goal_latency.py), and the test shares the machine again.
@pytest.mark.slow
def test_demo_in_torque_mode_from_the_command_line(tmp_path) -> None:
    """`mj-manipulator-ros demo --controller torque`: the crossing plan on computed-torque
    controllers, synchronized, as accurate as the position servos or better."""
    import subprocess
    import sys

    cli = str(Path(sys.executable).with_name("mj-manipulator-ros"))
    out = subprocess.run([cli, "demo", "--controller", "torque", "--out",
                          str(tmp_path / "demo_report.json")], capture_output=True, text=True,
                         timeout=240, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    doc = json.loads((tmp_path / "demo_report.json").read_text())
    assert doc["execution"]["status"] == "succeeded"
    within_moveits_default_monitoring(doc)
    assert doc["start_skew_s"] <= ONE_CYCLE
    for arm in ("left", "right"):
        assert doc["arms"][arm]["max_tracking_error_rad"] < 0.02  # the servos: about 0.02


def test_a_failed_demo_says_why_never_a_traceback(tmp_path) -> None:
    """The right arm's controller aborts 1 s into the plan (an injected fault): the demo prints
    the failure with its reason and every figure ("not measured" where there is none) and exits
    1 (regression: a failure crashed the summary with TypeError on a None figure)."""
    import subprocess
    import sys

    import yaml

    from mj_manipulator_ros.resources import config_file

    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    data["sim"]["faults"] = {"right": {"abort_after_s": 1.0}}
    cfg = tmp_path / "faulted.yaml"
    cfg.write_text(yaml.safe_dump(data))
    cli = str(Path(sys.executable).with_name("mj-manipulator-ros"))
    out = subprocess.run([cli, "demo", "--config", str(cfg), "--out",
                          str(tmp_path / "demo_report.json")], capture_output=True, text=True,
                         timeout=240, cwd=tmp_path)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert "execution: failed" in out.stdout
    assert "first failure: right: aborted: injected fault: abort 1.0 s after the start" in out.stdout


def test_the_summary_says_not_measured_for_missing_figures() -> None:
    doc = {"execution": {"status": "failed", "first_failure": {
               "arm": "right", "reason": "late_acceptance", "error_code": None,
               "error_string": "goal accepted 95.6 ms after the start stamp"}},
           "arms": {"right": {"status": "not_sent", "motion_onset_s": None,
                              "max_tracking_error_rad": None, "final_error_rad": None}},
           "start_skew_s": None, "replay": {}}
    text = summary(doc)
    assert "right: late_acceptance: goal accepted 95.6 ms" in text
    assert text.count("not measured") == 4
