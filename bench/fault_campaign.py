"""A randomized campaign of the bring-up: N seeded trials, each one ``hil --sim --yes --through 2``
on the simulated OpenArm pair with one fault drawn at random (its kind, arm, joint and size
within realistic ranges) or none (a healthy arm in a start pose varied around "ready").

Per trial: whether the bring-up stopped (detected), whether its failures name the fault (the
joint, or the arm and the kind, as ``expect`` says), at which stage, the largest physical joint
motion before the stop (``rehearse_faults.PhysicalMotion``: the simulator's physical joints,
what an eye on the robot sees) against one jog, and the wall time. Healthy trials must pass.

What runs less than the protocol as shipped (time): stage 2's small motion runs 2 times (not
10). Every check and threshold is the shipped one; stage 1 listens its shipped 4 s (at 2 s, as
the suite's rehearsal, a stream fault repeating every 2 s fell outside the window: a campaign
trial passed stage 1 with a joint-state drop). ``--start-lead`` sets ``execution.start_lead_s`` (the remedy the
bring-up names for goals taken after their start on a loaded machine: two campaigns side by
side on 2 cores made healthy jogs late at the shipped 0.25 s).

A trial the bring-up stopped only because a goal never ran (its checks NOT MEASURED, "the jog's
goal never ran": the machine, not the arm) is counted apart as not judged, never as a detection
or a false one.

Every trial powers on as a robot does (unless ``--active-at-start``): each arm's controller
starts inactive (``sim.arms.<arm>.start_active: false``) and the bring-up's stage 1 activates it
through the services the configuration names (``arms[].activate_service``), watching it hold;
the ``activation_jump`` kind makes the controller's first command zero for every joint (a
command buffer that starts at zero, openarm_ros2#66) or a stale value for one.

Usage:
    python bench/fault_campaign.py --faulted 200 --healthy 50 --seed 1 --out campaign.json
Prints one line per trial and, at the end, the summary; the whole record as JSON with --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from rehearse_faults import rehearse  # noqa: E402
from mj_manipulator_ros.resources import config_file  # noqa: E402

#: fewer small-motion runs (every check and threshold as shipped)
REPETITIONS = {"small_motion": {"params": {"runs": 2}, "checks": {"clean_runs": 2}}}
#: one jog (hil/stages.yaml, stage 2's jog_rad), rad; a trial's motion bound is one jog of the
#: faulted joint as it executes it (a joint geared k: k jogs), plus 10 mrad of settling
JOG = 0.1


class Trial:
    """One drawn fault: ``faults`` (the sim.faults section), what its failure must name
    (``expect``: any of these texts), the words that name its kind, and the motion bound."""

    def __init__(self, kind: str, arm: Optional[str], joint: str, size: float, faults: dict,
                 expect: tuple[str, ...], kind_words: tuple[str, ...], bound: float = JOG):
        self.kind, self.arm, self.joint, self.size = kind, arm, joint, size
        self.faults, self.expect, self.kind_words, self.bound = faults, expect, kind_words, bound


def _loaded(arm: str) -> dict[str, float]:
    """Each joint's gravity load at the start pose (N m): where a force limit bites."""
    from mj_manipulator_ros.hil.gravity_check import GravityModel
    from mj_manipulator_ros.model.limits import load_config_with_model
    from mj_manipulator_ros.model.scene import scene_for

    cfg = load_config_with_model(str(config_file("sim_openarm.yaml")))
    scene = scene_for(cfg)
    g = GravityModel(scene, arm)
    return dict(zip(g.joint_names, g.expected(scene.initial_qpos[g.qpos_adr])))


#: the kinds drawn, with equal chances
KINDS = ("zero_offset", "multi_turn", "sign_flip", "swap", "scale", "force_limit",
         "joint_state_gap", "joint_state_drop", "clock_step", "silent_arm", "dead_wire",
         "crossed_arms", "model_mismatch", "activation_jump")


