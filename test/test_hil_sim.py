"""HIL bring-up rehearsed against the simulated OpenArm pair (real MuJoCo, real DDS)."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from mj_manipulator_ros.hil.runner import run_hil
from mj_manipulator_ros.resources import config_file

CLI = [sys.executable, "-m", "mj_manipulator_ros.cli", "hil"]


def events(run_dir: Path) -> list[dict]:
    return [json.loads(l) for l in (run_dir / "checks.jsonl").read_text().splitlines()]


def only_run(root: Path) -> Path:
    (run,) = [d for d in root.iterdir() if d.is_dir()]
    return run


def faulted_config(tmp_path: Path, faults: dict, stages: dict | None = None) -> Path:
    """The simulated OpenArm with ``faults`` (and ``hil.stages`` settings, when given)."""
    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    data["sim"]["faults"] = faults
    if stages:
        data["hil"] = {"stages": stages}
    path = tmp_path / "faulted.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def rehearse_fault(tmp_path: Path, faults: dict, reason: str, **stages) -> tuple[int, str]:
    """``hil --sim --yes --force`` on the simulated OpenArm with ``faults`` (``stages``: the
    runner's ``stage=`` or ``through=``): its exit code and what it said."""
    said: list[str] = []
    code = run_hil(str(faulted_config(tmp_path, faults)), sim=True, yes=True, force=True,
                   reason=reason, results=str(tmp_path / "r"), say=said.append, **stages)
    return code, "\n".join(said)


#: the suite's time (make test under 10 minutes): every stage, check, threshold, speed and cancel
#: point of hil/stages.yaml, with fewer repetitions of the same check (stage 1 listens 2 s, not
#: 4; stage 2 runs each arm's small motion 3 times, not 10). `make rehearse` runs the protocol
#: as shipped: 222 s for stages 0-6 on this 2-core machine, idle (3.7 min; 2026-12-04).
SUITE_REPETITIONS = {"connected": {"params": {"listen_s": 2.0}},
                     "small_motion": {"params": {"runs": 3}, "checks": {"clean_runs": 3}}}


@pytest.mark.slow
# The rehearsal is one process (simulator at a 2x target, executor, recorder). The hang guard
# is the subprocess's own 900 s bound, which the suite-wide 300 s would otherwise cut short.
@pytest.mark.timeout(900)
def test_sim_rehearsal_passes_stages_0_through_6(tmp_path) -> None:
    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    data["hil"] = {"stages": SUITE_REPETITIONS}
    config = tmp_path / "sim_openarm.yaml"
    config.write_text(yaml.safe_dump(data))
    out = subprocess.run([*CLI, "--config", str(config), "--sim", "--yes",
                          "--through", "6", "--results", str(tmp_path / "records")],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    run = only_run(tmp_path / "records")
    checks = [e for e in events(run) if "name" in e]
    assert {c["stage"] for c in checks} == set(range(7))
    assert all(c["pass"] for c in checks)
    alone = [c for c in checks if c["stage"] == 4 and c["name"] == "alone_succeeded"]
    assert {c["subject"].split("/")[-1] for c in alone if c["status"] == "passed"} == {"left", "right"}
    assert all(c["measured"] > 0 for c in alone if c["status"] == "not_applicable")
    skew = [c for c in checks if c["name"] == "start_skew"]
    assert skew and all(c["measured"] <= 0.02 for c in skew)
    # every joint jogged before the small motion, each seen by the (emulated) operator
    jog = {c["name"]: c for c in checks if c["stage"] == 2 and c["name"].startswith("jog_")}
    assert set(jog) == {"jog_response", "jog_isolation", "jog_position_error", "jog_gravity",
                        "jog_observed"}
    assert all("of 14 joints jogged" in c["detail"] for c in jog.values())
    pictures = {p.name for p in (run / "pictures").iterdir()}
    assert "stage1_pose.png" in pictures and len([p for p in pictures if "jog" in p]) == 28
    # then the pose set stage 1 announced, each pose weighed and pictured (and the robot's)
    said = [c for c in checks if c["name"] == "gravity_identifiable"]
    poses = [c for c in checks if c["name"] == "pose_set_gravity"]
    assert {c["subject"] for c in said} == {"left", "right"} and poses, said
    assert sum(c["detail"].count("pose set:") + c["detail"].count("gain pose:")
               for c in said) == len(poses), (said, poses)
    assert {c["subject"] for c in poses} >= {"left/gain pose", "right/gain pose"}, poses
    assert len([p for p in pictures if p.startswith("stage2_pose_")]) == 2 * len(poses)
    # the arms' load fitted from every rest of the stage: a healthy arm's is the model's (the
    # fit's errors counting static friction: without, link 2 came out "x1.50 +- 0.20"), and the
    # corrected model is written where scene.mass_overlay can name it
    loads = {c["subject"]: c for c in checks if c["name"] == "load_fit"}
    assert set(loads) == {"left", "right"} and all(
        "no part of the load is 2 standard errors off the model's" in c["detail"]
        for c in loads.values()), loads
    from mj_manipulator_ros.model.mass_overlay import read_overlay
    overlay = read_overlay(run / "mass_overlay.json")
    assert any("left" in b for b in overlay) and any("right" in b for b in overlay), overlay
    assert (run / "summary.md").read_text().count("**passed**") == 7
    assert (run / "timeline.png").stat().st_size > 10000
    # every run that moved is a bag in the run folder, linked from the summary with how to open it
    bags = sorted((run / "bags").iterdir())
    assert {b.name.split("_")[0] for b in bags} >= {"stage2", "stage3", "stage4", "stage5", "stage6"}
    summary = (run / "summary.md").read_text()
    assert all(f"(bags/{b.name})" in summary for b in bags) and "ros2 bag info" in summary
    from bag_reader import read_bag
    read = {b.name: read_bag(b) for b in bags}   # every bag: mcap, mcap_ros2, rclpy, rosbags
    assert all(bag.on("/joint_states") for bag in read.values())
    stage5 = read[next(b.name for b in bags if b.name.startswith("stage5"))]
    assert stage5.decoded("/joint_states") and stage5.metadata["custom_data"]["scene_xml"]
    assert (run / "scene.xml").read_text() == stage5.metadata["custom_data"]["scene_xml"]
    # the runs whose figures are latencies ran at real time (settings.sim_latency_real_time_
    # factor 1), every other one faster: a wall-clock delay of the cancel's path counts as it
    # does on the robot (at 2x a 46 ms hiccup made a hold overshoot over its bound)
    paces = {name: pace(bag) for name, bag in read.items()}
    stops = sorted(n for n, p in paces.items() if n.startswith("stage3") and p <= 1.15)
    assert len(stops) >= 8, f"stage 3's 8 stops did not all run at real time: {paces}"
    assert any(p <= 1.15 for n, p in paces.items() if n.startswith("stage6")), paces
    state = json.loads((tmp_path / "records" / "state.json").read_text())
    assert list(state.values())[0]["last_passed"] == 6
    assert "all stages passed" in out.stdout


#: pieces of a bag's stamps whose promptest message each gives one point of the pace's line
PACE_PIECES = 12


def pace(bag) -> float:
    """Simulated seconds per wall second over a bag: its joint states' stamps (the simulator's
    clock) against their log times (this machine's clock when they were written). A message
    read late (a backlog in the recording process under load) is logged late: a backlog that
    drains over a run would read as a faster pace (1.15-1.26 for runs at real time). So the
    line is fitted, least squares, through the promptest message of each of PACE_PIECES equal
    pieces of the stamps (each one's log time the least late of its piece)."""
    from sensor_msgs.msg import JointState

    stamps = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9
                       for m in bag.decoded("/joint_states", JointState)])
    logs = np.array([t * 1e-9 for _, t, _ in bag.on("/joint_states")])
    return prompt_pace(stamps, logs)


