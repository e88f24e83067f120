"""The HIL session's joint-state buffer (issue 40). Prints JSON; not a test (no thresholds).

A session keeps the /joint_states messages it receives; ``HilSession.pose()`` (every motion
stage, the jog), ``wait_for_joint_states`` (polled at 50 Hz) and the windows of the runners ask
it. The old buffer rebuilt arrays from every message since the session began on each call, so a
rehearsal's cost grew with the square of its length (a 458 s ``--sim`` rehearsal ends near
90,000 rows). At 1,000 / 10,000 / 90,000 rows of 14-joint messages (both OpenArm arms in one
message, 100 Hz of stamps, as the simulator publishes them), in the same run:

- ``pose``: an arm's latest positions (``JointStateRows.latest``; old: ``samples().arm(...)``
  and its last row, what ``pose()`` did);
- ``window_5s``: ``samples(since=the last 5 s)`` (500 rows);
- ``append_us``: the cost of keeping one message (the subscription callback's part).

New is ``mj_manipulator_ros/hil/joint_state_rows.py``; old is the algorithm it replaced
(``test/joint_state_reference.py``). Times are medians of repeated calls (old at 90,000 rows:
fewer repeats, each call takes seconds).

Usage: python bench/joint_state_buffer_bench.py [--rows 1000 10000 90000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

import numpy as np  # noqa: E402

from joint_state_reference import ReferenceRows  # noqa: E402
from mj_manipulator_ros.hil.joint_state_rows import JointStateRows  # noqa: E402

LEFT = tuple(f"openarm_left_joint{k}" for k in range(1, 8))
RIGHT = tuple(f"openarm_right_joint{k}" for k in range(1, 8))
RATE_HZ = 100.0


def messages(n: int, seed: int = 0) -> list[tuple]:
    """(stamp, received, names, positions, velocities, efforts) of ``n`` 14-joint messages."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n, 14))
    return [(100.0 + i / RATE_HZ, 100.0 + i / RATE_HZ + 0.002, LEFT + RIGHT, tuple(q[i]),
             tuple(q[i] * 0.1), tuple(q[i] * 2.0)) for i in range(n)]


def median_s(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def at(n: int, msgs: list[tuple]) -> dict:
    new, old = JointStateRows(), ReferenceRows()
    t0 = time.perf_counter()
    for m in msgs[:n]:
        new.append(*m)
    append_new = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for m in msgs[:n]:
        old.append(*m)
    append_old = (time.perf_counter() - t0) / n
    since = msgs[n - 1][0] - 5.0
    assert np.array_equal(new.latest(LEFT), old.pose(LEFT))
    assert len(new.samples(since=since)) == len(old.samples(since=since))
    old_repeats = 3 if n <= 10_000 else 1
    return {
        "rows": n,
        "pose_ms": {"new": median_s(lambda: new.latest(LEFT), 200) * 1e3,
                    "old": median_s(lambda: old.pose(LEFT), old_repeats) * 1e3},
        "window_5s_ms": {"new": median_s(lambda: new.samples(since=since), 50) * 1e3,
                         "old": median_s(lambda: old.samples(since=since), old_repeats) * 1e3},
        "append_us": {"new": append_new * 1e6, "old": append_old * 1e6},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", default=[1000, 10_000, 90_000])
    args = parser.parse_args()
    msgs = messages(max(args.rows))
    load_before = os.getloadavg()
    results = [at(n, msgs) for n in args.rows]
    load_after = os.getloadavg()
    for r in results:
        for k in ("pose_ms", "window_5s_ms", "append_us"):
            r[k] = {a: round(b, 4) for a, b in r[k].items()}
    print(json.dumps({
        "benchmark": "joint_state_buffer", "cpus": os.cpu_count(),
        "conditions": "one process, one thread; the machine's 1-minute load average before and "
                      "after (2 cores shared with other work: above 1 is loaded)",
        "load_average_1min": {"before": round(load_before[0], 2), "after": round(load_after[0], 2)},
        "message": "14 joints (both arms in one message), 100 Hz of stamps",
        "results": results}, indent=2))


if __name__ == "__main__":
    main()