def draw(rng: np.random.Generator, joints: dict[str, list[str]], loads: dict,
         kinds: tuple[str, ...] = KINDS) -> Trial:
    """One fault at random (module docstring): kind (of ``kinds``), arm, joint and size."""
    kind = str(rng.choice(kinds))
    arm = str(rng.choice(sorted(joints)))
    other = next(a for a in joints if a != arm)
    names = joints[arm]
    j = str(rng.choice(names))
    sign = float(rng.choice([-1.0, 1.0]))
    if kind == "zero_offset":
        o = sign * float(rng.uniform(0.05, 0.4))
        return Trial(kind, arm, j, o, {arm: {"zero_offset": {j: o}}}, (j,),
                     ("zero offset", "differs from"))
    if kind == "multi_turn":   # a multi-turn count lost at a power cycle
        o = sign * 2 * math.pi
        return Trial(kind, arm, j, o, {arm: {"zero_offset": {j: o}}}, (j,), ("whole turn",))
    if kind == "sign_flip":
        return Trial(kind, arm, j, -1.0, {arm: {"sign_flip": [j]}}, (j,),
                     ("sign inverted", "differs from", "other way"))
    if kind == "swap":
        pair = [str(x) for x in rng.choice(names, 2, replace=False)]
        return Trial(kind, arm, "+".join(pair), 0.0, {arm: {"swap_joints": pair}},
                     tuple(pair), ("swapped", "differs from", "moved"))
    if kind == "scale":
        k = float(rng.uniform(0.5, 0.8) if rng.random() < 0.5 else rng.uniform(1.25, 2.0))
        return Trial(kind, arm, j, k, {arm: {"scale": {j: k}}}, (j,),
                     ("x its command", "differs from"), bound=JOG * max(1.0, k))
    if kind == "force_limit":   # a joint that carries load at the start, limited below it
        jl = str(rng.choice([n for n in names if abs(loads[arm][n]) > 1.0]))
        limit = round(float(rng.uniform(0.3, 0.7) * abs(loads[arm][jl])), 3)
        return Trial(kind, arm, jl, limit, {arm: {"force_limit": {jl: limit}}}, (jl,),
                     ("did not follow", "cannot carry", "rests", "sagged"))
    if kind == "joint_state_gap":
        g = round(float(rng.uniform(0.1, 0.3)), 3)
        return Trial(kind, arm, "", g, {arm: {"joint_state_gap_s": g,
                                              "joint_state_gap_every_s": 2.0}},
                     (f"joint_states_gap {arm}",), ("message(s) missing",))
    if kind == "joint_state_drop":
        n = int(rng.integers(10, 31))
        return Trial(kind, arm, "", n, {arm: {"joint_state_drop": n,
                                              "joint_state_drop_every_s": 2.0}},
                     (f"joint_states_gap {arm}",), ("message(s) missing",))
    if kind == "clock_step":
        c = round(sign * float(rng.uniform(0.02, 0.1)), 3)
        return Trial(kind, arm, "", c, {arm: {"clock_step_s": c, "clock_step_every_s": 2.0}},
                     (f"clock_step {arm}",), ("clock stepped",))
    if kind == "silent_arm":   # its own bus silent behind the other's (axol#197)
        return Trial(kind, arm, "", 0.0, {arm: {"joint_states_copied_from": other}},
                     (f"{arm}'s joint states carry {other}'s readings",), ("carry",))
    if kind == "dead_wire":
        mode = str(rng.choice(["still", "echo"]))
        return Trial(kind, arm, mode, 0.0, {arm: {"dead_wire": mode}},
                     (f"jog_observed {arm}/",),
                     ("reach no motor",) if mode == "still" else ("echo the commands",))
    if kind == "activation_jump":   # the first command after activation is not the pose
        if rng.random() < 0.5:        # a command buffer that starts at zero, every joint
            return Trial(kind, arm, "zero", 0.0, {arm: {"activation_command": {
                n: 0.0 for n in names}}}, (f"activation_hold {arm}",), ("activation jump",))
        ready = yaml.safe_load(config_file("sim_openarm.yaml").read_text())["scene"][
            "initial_positions"]
        stale = round(float(ready.get(j, 0.0) + sign * rng.uniform(0.05, 0.4)), 3)
        return Trial(kind, arm, j, stale, {arm: {"activation_command": {j: stale}}},
                     (f"activation_hold {arm}",), ("activation jump",))
    if kind == "crossed_arms":
        return Trial(kind, None, "", 0.0, {"crossed_arms": ["left", "right"]},
                     ("arms crossed",), ("arms crossed",))
    k = round(float(rng.uniform(1.15, 1.3)), 3)     # model_mismatch: links 2-4 and a payload
    m = round(float(rng.uniform(0.3, 0.8)), 3)
    return Trial(kind, arm, "", m, {arm: {"link_mass_scale": {n: k for n in names[1:4]},
                                          "payload_kg": m}},
                 (f"gravity_consistency {arm}",), ("kg heavier",))