def prompt_pace(stamps: np.ndarray, logs: np.ndarray) -> float:
    """:func:`pace` from the stamps and log times (s)."""
    logs, stamps = logs - logs[0], stamps - stamps[0]
    edges = np.linspace(stamps.min(), stamps.max(), PACE_PIECES + 1)
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = np.flatnonzero((stamps >= lo) & (stamps <= hi))
        if inside.size:
            # the least late: the smallest log time less the stamp at the run's mean pace
            k = inside[np.argmin(logs[inside] - stamps[inside] / _slope(stamps, logs))]
            rows.append((logs[k], stamps[k]))
    w, t = np.array(rows).T
    return float(np.polyfit(w, t, 1)[0])


def _slope(stamps: np.ndarray, logs: np.ndarray) -> float:
    return float(np.polyfit(logs, stamps, 1)[0])


def test_the_pace_of_a_bag_is_the_simulators_not_its_backlogs() -> None:
    """Messages produced at real time (pace 1), 500 per second over 1.5 s, received 0.5 ms
    after; the recorder starts 300 ms behind and catches up over the first 1.2 s (one message
    in 50 read at once, the backlog's gaps): the pace read is 1 within 2 %; the plain fit of
    every point reads the catching up as faster (regression: the rehearsal's runs at real time
    read 1.15-1.26 under load)."""
    t = np.arange(0.0, 1.5, 0.002)
    backlog = np.clip(0.3 * (1.0 - t / 1.2), 0.0, None)
    prompt = 100.0 + t + 0.0005
    logs = np.where(np.arange(t.size) % 50 == 0, prompt, prompt + backlog)
    assert abs(prompt_pace(t, logs) - 1.0) < 0.02, prompt_pace(t, logs)
    assert _slope(t, logs) > 1.15, _slope(t, logs)   # the plain fit is fooled


