"""Robots that are not the OpenArm, through the path a new user takes: three arms (the tiny
arm, composed three times) with no plan given, and the ALOHA of gym-aloha from its MJCF; each
passes the rehearsal on the simulator through stage 6 without --force."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from mj_manipulator_ros.core.file_names import file_name
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.plan_io import load_plan, save_plan
from mj_manipulator_ros.hil.runner import run_hil
from mj_manipulator_ros.hil.shipped_plans import GENERATED
from tiny_arm import tiny_mapping

os.environ.setdefault("MUJOCO_GL", "egl")

#: the suite's time (make test under 10 minutes): every stage and threshold as hil/stages.yaml
#: has them, with fewer repetitions (stage 1 listens 2 s, not 4; stage 2: two small motions,
#: not ten; stage 3: a cancel at half the motion, not at three places) and the plan stages at
#: full speed (the made plan stays within half of every limit); the OpenArm rehearsal
#: (test_hil_sim.py) runs them all
FEWER_REPETITIONS = {
    "connected": {"params": {"listen_s": 2.0}},
    "small_motion": {"params": {"runs": 2}, "checks": {"clean_runs": 2}},
    "stop_latency": {"params": {"fractions": [0.5]}},
    "each_arm_alone": {"params": {"speed": 1.0}},
    "synchronized": {"params": {"speed": 1.0}},
    "fault_rehearsal": {"params": {"speed": 1.0}},
}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_three_arm_robot_is_brought_up_on_a_plan_made_for_it(tmp_path) -> None:
    """Stage 0 (the plan made for three arms, checked), then the stages that run plans with
    three arms: each arm alone with two held (4), all three synchronized (5), one failing and
    two stopping (6), each gated on the one before. Stages 1-3 check each arm by itself, as for
    two (the ALOHA test below, the OpenArm rehearsal): for the suite's time they are passed by
    --force here, recorded as forced. Measured once on this 2-core machine, idle, stages 0-6
    in order without --force: passed in 95 s."""
    m = tiny_mapping(tmp_path, arms=("a", "b", "c"), separation=0.5)
    m["hil"] = {"stages": FEWER_REPETITIONS}
    path = tmp_path / "three.yaml"
    path.write_text(yaml.safe_dump(m))
    said: list[str] = []
    results = str(tmp_path / "r")
    assert run_hil(str(path), sim=True, stage=0, yes=True, results=results,
                   say=said.append) == 0, "\n".join(said)
    for stage in (4, 5, 6):
        code = run_hil(str(path), sim=True, stage=stage, yes=True, results=results,
                       force=stage == 4, reason="stages 1-3: per-arm checks, run for two arms "
                       "by the ALOHA and OpenArm rehearsals", say=said.append)
        assert code == 0, "\n".join(said)
    rows = [json.loads(line) for run in (tmp_path / "r").iterdir() if run.is_dir()
            for line in (run / "checks.jsonl").read_text().splitlines()]
    synchronized = [r for r in rows if r.get("stage") == 5 and "name" in r]
    assert synchronized and all(r["pass"] for r in synchronized), synchronized
    assert any(GENERATED in str(r.get("subject", "")) for r in synchronized), synchronized
    assert any(r["name"] == "start_skew" for r in synchronized), synchronized


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_aloha_of_gym_aloha_from_its_mjcf_to_a_passed_rehearsal(tmp_path, processes) -> None:
    """A robot we did not model (gym-aloha's ViperX pair, from PyPI; joint names with "/"),
    through the new path only: init-config with the drivers' unprefixed names on per-arm
    topics, make-plan, check-plan refusing a plan into the table, sim + execute, and the
    rehearsal through stage 6 without --force, on hil/stages.yaml's thresholds (its
    controlled stop settles 0.28 s after the ramp: judged against its own model's prediction,
    not the OpenArm's 0.25 s; before, the test set 0.35 s by hand); fewer repetitions
    (FEWER_REPETITIONS)."""
    from test_init_config import aloha
    cli = [sys.executable, "-m", "mj_manipulator_ros.cli"]
    config = tmp_path / "aloha.yaml"

    def run(*args, code=0):
        done = subprocess.run([*cli, *args], capture_output=True, text=True, timeout=300)
        assert done.returncode == code, (args, done.stdout, done.stderr)
        return done.stdout + done.stderr

    run("init-config", str(aloha()), "--out", str(config), "--driver-names")
    data = yaml.safe_load(config.read_text())
    assert data["arms"][0]["driver_joint_names"][0] == "waist"
    # its fingers: read from the arm's joint states under the driver's names, checked there
    assert data["arms"][0]["gripper_joints"] == ["vx300s_left/left_finger",
                                                 "vx300s_left/right_finger"]
    assert data["arms"][0]["gripper_driver_joint_names"] == ["left_finger", "right_finger"]
    data["hil"] = {"stages": FEWER_REPETITIONS}
    config.write_text(yaml.safe_dump(data))
    wave = tmp_path / "wave.yaml"
    run("make-plan", "--config", str(config), "--out", str(wave))
    into_table = tmp_path / "into_table.yaml"
    save_plan(_into_the_table(load_plan(wave)), into_table)
    out = run("check-plan", str(into_table), "--config", str(config), code=1)
    assert "vx300s_left/left_finger_link x environment/table" in out, out

    sim = processes([*cli, "sim", "--config", str(config)])
    processes.wait_for_line(sim, "simulating arms", timeout=120)
    report = json.loads(run("execute", str(wave), "--config", str(config), "--json"))
    assert report["status"] == "succeeded", report
    sim.terminate()   # the rehearsal runs its own simulator, serving the same actions
    sim.wait(30)

    said: list[str] = []
    code = run_hil(str(config), sim=True, through=6, yes=True, results=str(tmp_path / "r"),
                   say=said.append)
    assert code == 0, "\n".join(said)
    # each jog's picture, under its joint's name escaped (regression: "/" named a missing
    # folder, the eye check was not measured and stage 2 failed)
    (run_dir,) = [d for d in (tmp_path / "r").iterdir() if d.is_dir()]
    pictures = {p.name for p in (run_dir / "pictures").iterdir()}
    for arm in ("left", "right"):
        name = f"stage2_jog_{arm}_{file_name(f'vx300s_{arm}/waist')}.png"
        assert name in pictures, sorted(pictures)


def _into_the_table(wave: MultiArmPlan) -> MultiArmPlan:
    """From the wave's start, the left arm's shoulder down by 1.6 rad and elbow up by 0.9 rad
    and back over 6 s (its fingers go about 33 mm into the table); the right arm holds."""
    t = np.linspace(0.0, 6.0, 601)
    s = np.sin(np.pi * t / 6.0) ** 2
    arms = {}
    for a in wave.arm_names:
        q0 = wave[a].positions[0]
        d = np.zeros_like(q0)
        if a == "left":
            d[1], d[2] = 1.6, -0.9
        arms[a] = ArmTrajectory(wave[a].joint_names, t, q0 + np.outer(s, d))
    return MultiArmPlan(arms)
