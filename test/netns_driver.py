"""The executor's side of the multi-host tests, run inside the executor's namespace:

    python test/netns_driver.py SCENARIO --config CFG --plan PLAN --bag DIR [--cut "CMD..."]

Scenarios: ``run`` (execute, record a bag, measure each arm's motion onset from its host's
joint states), ``cut`` (the same; ``--cut-after`` s after the start stamp run the ``--cut``
command, which pulls one host's cable), ``refuse`` (expect the execution to be refused before
any goal). Prints one JSON line (the last line of stdout).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from bag_reader import read_bag  # noqa: E402
from mj_manipulator_ros.core.config import load_config  # noqa: E402
from mj_manipulator_ros.core.errors import MjManipulatorError  # noqa: E402
from mj_manipulator_ros.core.plan_io import load_plan  # noqa: E402
from mj_manipulator_ros.hil.analysis import JointSamples, onset, planned_onset  # noqa: E402
from mj_manipulator_ros.ros.context import RosContext  # noqa: E402
from mj_manipulator_ros.ros.executor import MultiArmExecutor  # noqa: E402

THRESHOLD = 0.002  # rad: motion onset


def samples_from_bag(bag_dir: Path) -> JointSamples:
    bag = read_bag(bag_dir)
    msgs = bag.decoded("/joint_states")
    received = [t * 1e-9 for _, t, _ in bag.on("/joint_states")]
    names = sorted({n for m in msgs for n in m.name})
    pos = np.full((len(msgs), len(names)), np.nan)
    for k, m in enumerate(msgs):
        for n, x in zip(m.name, m.position):
            pos[k, names.index(n)] = x
    stamps = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in msgs])
    order = np.argsort(stamps)
    return JointSamples(stamps[order], np.array(received)[order], tuple(names), pos[order],
                        np.zeros_like(pos)[order])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("scenario", choices=["run", "cut", "refuse"])
    p.add_argument("--config", required=True)
    p.add_argument("--plan", required=True)
    p.add_argument("--bag", required=True)
    p.add_argument("--cut", default="")
    p.add_argument("--cut-after", type=float, default=1.0)
    args = p.parse_args()
    config = load_config(args.config)
    plan = load_plan(args.plan)
    out: dict = {"scenario": args.scenario}
    with RosContext() as ros, MultiArmExecutor(config, context=ros.context) as executor:
        cut_at = {}
        if args.scenario == "cut":
            def cutter() -> None:
                deadline = time.monotonic() + 60
                while executor.current_stamp is None and time.monotonic() < deadline:
                    time.sleep(0.002)
                if executor.current_stamp is None:
                    return
                while executor.now() < executor.current_stamp.seconds + args.cut_after:
                    time.sleep(0.002)
                cut_at["t"] = time.time()
                subprocess.run(shlex.split(args.cut), check=True, timeout=10)
            thread = threading.Thread(target=cutter, daemon=True)
            thread.start()
        try:
            report = executor.execute(plan, record=args.bag)
        except MjManipulatorError as exc:
            out.update(refused=type(exc).__name__, message=str(exc),
                       bag_written=Path(args.bag).exists())
            print(json.dumps(out))
            return 0
        if args.scenario == "cut":
            thread.join(10)
        out["report"] = report.to_dict()
        out["cut_at"] = cut_at.get("t")
    samples = samples_from_bag(Path(args.bag))
    lateness = {}
    for arm in config.arms:
        s = samples.arm(arm.joint_names)
        t = onset(s, report.start_stamp - 0.05, THRESHOLD) if report.start_stamp else None
        planned = planned_onset(plan[arm.name], THRESHOLD)
        if t is not None and planned is not None:
            lateness[arm.name] = t - (report.start_stamp + planned)
    out["onset_lateness_s"] = lateness
    out["joint_state_counts"] = {a.name: len(samples.arm(a.joint_names)) for a in config.arms}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