@pytest.mark.slow
def test_arm_ignoring_cancel_fails_stage_3(tmp_path) -> None:
    said = []
    # the cancel at 30 % of the motion only (the fault shows at the first; the suite's time)
    cfg = faulted_config(tmp_path, {"left": {"ignore_cancel": True}},
                         {"stop_latency": {"params": {"fractions": [0.3]}}})
    code = run_hil(str(cfg), sim=True, yes=True, stage=3, force=True,
                   reason="rehearsing a controller that ignores cancels",
                   results=str(tmp_path / "r"), say=said.append)
    assert code == 1
    text = "\n".join(said)
    assert "[FAIL] cancel_confirmed left@30%" in text and "cancel refused" in text
    assert "[FAIL] stop_latency left@30%" in text
    assert "[pass] cancel_confirmed right@30%" in text
    assert "stage 3 FAILED" in text


@pytest.mark.slow
def test_stage_3_judges_the_allowances_and_writes_the_stop_table(tmp_path) -> None:
    """With a stop limit set, stage 3 measures each arm's own response to its stops against the
    allowances the gate counts on: the shipped stop_settle_s covers the position servos'
    catch-up; hold_settle_s left at its default (0.05 s) is short of a cancel's real stop time
    (0.1-0.44 s measured, bench/measured_stops.py) and fails, by arm. The stop table's rows
    asked of it run on the (simulated) robot: measured beside predicted in stop_table.json of
    the run folder, each row a check (judged: a limit is set)."""
    import json

    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    # a limit the table's row keeps at its own speed (predicted 1.07 s: the gate does not slow it)
    data["execution"].update({"max_stop_time_s": 1.2, "hold_settle_s": 0.05})
    data["hil"] = {"stages": {"stop_latency": {"params": {
        "fractions": [0.3], "table": True, "table_speeds": [0.33], "table_poses": ["extended"],
        "table_arms": ["left"], "table_joints": ["openarm_left_joint2"]}}}}
    cfg = tmp_path / "limited.yaml"
    cfg.write_text(yaml.safe_dump(data))
    said = []
    code = run_hil(str(cfg), sim=True, yes=True, stage=3, force=True,
                   reason="rehearsing the stop limits' allowances and the stop table",
                   results=str(tmp_path / "r"), say=said.append)
    text = "\n".join(said)
    assert code == 1, text
    for arm in ("left", "right"):
        assert f"[FAIL] hold_settle {arm}@30%" in text, text
        assert f"[pass] stop_settle {arm}@50% controlled" in text, text
    assert "execution.hold_settle_s 0.05 s (a stop limit is set" in text
    assert "[pass] stop_table_row left openarm_left_joint2 extended 33%" in text, text
    found = list((tmp_path / "r").rglob("stop_table.json"))
    assert len(found) == 1 and found[0].with_suffix(".png").exists()
    doc = json.loads(found[0].read_text())
    measured = [r for r in doc["rows"] if r["measured"]]
    assert [r["joint"] for r in measured] == ["openarm_left_joint2"]
    m, pred = measured[0]["measured"]["rehearsal"], measured[0]["predicted"]
    assert 0 < m["time_s"] <= pred["time_s"], measured
    assert 0.5 * pred["joint_travel"] < m["joint_travel"], measured      # the joint did move
    assert m["hand_travel_m"] <= pred["hand_travel_m"], measured


@pytest.mark.slow
def test_a_stop_test_refused_by_the_stop_limits_says_why(tmp_path) -> None:
    """Regression: a stage-3 motion the gate refused (a stop limit no speed fits: the start
    lead alone, doubled for the 2x rehearsal to 0.5 s, exceeds 0.4 s) ended the stage with
    "KeyError: 'report'"."""
    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    data["execution"]["max_stop_time_s"] = 0.4
    cfg = tmp_path / "limited.yaml"
    cfg.write_text(yaml.safe_dump(data))
    said = []
    code = run_hil(str(cfg), sim=True, yes=True, stage=3, force=True, reason="refused",
                   results=str(tmp_path / "r"), say=said.append)
    text = "\n".join(said)
    assert code == 1
    assert "StopLimitError: stop limits: no speed fits: arm 'left'" in text, text
    assert "KeyError" not in text