def healthy_start(rng: np.random.Generator) -> dict:
    """A start pose varied around "ready": every arm joint by up to 0.1 rad, inside limits."""
    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    ready = dict(data["scene"]["initial_positions"])
    names = [n for a in data["arms"] for n in a["joint_names"]]
    return {n: float(ready.get(n, 0.0) + rng.uniform(-0.1, 0.1)) for n in names}


def _not_judged(r: dict) -> bool:
    """The bring-up stopped only on goals that never ran (module docstring)."""
    return bool(r["failures"]) and all("[NOT MEASURED]" in f and "never ran" in f
                                       for f in r["failures"])


def powered_on(data: dict) -> dict:
    """The config's sections for a power-on (module docstring): every arm's controller
    inactive at start, activated by the bring-up through its simulated services."""
    from mj_manipulator_ros.sim.arm_server import controller_node_name

    arms = [dict(a, activate_service=f"/{controller_node_name(SIM_NODE, a['name'])}/activate",
                 deactivate_service=f"/{controller_node_name(SIM_NODE, a['name'])}/deactivate")
            for a in data["arms"]]
    sim_arms = {a["name"]: {**data["sim"].get("arms", {}).get(a["name"], {}),
                            "start_active": False} for a in data["arms"]}
    return {"arms": arms, "sim": {"arms": sim_arms}}


#: the simulator's node name in a rehearsal (SimNode's default)
SIM_NODE = "mj_manipulator_sim"


