"""A configured allowed pair (``scene.allowed_collisions``) is never silent: every report of an
execution through a gate that skips one lists it with its reason (CLI text and JSON, the
execution node's log text and result), and a pair that silences more than one part of the
robot (two different arms, or the whole world body) is refused unless its entry says so.

Regression: ``execute`` ran a plan that drove one arm into the other with the pair configured
and printed not one ``NOT CHECKED`` line (the executor dropped the gate's report)."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
import yaml

from mj_manipulator_ros.check.preflight import PreflightCheck
from mj_manipulator_ros.core.config import config_from_mapping
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.plan_io import save_plan
from mj_manipulator_ros.model.limits import with_model_limits
from test_process_safety import CLI
from tiny_arm import tiny_mapping

#: every pair between the two tiny arms: the swing below brings the left arm into the right
CROSS = [{"a": f"left_{x}", "b": f"right_{y}", "reason": f"bumper test {x}-{y}",
          "between_arms": True} for x in ("link1", "link2") for y in ("link1", "link2")]


def mapping(tmp_path, allowed, floor=False, **sim) -> dict:
    data = tiny_mapping(tmp_path, separation=0.6, execution={"preflight_check": True},
                        sim={"real_time_factor": 1.0, "use_sim_time": False, **sim})
    data["scene"]["floor"] = floor
    data["scene"]["allowed_collisions"] = allowed
    return data


def into_the_right_arm() -> MultiArmPlan:
    """The left arm swings 1.5 rad on j1 toward the standing right arm (0.6 m away) and back."""
    t = np.linspace(0.0, 2.0, 21)
    s = np.sin(np.pi * t / 2.0) ** 2
    return MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), t,
                                          np.outer(s, [1.5 if a == "left" else 0.0, 0.0]))
                         for a in ("left", "right")})


def gate(data) -> PreflightCheck:
    return PreflightCheck(with_model_limits(config_from_mapping(data)))


def test_a_pair_between_two_arms_needs_its_key(tmp_path) -> None:
    entry = {k: v for k, v in CROSS[3].items() if k != "between_arms"}
    with pytest.raises(ConfigError, match=r"allowed_collisions\[0\]: refused: 'left_link2' belongs "
                       r"to arm 'left' and 'right_link2' to arm 'right'.*between_arms: true"):
        gate(mapping(tmp_path, [entry]))
    with pytest.raises(ConfigError, match=r"between_arms: true, but the pair 'left_link1' x "
                       r"'left_link2' is not between arms"):
        gate(mapping(tmp_path, [{"a": "left_link1", "b": "left_link2", "reason": "x",
                                 "between_arms": True}]))
    with pytest.raises(ConfigError, match=r"between_arms: expected true or false, got 'yes'"):
        gate(mapping(tmp_path, [{**CROSS[0], "between_arms": "yes"}]))


def test_the_world_body_needs_its_key(tmp_path) -> None:
    """``world`` holds the floor (and, in composed scenes, every fixed obstacle): allowing it
    silences all of them at once."""
    entry = {"a": "world", "b": "left_link2", "reason": "the floor is soft"}
    with pytest.raises(ConfigError, match=r"refused: 'world' is fixed to the world and holds "
                       r"\['floor'\].*whole_fixed_body: true"):
        gate(mapping(tmp_path, [entry], floor=True))
    check = gate(mapping(tmp_path, [{**entry, "whole_fixed_body": True}], floor=True))
    assert check.not_checked == ("world x left_link2 (the floor is soft) [WHOLE FIXED BODY]",)


def test_the_gate_itself_refuses_the_swing(tmp_path) -> None:
    """The fixture is real: without the configured pairs the gate refuses the plan."""
    from mj_manipulator_ros.check.preflight import PlanRefused

    with pytest.raises(PlanRefused, match="left"):
        gate(mapping(tmp_path, []))(into_the_right_arm())


def run(processes, tmp_path, *extra) -> subprocess.CompletedProcess:
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(mapping(tmp_path, CROSS)))
    plan = tmp_path / "plan.yaml"
    save_plan(into_the_right_arm(), plan)
    sim = processes([*CLI, "sim", "--config", str(config)])
    processes.wait_for_line(sim, "simulating arms", timeout=60)
    return subprocess.run([*CLI, "execute", str(plan), "--config", str(config), *extra],
                          capture_output=True, text=True, timeout=120, env=processes.env)


def expected_lines() -> list[str]:
    return [f"NOT CHECKED (scene.allowed_collisions): {e['a']} x {e['b']} ({e['reason']}) "
            "[BETWEEN ARMS]" for e in CROSS]


def test_execute_lists_every_skipped_pair_in_its_json_report(processes, tmp_path) -> None:
    done = run(processes, tmp_path, "--json")
    report = json.loads(done.stdout)
    assert ["NOT CHECKED (scene.allowed_collisions): " + e for e in report["not_checked"]] == \
        expected_lines(), report
    assert report["preflight_checked"] is True and report["start_stamp"] is not None, report


def test_execute_lists_every_skipped_pair_in_its_text_report(processes, tmp_path) -> None:
    done = run(processes, tmp_path)
    for line in expected_lines():
        assert line in done.stdout, done.stdout + done.stderr


def test_the_execution_node_lists_them_in_its_log_text_and_its_result(ros, tmp_path) -> None:
    """Through the combined action: the report the node logs lists the pairs; a failed goal's
    result error_string lists them too (the left arm's goal aborted by an injected fault)."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory

    from action_helpers import result, send
    from mj_manipulator_ros.apps.demo import combined_trajectory
    from mj_manipulator_ros.ros.executor import MultiArmExecutor
    from mj_manipulator_ros.sim.sim_config import sim_config
    from mj_manipulator_ros.sim.sim_node import SimNode
    from test_start_state import combined_server

    data = mapping(tmp_path, CROSS, use_sim_time=True, faults={"left": {"abort_after_s": 0.5}})
    data["execution"]["use_sim_time"] = True
    cfg = sim_config(with_model_limits(config_from_mapping(data)))
    sim = SimNode(cfg, context=ros.context).start()
    try:
        executor = MultiArmExecutor(cfg.executor, context=ros.context,
                                    preflight=PreflightCheck(cfg.executor))
        with combined_server(ros, cfg.executor, executor, "pairs_combined") as (client, spin):
            handle = send(client, spin, FollowJointTrajectory.Goal(
                trajectory=combined_trajectory(into_the_right_arm())))
            assert handle is not None and handle.accepted
            outcome = result(spin, handle)
    finally:
        sim.close()
    assert outcome.status == GoalStatus.STATUS_ABORTED, outcome.result.error_string
    for line in expected_lines():
        assert line in outcome.result.error_string, outcome.result.error_string
    assert executor.not_checked and all(f"{e['a']} x {e['b']}" in " ".join(executor.not_checked)
                                        for e in CROSS)