@pytest.mark.slow
def test_acceptance_delayed_past_the_stamp_fails_stage_5(tmp_path) -> None:
    said = []
    # the delay is on the controller's (sim) clock; the lead there is 0.25 s x the rehearsal's
    # 2x factor (session.py): 0.8 s is 1.6 leads late, as 0.4 s was against the unscaled lead
    cfg = faulted_config(tmp_path, {"right": {"accept_delay_s": 0.8}})
    code = run_hil(str(cfg), sim=True, yes=True, stage=5, force=True,
                   reason="rehearsing a slow controller", results=str(tmp_path / "r"),
                   say=said.append)
    assert code == 1
    text = "\n".join(said)
    assert "[FAIL] synchronized_succeeded openarm_crossing" in text
    assert "late_acceptance" in text and "after the start stamp" in text
    assert "stage 5 FAILED" in text


@pytest.mark.slow
def test_ctrl_c_cancels_and_is_recorded(tmp_path, processes) -> None:
    proc = processes([*CLI, "--config", str(config_file("sim_openarm.yaml")), "--sim", "--yes",
                      "--stage", "2", "--force", "--reason", "Ctrl-C rehearsal",
                      "--results", str(tmp_path)])
    # every moving run is recorded (<run>/bags/stage2_<k>): once the first one's bag exists the
    # execution is under way (its checks, the gate and the stamp are behind it); 1 s more and
    # the arms move
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and \
            not list(tmp_path.glob("*/bags/stage2_*")):
        time.sleep(0.05)
    assert list(tmp_path.glob("*/bags/stage2_*")), "stage 2 never started a recorded run"
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    run = only_run(tmp_path)
    interrupted = [e for e in events(run) if e.get("event") == "interrupted"]
    assert interrupted and interrupted[0]["detail"] == "Ctrl-C: every arm canceled"
    report = interrupted[0]["report"]  # the real report, not a fixed string
    assert report is not None and all(a["stop_confirmed"] for a in report["arms"].values())
    assert "interrupted by the operator" in (run / "summary.md").read_text()


@pytest.mark.slow
def test_stage_7_full_speed_forced_and_recorded(tmp_path) -> None:
    said = []
    code = run_hil(str(config_file("sim_openarm.yaml")), sim=True, yes=True, stage=7, force=True,
                   reason="CI: full-speed stage on the simulator", results=str(tmp_path),
                   say=said.append)
    assert code == 0, "\n".join(said)
    run = only_run(tmp_path)
    forced = [e for e in events(run) if e.get("event") == "forced"]
    assert forced and forced[0]["reason"] == "CI: full-speed stage on the simulator"
    names = {(c["name"], c["pass"]) for c in events(run) if "name" in c}
    assert names == {("synchronized_succeeded", True), ("start_skew", True),
                     ("both_moving_overlap", True), ("tracking_error", True)}
    state = json.loads((tmp_path / "state.json").read_text())
    assert list(state.values())[0]["forced_stages"] == [7]


@pytest.mark.slow
def test_ctrl_c_at_a_confirmation_prompt_after_a_stage_connected(tmp_path) -> None:
    """Stage 1 connects to the simulated robot; at stage 2's typed confirmation the operator
    presses Ctrl-C: the bring-up leaves at once (exit 130, recorded), stage 2 never runs
    (regression: once a stage had connected, Ctrl-C at a prompt was swallowed and the prompt
    waited on)."""
    import os

    asked = []

    def ctrl_c_at_the_prompt(prompt: str) -> str:
        asked.append(prompt)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5.0)          # an operator who types nothing; Ctrl-C must not wait for this
        return "no"
    said = []
    code = run_hil(str(config_file("sim_openarm.yaml")), sim=True, yes=False, is_tty=True,
                   through=2, ask=ctrl_c_at_the_prompt, results=str(tmp_path), say=said.append)
    assert code == 130, "\n".join(said)   # (swallowed, the prompt's "no" gave 3: not run)
    assert len(asked) == 1 and "stage 2" in asked[0]
    run = only_run(tmp_path)
    kinds = [e.get("event") for e in events(run)]
    assert "interrupted" in kinds
    assert not any(e.get("stage") == 2 and "name" in e for e in events(run)), "stage 2 ran"
    assert "--- stage 2" not in "\n".join(said)


J = "openarm_left_joint"


@pytest.mark.slow
@pytest.mark.parametrize("faults,named", [
    ({"left": {"zero_offset": {f"{J}2": 0.1}}}, f"left {J}2 zero offset about +0.100 rad"),
    ({"left": {"sign_flip": [f"{J}2"]}}, f"left {J}2 sign inverted"),
    ({"left": {"swap_joints": [f"{J}2", f"{J}4"]}}, f"left {J}2 and {J}4 swapped"),
    ({"left": {"scale": {f"{J}4": 1.5}}}, f"left {J}4 moves 1.5"),
    ({"crossed_arms": ["left", "right"]}, "arms crossed: left's joint states"),
], ids=["zero_offset", "sign_flip", "swap", "scale", "crossed_arms"])
def test_miswiring_fails_stage_1_by_name_before_anything_moves(tmp_path, faults, named) -> None:
    code, text = rehearse_fault(tmp_path, faults, "rehearsing a miswired arm", stage=1)
    assert code == 1, text
    assert "[FAIL] gravity_consistency left" in text and named in text, text
    assert "stage 1 FAILED" in text