def run_trial(sections: dict, execution: dict, power_on: Optional[dict] = None) -> dict:
    if power_on:
        sections = {**sections, "arms": power_on["arms"],
                    "sim": {**sections.get("sim", {}), **power_on["sim"]}}
    sections = {**sections, "hil": {"stages": REPETITIONS}, "execution": execution}
    with tempfile.TemporaryDirectory() as tmp:
        return rehearse("sim_openarm.yaml", sections, Path(tmp))


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faulted", type=int, default=200)
    ap.add_argument("--healthy", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="")
    ap.add_argument("--start-lead", type=float, default=None,
                    help="execution.start_lead_s for every trial (default: the config's)")
    ap.add_argument("--active-at-start", action="store_true",
                    help="the arms' controllers active before the bring-up (no activation "
                         "watch; the activation_jump kind is not drawn)")
    args = ap.parse_args(argv)
    os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    rng = np.random.default_rng(args.seed)
    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    joints = {a["name"]: list(a["joint_names"]) for a in data["arms"]}
    loads = {a: _loaded(a) for a in joints}
    execution = dict(data["execution"])
    if args.start_lead is not None:
        execution["start_lead_s"] = args.start_lead
    power_on = None if args.active_at_start else powered_on(data)
    kinds = tuple(k for k in KINDS if power_on or k != "activation_jump")
    order = ["faulted"] * args.faulted + ["healthy"] * args.healthy
    rng.shuffle(order)
    trials = []
    for n, what in enumerate(order, 1):
        if what == "healthy":
            start = healthy_start(rng)
            r = run_trial({"scene": {**data["scene"], "initial_positions": start}}, execution,
                          power_on)
            r.update(kind="healthy", arm=None, joint="", size=0.0, not_judged=_not_judged(r),
                     false_detection=r["exit"] != 0 and not _not_judged(r))
        else:
            t = draw(rng, joints, loads, kinds)
            r = run_trial({"sim": {**data["sim"], "faults": t.faults}}, execution, power_on)
            text = "\n".join(r["failures"])
            r.update(kind=t.kind, arm=t.arm, joint=t.joint, size=t.size, faults=t.faults,
                     not_judged=_not_judged(r),
                     detected=r["exit"] == 1 and not _not_judged(r),
                     named=any(e in text for e in t.expect),
                     kind_named=any(w in text for w in t.kind_words),
                     motion_bound_rad=t.bound + 0.01,
                     within_one_jog=r["largest_physical_motion_rad"] <= t.bound + 0.01)
        trials.append(r)
        if args.out:   # kept as it goes: a campaign stopped early keeps its trials
            Path(args.out).with_suffix(".partial.json").write_text(
                json.dumps(trials, indent=1, default=str))
        print(f"{n:3d} {r['kind']:16s} {r['arm'] or '-':5s} {r['joint'][-14:]:14s} "
              f"exit {r['exit']} stage {r['stopped_at_stage']} "
              f"named {r.get('named', '-')} kind {r.get('kind_named', '-')} "
              f"motion {r['largest_physical_motion_rad']:.3f} "
              f"{'ok' if r.get('within_one_jog', True) else 'OVER'} {r['wall_s']:.0f} s "
              f"{(r['failures'][:1] or [''])[0][:110]}", flush=True)
    judged = [t for t in trials if not t["not_judged"]]
    faulted = [t for t in judged if t["kind"] != "healthy"]
    healthy = [t for t in judged if t["kind"] == "healthy"]
    summary = {
        "seed": args.seed, "faulted": len(faulted), "healthy": len(healthy),
        "not_judged": [(t["kind"], t["arm"], t["joint"]) for t in trials if t["not_judged"]],
        "start_lead_s": execution.get("start_lead_s"),
        "detected": sum(t["detected"] for t in faulted),
        "named": sum(t["named"] for t in faulted),
        "kind_named": sum(t["kind_named"] for t in faulted),
        "within_one_jog": sum(t["within_one_jog"] for t in faulted),
        "false_detections": sum(t["false_detection"] for t in healthy),
        "wall_s_per_trial": {"faulted_median": float(np.median([t["wall_s"] for t in faulted]))
                             if faulted else None,
                             "healthy_median": float(np.median([t["wall_s"] for t in healthy]))
                             if healthy else None},
        "by_kind": {k: {"trials": sum(t["kind"] == k for t in faulted),
                        "named": sum(t["named"] for t in faulted if t["kind"] == k)}
                    for k in sorted({t["kind"] for t in faulted})},
        "conditions": "hil --sim --yes --through 2 per trial, this machine (2 cores), stage "
                      "2's small motion 2 runs, " + ("controllers active at start" if
                      args.active_at_start else "controllers activated by stage 1"),
        "kind_unnamed": [(t["kind"], t["arm"], t["joint"], (t["failures"] or [""])[0][:160])
                         for t in faulted if not t["kind_named"]],
        "over_one_jog": [(t["kind"], t["arm"], t["joint"], t["size"],
                          t["largest_physical_motion_rad"]) for t in faulted
                         if not t["within_one_jog"]],
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "trials": trials}, indent=1,
                                             default=str))
    bad = [t for t in faulted if not (t["detected"] and t["named"] and t["within_one_jog"])]
    return 1 if bad or summary["false_detections"] else 0


if __name__ == "__main__":
    sys.exit(main())
