"""Run every benchmark in bench/ and print one JSON document (`make bench`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = ["executor_bench.py", "sim_bench.py", "replay_bench.py", "gate_bench.py",
              "stop_bench.py", "transitions.py", "field_report_72.py",
              "watch_bench.py", "torque_bench.py", "cosim_bench.py", "multihost_bench.py",
              "joint_state_buffer_bench.py", "start_lead_bench.py", "combined_results_bench.py",
              "goal_latency.py", "random_sequences.py", "random_combined.py",
              "lockstep_sequences.py", "fault_to_stop.py", "black_box_bench.py",
              "black_box_crossing.py"]


def main() -> int:
    out = {}
    for name in BENCHMARKS:
        proc = subprocess.run([sys.executable, str(HERE / name)], capture_output=True, text=True,
                              timeout=1800)
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return proc.returncode
        out[name] = json.loads(proc.stdout)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