@pytest.mark.slow
def test_a_joint_read_a_whole_turn_off_fails_stage_1_by_name(tmp_path) -> None:
    """A multi-turn position lost at a power cycle (the reading a whole turn off, IsaacTeleop#734):
    gravity cannot see it (the load repeats every turn); the limits do, by name and turn."""
    code, text = rehearse_fault(tmp_path, {"left": {"zero_offset": {f"{J}4": 2 * np.pi}}},
                                "rehearsing a lost multi-turn position", stage=1)
    assert code == 1, text
    assert "[FAIL] positions_in_limits left" in text, text
    assert f"{J}4 reads" in text and "1 whole turn above" in text, text
    assert "[pass] positions_in_limits right" in text, text
    assert "stage 1 FAILED" in text


@pytest.mark.slow
@pytest.mark.parametrize("silent,healthy", [("right", "left"), ("left", "right")])
def test_an_arm_whose_states_are_the_other_arms_is_named_before_it_moves_more_than_a_jog(
        tmp_path, silent, healthy) -> None:
    """One arm's joint states carry the other's readings (its own bus silent behind a healthy
    one, axol#197): named as such, not as crossed arms, at stage 1 or at the first jog; no
    motion beyond one jog."""
    code, text = rehearse_fault(tmp_path, {silent: {"joint_states_copied_from": healthy}},
                                "rehearsing a silent arm", through=2)
    assert code == 1, text
    assert f"{silent}'s joint states carry {healthy}'s readings" in text, text
    assert "arms crossed" not in text, text


@pytest.mark.slow
@pytest.mark.parametrize("faults,check,named", [
    ({"joint_state_gap_s": 0.2, "joint_state_gap_every_s": 2.0}, "joint_states_gap",
     "about 20 message(s) missing"),
    ({"joint_state_drop": 20, "joint_state_drop_every_s": 2.0}, "joint_states_gap",
     "about 20 message(s) missing"),
    ({"clock_step_s": -0.05, "clock_step_every_s": 2.0}, "clock_step",
     "clock stepped -50"),
], ids=["gap", "drop", "clock_step"])
def test_a_broken_joint_state_stream_fails_stage_1_by_name(tmp_path, faults, check, named) -> None:
    """The faults repeat every 2 s: the 4 s window holds one whatever the start-up took. The
    other arm's stream is healthy and passes."""
    code, text = rehearse_fault(tmp_path, {"right": faults}, "rehearsing a broken stream",
                                stage=1)
    assert code == 1, text
    assert f"[FAIL] {check} right" in text and named in text, text
    assert f"[pass] {check} left" in text, text
    assert "[FAIL] joint_states_gap right" not in text or check == "joint_states_gap", \
        "a clock step read as a hole"


@pytest.mark.slow
def test_a_sign_flip_physics_cannot_see_fails_the_jog_by_the_operators_eye(tmp_path) -> None:
    """Left joint 5 reversed: at stage 1 it stands at its zero (the picture matches, 0.09 N m
    of gravity residual); its jog turns it the other way: the emulated operator names it at the
    jogged pose, no joint moved more than the jog, and the joints jogged after it never moved."""
    code, text = rehearse_fault(tmp_path, {"left": {"sign_flip": [f"{J}5"]}},
                                "rehearsing a reversed wrist", stage=2)
    assert code == 1, text
    assert f"[FAIL] pose_matches_picture left/{J}5" in text, text
    assert f"differs from left {J}5 outward" in text, text
    motion = float(text.split("largest joint motion so far ")[1].split()[0])
    assert motion <= 0.1 + 1e-3, text      # the jog's amplitude, nothing more
    run = only_run(tmp_path / "r")
    pictures = sorted(p.name for p in (run / "pictures").iterdir())
    assert f"stage2_jog_left_{J}5.png" in pictures and f"stage2_jog_left_{J}5_robot.png" in pictures
    assert not any(f"{J}6" in p for p in pictures), "a joint after the failed one was jogged"


