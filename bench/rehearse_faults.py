"""The bring-up's fault matrix: ``hil --sim`` once per fault per arm (stages 0-2: offline,
connected with no motion, the per-joint jog and the small motion), and healthy rehearsals.

For each run: the stage that stopped the bring-up, the checks that failed there with their
details (the diagnosis), whether the fault was named (``expect``: text the failure must hold),
and the largest joint motion of any arm before the stop, read on the simulator's **physical**
joints (an observer on the physics thread: what an eye on the robot would see, not what the
miswired states report). Healthy runs must pass every stage.

The stream faults repeat every 2 s (their ``*_at_s`` is physics time since the simulator
started, and stage 1's 4 s window starts after a start-up of unknown length). Each run of this
script is on a DDS domain of its own (ROS_DOMAIN_ID, unless set; discovery on this host only).

Usage:
    python bench/rehearse_faults.py                 # the whole matrix, both arms
    python bench/rehearse_faults.py --healthy 10    # ten healthy rehearsals
    python bench/rehearse_faults.py --only swap_2_4 --arms left
Prints one line per run and, at the end, JSON (also written to --out).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Optional

os.environ.setdefault("MUJOCO_GL", "egl")  # before MuJoCo is imported: the operator's pictures

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from mj_manipulator_ros.resources import config_file  # noqa: E402

#: name -> (faults of one arm given its joint names, text the failure must hold, stage expected)
PER_ARM: dict[str, tuple[Callable[[list[str]], dict], Callable[[str, list[str]], str], int]] = {
    "zero_offset_2": (lambda j: {"zero_offset": {j[1]: 0.1}},
                      lambda a, j: f"{a} {j[1]} zero offset about +0.1", 1),
    # unloaded in the start pose: the operator's picture (stage 1) names the joint
    "zero_offset_5": (lambda j: {"zero_offset": {j[4]: 0.1}},
                      lambda a, j: f"differs from {a} {j[4]} outward", 1),
    "sign_flip_2": (lambda j: {"sign_flip": [j[1]]}, lambda a, j: f"{a} {j[1]} sign inverted", 1),
    # at its zero in the start pose: only its jog turns it the wrong way (stage 2's picture)
    "sign_flip_5": (lambda j: {"sign_flip": [j[4]]},
                    lambda a, j: f"differs from {a} {j[4]} outward", 2),
    "swap_2_4": (lambda j: {"swap_joints": [j[1], j[3]]},
                 lambda a, j: f"{a} {j[1]} and {j[3]} swapped", 1),
    # the wrist: named by gravity where it carries load, else by the jog's picture
    "swap_6_7": (lambda j: {"swap_joints": [j[5], j[6]]}, lambda a, j: f"{a} {j[5]}", 2),
    "scale_4": (lambda j: {"scale": {j[3]: 1.5}}, lambda a, j: f"{a} {j[3]} moves 1.5", 1),
    "force_limit_1": (lambda j: {"force_limit": {j[0]: 3.0}},
                      lambda a, j: f"{a} {j[0]} moved", 2),
    "joint_state_gap": (lambda j: {"joint_state_gap_s": 0.2, "joint_state_gap_every_s": 2.0},
                        lambda a, j: "message(s) missing", 1),
    "joint_state_drop": (lambda j: {"joint_state_drop": 20, "joint_state_drop_every_s": 2.0},
                         lambda a, j: "message(s) missing", 1),
    "clock_step": (lambda j: {"clock_step_s": -0.05, "clock_step_every_s": 2.0},
                   lambda a, j: "clock stepped", 1),
}
#: the OpenArm driver's defaults (openarm_ros2#72: MIT, KP 20, KD 2.75, no gravity feed-forward)
#: on the actuator twin; the left arm in the "ready" pose (loaded), the right one hanging, elbow
#: bent 0.3 rad. (config/sim_openarm_driver_defaults.yaml starts both hanging, joint 4 at its
#: lower limit: stage 1 stops on a position 0.1 mrad past it; from "ready" both arms sag 0.4
#: rad at start, to 4.4 mm of each other: the pre-flight gate refuses the first jog.)
DRIVER_DEFAULTS = {
    "sim": {"arms": {a: {"controller": "mit", "mit_kp": 20.0, "mit_kd": 2.75,
                         "mit_feed_forward": False} for a in ("left", "right")}},
    "scene": {"initial_positions": {"openarm_left_joint1": -0.630151,
                                    "openarm_left_joint2": -0.135345,
                                    "openarm_left_joint3": 0.536318,
                                    "openarm_left_joint4": 1.827704,
                                    "openarm_right_joint4": 0.3}}}
#: name -> (config file, sections merged into it, text the failure must hold, stage)
WHOLE: dict[str, tuple[str, dict, str, int]] = {
    "crossed_arms": ("sim_openarm.yaml", {"sim": {"faults": {"crossed_arms": ["left", "right"]}}},
                     "arms crossed", 1),
    "driver_defaults_72": ("sim_openarm_twin.yaml", DRIVER_DEFAULTS, "rests", 2),
}


class PhysicalMotion:
    """The largest displacement of any arm joint from where it was when watching began (rad),
    on the physical joints (qpos), sampled every ``period`` s of wall time."""

    def __init__(self, shared, period: float = 0.005) -> None:
        adr = np.concatenate([np.asarray(a.qpos_adr) for a in shared.scene.arms.values()])
        self.names = [j for a in shared.scene.arms.values() for j in a.joint_names]
        self._read = lambda: shared.read(lambda m, d: d.qpos[adr].copy())
        self._start = self._read()
        self.largest = 0.0
        self.joint = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period,), daemon=True)
        self._thread.start()

    def _run(self, period: float) -> None:
        while not self._stop.wait(period):
            try:
                moved = np.abs(self._read() - self._start)
                if moved.max() > self.largest:
                    self.largest, self.joint = float(moved.max()), self.names[int(moved.argmax())]
            except Exception:  # noqa: BLE001 - the simulator closed under us
                return

    def close(self) -> float:
        self._stop.set()
        self._thread.join(timeout=2.0)
        return self.largest


def rehearse(config_name: str, sections: dict, workdir: Path, through: int = 2) -> dict:
    """One ``hil --sim --yes --through N`` run with ``sections`` (section -> keys, e.g. the sim
    section's ``faults``) set in the config; its stop, failures, motion."""
    from mj_manipulator_ros.hil import session as session_module
    from mj_manipulator_ros.hil.runner import run_hil

    data = yaml.safe_load(config_file(config_name).read_text())
    for section, keys in sections.items():
        if isinstance(keys, list):       # a list section (arms) replaces the config's
            data[section] = keys
        else:
            data.setdefault(section, {}).update(keys)
    cfg = workdir / "faulted.yaml"
    cfg.write_text(yaml.safe_dump(data))
    watchers: list[PhysicalMotion] = []
    original, original_close = session_module.HilSession.__init__, session_module.HilSession.close

    def watched(self, *args, **kwargs):   # watch the physics of the session run_hil makes ...
        original(self, *args, **kwargs)
        if self.sim_node is not None:
            watchers.append(PhysicalMotion(self.sim_node.shared))

    def closed(self):                     # ... until the bring-up ends (not its shutdown)
        for w in watchers:
            w.close()
        original_close(self)
    said: list[str] = []
    session_module.HilSession.__init__ = watched
    session_module.HilSession.close = closed
    t0 = time.monotonic()
    try:
        code = run_hil(str(cfg), sim=True, yes=True, through=through, force=True,
                       reason="fault rehearsal", results=str(workdir / "results"),
                       say=said.append)
    finally:
        session_module.HilSession.__init__ = original
        session_module.HilSession.close = original_close
    motion = watchers[0].close() if watchers else 0.0
    moved_joint = watchers[0].joint if watchers else ""
    stopped = next((int(l.split()[1]) for l in said if l.startswith("stage ") and "FAILED" in l),
                   None)
    failures = [l.strip() for l in said
                if "[FAIL]" in l or "[NOT MEASURED]" in l or l.startswith("hil: error")]
    # every passed check's figures: how far from its thresholds a healthy run stays
    figures: dict[str, list[float]] = {}
    for line in said:
        m = re.match(r"\s*\[pass\] (\S+) .*? ([-+\d.e]+) \(threshold", line)
        if m:
            figures.setdefault(m.group(1), []).append(float(m.group(2)))
    return {"exit": code, "stopped_at_stage": stopped, "failures": failures,
            "passed_figures": figures,
            "largest_physical_motion_rad": motion, "largest_physical_motion_joint": moved_joint,
            "wall_s": time.monotonic() - t0}


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", nargs="*", default=["left", "right"])
    ap.add_argument("--only", nargs="*", help="fault names (default: every one)")
    ap.add_argument("--healthy", type=int, default=0, help="this many healthy rehearsals instead")
    ap.add_argument("--out", default="", help="also write the JSON here")
    args = ap.parse_args(argv)
    # a private DDS domain on this host: another simulator running here must not answer
    os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    joints = {a["name"]: list(a["joint_names"]) for a in
              yaml.safe_load(config_file("sim_openarm.yaml").read_text())["arms"]}
    runs = []
    if args.healthy:
        plan = [(f"healthy_{k + 1}", "sim_openarm.yaml", {}, "", None, None)
                for k in range(args.healthy)]
    else:
        plan = []
        for name, (make, expect, stage) in PER_ARM.items():
            if args.only and name not in args.only:
                continue
            for arm in args.arms:
                faults = {"sim": {"faults": {arm: make(joints[arm])}}}
                plan.append((name, "sim_openarm.yaml", faults, expect(arm, joints[arm]), stage,
                             arm))
        for name, (cfg, sections, expect, stage) in WHOLE.items():
            if not args.only or name in args.only:
                plan.append((name, cfg, sections, expect, stage, None))
    for name, cfg, sections, expect, stage, arm in plan:
        with tempfile.TemporaryDirectory() as tmp:
            r = rehearse(cfg, sections, Path(tmp))
        text = "\n".join(r["failures"])
        if expect:
            r["named"] = bool(r["failures"]) and expect in text
            r["expected_stage"] = stage
            r["detected"] = r["exit"] == 1
        else:
            r["false_detection"] = r["exit"] != 0
        r.update(fault=name, arm=arm, config=cfg, sections=sections)
        runs.append(r)
        print(f"{name:18s} {arm or '-':5s} exit {r['exit']} stopped at stage "
              f"{r['stopped_at_stage']} (expected {stage}); named {r.get('named')}; physical "
              f"motion {r['largest_physical_motion_rad']:.4f} rad "
              f"({r['largest_physical_motion_joint'] or '-'}); {r['wall_s']:.0f} s; "
              f"{r['failures'][:1]}", flush=True)
    out = {"conditions": "hil --sim --yes --through 2 per run, this machine, one process each "
                         "run's simulator at sim_real_time_factor", "runs": runs}
    text = json.dumps(out, indent=1, default=str)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    bad = [r for r in runs if (r.get("named") is False) or r.get("false_detection")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
