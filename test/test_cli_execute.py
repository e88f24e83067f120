"""`mj-manipulator-ros execute` against controllers running as separate processes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from factories import PROCESS_LEAD_S, make_plan
from mj_manipulator_ros.core.plan_io import save_plan

CLI = [sys.executable, "-m", "mj_manipulator_ros.cli"]
ARM_KEYS = {"status", "error_code", "error_string", "goal_sent_at", "accepted_at", "taken_at",
            "result_at",
            "cancel_requested_at", "cancel_acknowledged_at", "stop_confirmed",
            "max_tracking_error", "max_progress_skew", "max_velocity", "stop", "stop_travel",
            "stop_time_s", "stop_observed_s", "stop_not_measured"}


def write_inputs(tmp_path: Path, duration: float, arms=("left", "right")) -> tuple[Path, Path]:
    config = {"arms": [{"name": a, "joint_names": [f"{a}_j{k}" for k in range(3)],
                        "action": f"/cli_{a}/follow_joint_trajectory",
                        "joint_limits": {f"{a}_j{k}": {"lower": -2, "upper": 2, "velocity": 5}
                                         for k in range(3)}} for a in arms],
              # scripted controllers publish no joint states: no start-state or clock check;
              # no scene to replay in: the pre-flight check turned off, explicitly
              "execution": {"server_wait_s": 15.0, "start_lead_s": PROCESS_LEAD_S,
                            "start_tolerance_rad": 0.0,
                            "max_clock_offset_s": 0.0, "preflight_check": False}}
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(config))
    plan = tmp_path / "plan.yaml"
    save_plan(make_plan(arms, duration=duration), plan)
    return plan, cfg


def controllers(processes, behaviors: dict):
    return {a: processes([sys.executable, "-m", "mj_manipulator_ros.ros.scripted_controller",
                          "--action", f"/cli_{a}/follow_joint_trajectory", "--behavior", b])
            for a, b in behaviors.items()}


def test_execute_prints_json_report_and_exits_0(tmp_path, processes) -> None:
    plan, cfg = write_inputs(tmp_path, duration=0.5)
    controllers(processes, {"left": "succeed", "right": "succeed"})
    out = subprocess.run([*CLI, "execute", str(plan), "--config", str(cfg), "--json",
                          "--speed", "0.5"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert set(report) == {"status", "start_stamp", "first_failure", "arms", "preflight_checked",
                           "record_path", "record_error", "stops", "not_checked",
                           "start_lead_s", "phase_times", "speed_changes_dropped", "requests",
                           "stop_limits", "black_box_path"}
    assert report["status"] == "succeeded" and report["first_failure"] is None
    for arm in ("left", "right"):
        assert set(report["arms"][arm]) == ARM_KEYS
        r = report["arms"][arm]
        assert r["result_at"] - report["start_stamp"] >= 1.0 - 0.05  # 0.5 s plan at 50 % speed


def test_failure_exits_1(tmp_path, processes) -> None:
    plan, cfg = write_inputs(tmp_path, duration=2.0)
    controllers(processes, {"left": "succeed", "right": "reject"})
    out = subprocess.run([*CLI, "execute", str(plan), "--config", str(cfg), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert report["first_failure"]["arm"] == "right"
    assert report["first_failure"]["reason"] == "goal_rejected"


def test_every_controller_rejecting_exits_2_nothing_moved(tmp_path, processes) -> None:
    """No controller accepted a goal: refused before anything moved (exit 2), told apart from a
    run that failed while an arm moved (exit 1, above)."""
    plan, cfg = write_inputs(tmp_path, duration=2.0)
    controllers(processes, {"left": "reject", "right": "reject"})
    out = subprocess.run([*CLI, "execute", str(plan), "--config", str(cfg), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert {r["status"] for r in report["arms"].values()} <= {"rejected", "not_sent"}, report


def test_bad_plan_exits_2_before_connecting(tmp_path) -> None:
    plan, cfg = write_inputs(tmp_path, duration=0.5)
    data = yaml.safe_load(plan.read_text())
    data["arms"]["left"]["points"][2]["positions"][1] = 7.0
    plan.write_text(yaml.safe_dump(data))
    out = subprocess.run([*CLI, "execute", str(plan), "--config", str(cfg)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "arm 'left', waypoint 2, joint 'left_j1': position 7 is outside the limits [-2, 2]" \
        in out.stderr


def test_ctrl_c_stops_every_arm_along_the_plan(tmp_path, processes) -> None:
    """The first Ctrl-C is a controlled stop: every arm gets a stop goal on one shared stamp
    and ends at rest on the plan; the report says stopped, the CLI exits 130."""
    plan, cfg = write_inputs(tmp_path, duration=4.0)
    ctl = controllers(processes, {"left": "succeed", "right": "succeed"})
    cli = processes([*CLI, "execute", str(plan), "--config", str(cfg), "--json"])
    for proc in ctl.values():  # both goals are out and running: now press Ctrl-C
        processes.wait_for_line(proc, "goal received", timeout=60)
    cli.send_signal(signal.SIGINT)
    code = cli.wait(timeout=30)
    text = cli.stdout.read()
    assert code == 130, json.loads(text).get("first_failure") if text.strip() else text
    report = json.loads(text)
    assert report["status"] == "stopped" and report["first_failure"] is None, report
    assert [s["reason"] for s in report["stops"]] == ["interrupted (Ctrl-C)"]
    for arm in ("left", "right"):
        assert report["arms"][arm]["status"] == "stopped", report
        assert report["arms"][arm]["stop"] == "controlled"
        assert report["arms"][arm]["stop_confirmed"] is True


def test_a_second_ctrl_c_cancels_every_arm(tmp_path, processes) -> None:
    """Controllers that never finish the stop goal: a second Ctrl-C does not wait for it, it
    cancels every arm (hold), confirmed; exit 130."""
    plan, cfg = write_inputs(tmp_path, duration=4.0)
    ctl = controllers(processes, {"left": "never_finish", "right": "never_finish"})
    cli = processes([*CLI, "execute", str(plan), "--config", str(cfg), "--json"])
    for proc in ctl.values():
        processes.wait_for_line(proc, "goal received", timeout=60)
    cli.send_signal(signal.SIGINT)
    for proc in ctl.values():  # the stop goals arrive
        processes.wait_for_line(proc, "goal received", timeout=30)
    cli.send_signal(signal.SIGINT)
    code = cli.wait(timeout=30)
    text = cli.stdout.read()
    assert code == 130, json.loads(text).get("first_failure") if text.strip() else text
    report = json.loads(text)
    assert report["status"] == "canceled"
    assert report["first_failure"]["error_string"] == "interrupted (Ctrl-C)"
    for arm in ("left", "right"):
        assert report["arms"][arm]["status"] == "canceled", report
        assert report["arms"][arm]["stop"] == "cancel"
        assert report["arms"][arm]["stop_confirmed"] is True


def test_ctrl_c_burst_never_escapes(tmp_path, processes) -> None:
    """Forty Ctrl-Cs 2 ms apart, from just after the goals go out: every one lands somewhere in
    the executor (inside the handler of the previous one, between opening the gate and waiting,
    ...). None may escape: the CLI reports every arm canceled and confirmed and exits 130
    (regression: a second Ctrl-C inside the handler escaped, the CLI said no goal was sent and
    closed the executor under running goals)."""
    import time

    plan, cfg = write_inputs(tmp_path, duration=4.0)
    ctl = controllers(processes, {"left": "never_finish", "right": "never_finish"})
    cli = processes([*CLI, "execute", str(plan), "--config", str(cfg), "--json"])
    for proc in ctl.values():
        processes.wait_for_line(proc, "goal received", timeout=60)
    for _ in range(40):
        if cli.poll() is not None:
            break
        cli.send_signal(signal.SIGINT)
        time.sleep(0.002)
    code = cli.wait(timeout=30)
    out = cli.stdout.read()
    err = "".join(cli.stderr_seen) + "".join(iter(lambda: cli.lines.get(timeout=5) or "", ""))
    assert code == 130, (json.loads(out).get("first_failure") if out.strip() else out, err[-3000:])
    assert "interrupted outside the motion" not in err
    report = json.loads(out)
    assert report["status"] == "canceled", report
    for arm in ("left", "right"):
        assert report["arms"][arm]["status"] == "canceled", report
        assert report["arms"][arm]["stop_confirmed"] is True


def test_without_a_scene_the_default_preflight_is_a_clear_refusal(tmp_path) -> None:
    """The pre-flight check is on by default: a configuration with no scene to replay in is bad
    input (exit 2, nothing moves), saying how to turn the check off explicitly."""
    plan, cfg = write_inputs(tmp_path, duration=0.5)
    data = yaml.safe_load(cfg.read_text())
    del data["execution"]["preflight_check"]
    cfg.write_text(yaml.safe_dump(data))
    out = subprocess.run([*CLI, "execute", str(plan), "--config", str(cfg)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "preflight_check is on (the default)" in out.stderr and "scene" in out.stderr


def test_a_report_says_when_the_preflight_check_was_off(tmp_path, processes) -> None:
    plan, cfg = write_inputs(tmp_path, duration=0.5)
    controllers(processes, {"left": "succeed", "right": "succeed"})
    out = subprocess.run([*CLI, "execute", str(plan), "--config", str(cfg)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pre-flight collision check OFF" in out.stdout


def test_ros_args_after_the_subcommands_options(tmp_path, processes) -> None:
    """``execution-node --config F --ros-args ...`` and ``sim --config F --ros-args ...``, as ROS
    users type them (regression: 'unrecognized arguments: --ros-args'). The remap proves the
    ROS arguments reached the node."""
    from tiny_arm import tiny_mapping

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(tiny_mapping(tmp_path, sim={"real_time_factor": 1.0})))
    node = processes([*CLI, "execution-node", "--config", str(cfg), "--ros-args",
                      "-p", "start_lead_s:=0.3", "-r", "__node:=renamed_execution"])
    processes.wait_for_line(node, "/renamed_execution/follow_joint_trajectory", timeout=60)
    sim = processes([*CLI, "sim", "--config", str(cfg), "--ros-args", "-r",
                     "__node:=renamed_sim"])
    line = processes.wait_for_line(sim, "simulating arms", timeout=60)
    assert "renamed_sim" in line, line
    out = subprocess.run([*CLI, "selfcheck", "--ros-args", "-r", "x:=y"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "selfcheck takes no --ros-args" in out.stderr


def test_ctrl_z_pauses_along_the_plan_and_ctrl_z_again_resumes(tmp_path, processes) -> None:
    """SIGTSTP (Ctrl-Z in a terminal) pauses instead of suspending the process; a second one
    resumes; the run then succeeds, its report naming the pause."""
    plan, cfg = write_inputs(tmp_path, duration=3.0)
    ctl = controllers(processes, {"left": "succeed", "right": "succeed"})
    cli = processes([*CLI, "execute", str(plan), "--config", str(cfg), "--json"])
    for proc in ctl.values():
        processes.wait_for_line(proc, "goal received", timeout=60)
    cli.send_signal(signal.SIGTSTP)
    processes.wait_for_line(cli, "paused along the plan", timeout=30)
    for proc in ctl.values():  # the pause goals
        processes.wait_for_line(proc, "goal received", timeout=30)
    cli.send_signal(signal.SIGTSTP)
    processes.wait_for_line(cli, "resumed", timeout=30)
    code = cli.wait(timeout=30)
    report = json.loads(cli.stdout.read())
    assert code == 0 and report["status"] == "succeeded", report
    assert [s["kind"] for s in report["stops"]] == ["pause"]