@pytest.mark.slow
def test_a_force_limit_below_the_load_fails_the_jog_by_name(tmp_path) -> None:
    """Left joint 1 limited to 3 N m where the start pose needs 6.6: invisible at rest (once
    sagged, effort and model agree); its jog does not follow, named, barely moving."""
    said = []
    cfg = faulted_config(tmp_path, {"left": {"force_limit": {f"{J}1": 3.0}}})
    code = run_hil(str(cfg), sim=True, yes=True, through=2, force=True,
                   reason="rehearsing a weak joint", results=str(tmp_path / "r"),
                   say=said.append)
    text = "\n".join(said)
    assert code == 1 and "stage 2 FAILED" in text, text
    assert "stage 1 FAILED" not in text, text
    assert f"[FAIL] jog_response left/{J}1" in text and "did not follow" in text, text
    assert "[FAIL] jog_observed" not in text, text   # it pushed: not a dead wire
    motion = float(text.split("largest joint motion so far ")[1].split()[0])
    assert motion <= 0.1, text
    # rehearsed: the failed stage says how the simulator kept time, in words and in the records
    assert "rehearsed: every figure above went through the simulator (target 2x real time)" \
        in text and "achieved real-time factor" in text, text
    records = [json.loads(line) for line in
               next((tmp_path / "r").glob("*/checks.jsonl")).read_text().splitlines()]
    health = [r for r in records if r.get("event") == "simulator_health"]
    assert len(health) == 1 and health[0]["stage"] == 2 and health[0]["cycles"] > 0, health


def test_stage_3_stops_at_real_time_whatever_pace_the_rehearsal_runs_at(tmp_path) -> None:
    """Stage 3's runner on the tiny pair with the simulator paced at 4x: when each of the 4
    stops (a cancel and a controlled stop per arm, at 50 %) is asked, the simulator is paced at real
    time, and no stop's run went faster than real time (from its bag: stamps against log
    times); after the stage the session's own pace is back. Before
    ``settings.sim_latency_real_time_factor`` every stop ran at 4x, and each wall-clock
    millisecond of the cancel's path was 4 ms of motion."""
    from bag_reader import read_bag
    from tiny_arm import tiny_mapping

    from mj_manipulator_ros.hil.runners.stop_latency import stop_latency
    from mj_manipulator_ros.hil.session import HilSession
    from mj_manipulator_ros.hil.stages import load_protocol
    from mj_manipulator_ros.model.limits import load_config_with_model

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_mapping(tmp_path)))
    protocol = load_protocol()
    session = HilSession(load_config_with_model(str(path)), sim=True, real_time_factor=4.0)
    shared, executor = session.sim_node.shared, session.executor
    paced_at = []   # the simulator's pace when each stop was asked
    for name in ("abort", "stop"):
        real = getattr(executor, name)

        def asked(*args, _real=real, **kwargs):
            paced_at.append(shared.clock.real_time_factor)
            return _real(*args, **kwargs)
        setattr(executor, name, asked)
    try:
        session.bags_dir, session.stage = tmp_path / "bags", 3
        assert session.wait_for_joint_states(timeout=10.0)
        stage = protocol.stage(3)
        stage = dataclasses.replace(stage, params={**stage.params, "fractions": [0.5]})
        results = stop_latency(session, stage, protocol)
        during, after = list(paced_at), shared.clock.real_time_factor
    finally:
        session.close()
    assert results and all(r.passed for r in results), [r for r in results if not r.passed]
    assert during == [1.0] * 4, f"the simulator's pace when each stop was asked: {during}"
    assert after == 4.0
    paces = [pace(read_bag(p)) for _, p in session.bags]
    stops = paces[0::2]   # each stop, then the move back
    assert len(paces) == 8 and max(stops) <= 1.15, f"a stop ran faster than real time: {paces}"


@pytest.mark.slow
def test_a_jog_whose_goal_never_ran_names_that_not_the_joint(tmp_path) -> None:
    """The left controller takes every goal 0.8 s after it came (1.6 start leads late): stage
    2's first jog is accepted after its start stamp and canceled, the arm never follows it. The
    stage fails saying so, never blaming the joint (regression: 'did not follow (a force limit,
    a brake)' and 'cannot carry its load', seen on the ALOHA's waist on a loaded machine)."""
    said = []
    cfg = faulted_config(tmp_path, {"left": {"accept_delay_s": 0.8}})
    code = run_hil(str(cfg), sim=True, yes=True, stage=2, force=True,
                   reason="rehearsing a slow controller", results=str(tmp_path / "r"),
                   say=said.append)
    text = "\n".join(said)
    assert code == 1 and "stage 2 FAILED" in text, text
    checks = "\n".join(line for line in said if line.lstrip().startswith("["))
    assert "the jog's goal never ran (late_acceptance)" in checks, text
    assert "force limit, a brake" not in checks and "cannot carry its load" not in checks, text


@pytest.mark.slow
@pytest.mark.parametrize("mode,named", [
    ("still", "the commands reach no motor"),
    ("echo", "they echo the commands, not the joint"),
])
def test_a_driver_whose_commands_reach_no_motor_is_named_at_the_first_jog(tmp_path, mode,
                                                                          named) -> None:
    """Goals accepted and reported succeeded while nothing moves (openarm_ros2#63; Doosan's
    "SUCCEEDED while the arm did not move"): stage 1 passes (the arm holds, its weight is the
    model's); the first jog names it, with its states honest (still: the joint stayed, no
    effort changed) or echoing the commands (echo: they moved one control cycle behind the
    command), and no physical joint moved."""
    said: list[str] = []
    cfg = faulted_config(tmp_path, {"left": {"dead_wire": mode}})
    code = run_hil(str(cfg), sim=True, yes=True, through=2, force=True,
                   reason="rehearsing a dead wire", results=str(tmp_path / "r"),
                   say=said.append)
    text = "\n".join(said)
    assert code == 1 and "stage 2 FAILED" in text and "stage 1 FAILED" not in text, text
    assert f"[FAIL] jog_observed left/{J}1" in text and named in text, text
    assert "force limit, a brake" not in text, text     # not blamed on the joint
    picture = [line for line in said if "pose_matches_picture left" in line]
    if mode == "still":
        assert "largest joint motion so far 0.0000 rad" in text, text
    else:   # the states moved, the robot did not: the eye says so too
        assert picture and "[FAIL]" in picture[0], text


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["left", "right"])
def test_a_reversed_joint_5_is_caught_by_gravity_at_the_pose_set(tmp_path, arm) -> None:
    """Joint 5 reversed carries 0.09-0.11 N m at the start pose and its jog: below the gravity
    check. Stage 2's pose set turns joint 7 (the smallest move that loads joint 5): the residual
    there names joint 5's sign, where the operator's picture cannot (joint 5 stands at its
    zero); nothing moved but joint 7, and by less than pose_set_max_rad."""
    from mj_manipulator_ros.hil.runners.gravity_poses import gravity_poses
    from mj_manipulator_ros.hil.runners.joint_jog import gravity_models
    from mj_manipulator_ros.hil.session import HilSession
    from mj_manipulator_ros.hil.stages import load_protocol
    from mj_manipulator_ros.model.limits import load_config_with_model

    joint = f"openarm_{arm}_joint5"
    cfg = faulted_config(tmp_path, {arm: {"sign_flip": [joint]}})
    session = HilSession(load_config_with_model(str(cfg)), sim=True)
    try:
        session.bags_dir, session.stage = tmp_path / "bags", 2
        session.pictures_dir = tmp_path / "pictures"
        assert session.wait_for_joint_states(timeout=10.0)
        shared = session.sim_node.shared
        b = shared.scene.arms[arm]
        start = shared.data.qpos[b.qpos_adr].copy()
        seen = []
        shared.add_observer(50.0, lambda snap: seen.append(
            shared.data.qpos[b.qpos_adr].copy()))
        results = gravity_poses(session, load_protocol().stage(2), gravity_models(session))
    finally:
        session.close()
    failed = [r for r in results if not r.passed]
    assert failed and failed[0].name == "pose_set_gravity", results
    assert f"explained by: {arm} {joint} sign inverted" in failed[0].detail, failed[0].detail
    assert f"{arm}/openarm_{arm}_joint7" in failed[0].subject, failed[0].subject
    eye = [r for r in results if r.name == "pose_matches_picture"]
    assert eye and all(r.passed for r in eye), eye     # the picture cannot see it there
    travel = np.max(np.abs(np.array(seen) - start), axis=0)
    names = list(b.joint_names)
    assert travel[names.index(f"openarm_{arm}_joint7")] <= 0.8 + 0.01, travel
    assert np.delete(travel, names.index(f"openarm_{arm}_joint7")).max() < 0.01, travel


@pytest.mark.slow
@pytest.mark.parametrize("arm,k", [("right", 1.267), ("left", 0.58)])
def test_a_gear_error_on_an_unloaded_wrist_joint_is_seen_at_the_gain_pose(tmp_path, arm, k) -> None:
    """Joint 5 geared k (the campaign's two misses: it passed stages 0-2): at its zero in the
    start pose, its jog shows the eye |k - 1| x 0.1 rad (under the picture's 0.05), gravity
    nothing. The gain pose turns it 0.3 rad from its zero: the picture names it there."""
    from mj_manipulator_ros.hil.runners.gravity_poses import gravity_poses
    from mj_manipulator_ros.hil.runners.joint_jog import gravity_models
    from mj_manipulator_ros.hil.session import HilSession
    from mj_manipulator_ros.hil.stages import load_protocol
    from mj_manipulator_ros.model.limits import load_config_with_model

    joint = f"openarm_{arm}_joint5"
    cfg = faulted_config(tmp_path, {arm: {"scale": {joint: k}}})
    session = HilSession(load_config_with_model(str(cfg)), sim=True)
    try:
        session.bags_dir, session.stage = tmp_path / "bags", 2
        session.pictures_dir = tmp_path / "pictures"
        assert session.wait_for_joint_states(timeout=10.0)
        results = gravity_poses(session, load_protocol().stage(2), gravity_models(session))
    finally:
        session.close()
    failed = [r for r in results if not r.passed]
    assert failed and all(r.subject == f"{arm}/gain pose" for r in failed), results
    assert any(f"{arm} {joint}" in r.detail for r in failed), failed


@pytest.mark.slow
def test_a_small_motion_whose_goal_never_ran_is_not_blamed_on_the_arm(tmp_path, monkeypatch) -> None:
    """The left controller takes every goal 0.8 s after it came (the rehearsal's pace, 2x): the
    small motion's first run
    is taken after its start stamp and canceled. clean_runs is not measured and says so, never
    a failed run of the arm (before: "clean_runs left 0", the arm blamed; a healthy campaign
    trial on a loaded machine failed clean_runs on an execution failure, its reason not kept).
    The jogs, the pose set and the load fit are skipped here
    (replaced by nothing: their own never-ran case has its own test)."""
    import importlib

    from mj_manipulator_ros.hil.session import HilSession
    from mj_manipulator_ros.hil.stages import load_protocol
    from mj_manipulator_ros.model.limits import load_config_with_model

    runner = importlib.import_module("mj_manipulator_ros.hil.runners.small_motion")
    monkeypatch.setattr(runner, "joint_jog", lambda session, stage: [])
    monkeypatch.setattr(runner, "gravity_poses", lambda session, stage, models: [])
    monkeypatch.setattr(runner, "measured_load", lambda session, stage, models: [])
    cfg = faulted_config(tmp_path, {"left": {"accept_delay_s": 0.8}})
    session = HilSession(load_config_with_model(str(cfg)), sim=True, real_time_factor=2.0)
    try:
        session.bags_dir, session.stage = tmp_path / "bags", 2
        assert session.wait_for_joint_states(timeout=10.0)
        stage = load_protocol().stage(2)
        stage = dataclasses.replace(stage, params={**stage.params, "runs": 1})
        results = runner.small_motion(session, stage, load_protocol())
    finally:
        session.close()
    left = [r for r in results if r.subject == "left"]
    assert [r.name for r in left] == ["clean_runs"], left
    assert left[0].status.value == "not_measured", left[0]
    assert "goal never ran (late_acceptance)" in left[0].detail, left[0].detail
    right = {r.name: r for r in results if r.subject == "right"}   # its one run (of 10) clean
    assert right["clean_runs"].measured == 1.0 and not right["clean_runs"].detail, right



@pytest.mark.slow
def test_a_joint_that_crept_since_the_stage_began_is_named_not_an_error(tmp_path) -> None:
    """A joint that creeps while the arm holds (a force limit under its load, a brake slipping;
    seen twice in the campaign: right joint 4 limited to 2.5 N m of its 4.1, under load) stands
    away from where stage 2 found it when its arm's jog comes: the jog, planned from there, is
    refused before any motion, and the check names the joint that crept (regression: 'hil:
    error: StartStateError', exit 1 with no check failed). The creep is set here, not waited
    for: stage 2's record of where it found right joint 4 is moved 0.03 rad (the simulated
    creep's pace depends on the machine's)."""
    from mj_manipulator_ros.hil.runners.joint_jog import _Jogger
    from mj_manipulator_ros.hil.session import HilSession
    from mj_manipulator_ros.hil.stages import load_protocol
    from mj_manipulator_ros.model.limits import load_config_with_model

    session = HilSession(load_config_with_model(str(config_file("sim_openarm.yaml"))), sim=True)
    try:
        session.bags_dir, session.stage = tmp_path / "bags", 2
        assert session.wait_for_joint_states(timeout=10.0)
        jog = _Jogger(session, load_protocol().stage(2))
        jog.home["right"] = jog.home["right"].copy()
        jog.home["right"][3] -= 0.03
        results = jog.joint("right", 0, 1.0)
        moved = np.abs(session.pose("right") - jog.home["right"])
    finally:
        session.close()
    assert [r.name for r in results] == ["jog_position_error"], results
    r = results[0]
    assert not r.passed and r.measured == pytest.approx(0.03, abs=0.002), r
    assert "right openarm_right_joint4 crept +0.03" in r.detail, r.detail
    assert "refused before any motion" in r.detail, r.detail
    assert moved[0] < 1e-3, moved     # joint 1 was not jogged
