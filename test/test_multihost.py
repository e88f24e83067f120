"""Arms on separate hosts: each arm's simulated controller in its own network namespace, the
executor in another, joined by veth pairs on a bridge (tools/netns_topology.sh); DDS over UDP
on that network (multicast discovery on the subnet, no shared memory). Real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from bag_reader import read_bag
from mj_manipulator_ros.apps.demo import DEMO_LEAD_S
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.resources import config_file, share_dir
from netns import SCRIPT, Topology, can_make_namespaces, stop_processes

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
CLI = [str(Path(PY).with_name("mj-manipulator-ros"))]
CROSSING = share_dir() / "config/plans/openarm_crossing.yaml"
# one topology per test worker (pytest-xdist): namespace names are machine-wide
NAME = "mjmh" + os.environ.get("PYTEST_XDIST_WORKER", "gw")[2:][:3]

pytestmark = pytest.mark.slow

OK, WHY = can_make_namespaces()
if not OK:
    pytest.skip(f"multi-host tests need network namespaces: {WHY}", allow_module_level=True)


@pytest.fixture(scope="module")
def topology():
    topo = Topology(NAME, ["exec", "left", "right"], 180 + os.getpid() % 40)
    try:
        yield topo
    finally:
        topo.down()


@pytest.fixture
def hosts(topology, tmp_path):
    """Factory: start one simulator process per arm, each in its host's namespace, serving
    only its arm (on the system clock); ``faults`` per arm; ``record`` each host's own bag."""
    started = []

    def start(faults: dict | None = None, record: bool = False) -> dict:
        data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
        data["sim"]["faults"] = faults or {}
        # the crossing plan's goals (1,401 points per arm) go over UDP to a simulator process
        # that deserializes them in Python (~54 ms each, idle, on this 2-core machine): beside
        # the suite's other worker they were taken 30-80 ms after the shipped 0.25 s lead (late
        # acceptance, the plan never started; the right verdict for that lead). The subject here
        # is arms on separate hosts, not that margin: the lead the demo gives the same goals
        data["execution"]["start_lead_s"] = DEMO_LEAD_S
        cfg = tmp_path / "hosts.yaml"
        cfg.write_text(yaml.safe_dump(data))
        procs = {}
        for arm in ("left", "right"):
            extra = ["--record", str(tmp_path / f"{arm}_host_bag")] if record else []
            procs[arm] = subprocess.Popen(
                topology.command(arm, [*CLI, "sim", "--config", str(cfg), "--serve", arm, *extra]),
                env=topology.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            started.append(procs[arm])
        for arm, p in procs.items():  # up when it says so
            for line in p.stdout:
                if "simulating arms" in line:
                    break
            else:
                raise RuntimeError(f"{arm} host's simulator exited: {p.wait(5)}")
        return {"config": cfg, "procs": procs}
    yield start
    stop_processes(started)


def drive(topology, scenario: str, config: Path, bag: Path, **kw) -> dict:
    args = [PY, str(ROOT / "test" / "netns_driver.py"), scenario, "--config", str(config),
            "--plan", str(CROSSING), "--bag", str(bag)]
    for k, v in kw.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    out = subprocess.run(topology.command("exec", args), env=topology.env(), capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_crossing_plan_across_hosts(topology, hosts, tmp_path) -> None:
    up = hosts()
    result = drive(topology, "run", up["config"], tmp_path / "exec_bag")
    report = result["report"]
    assert report["status"] == "succeeded", json.dumps(report, indent=1)
    lateness = result["onset_lateness_s"]
    assert set(lateness) == {"left", "right"}
    control_period = 1.0 / 500
    skew = max(lateness.values()) - min(lateness.values())
    assert skew <= 2 * control_period, lateness
    # the joint states came from the two hosts, over the network
    assert min(result["joint_state_counts"].values()) > 1000  # 14 s at 100 Hz each


def test_a_cut_link_stops_the_peer_and_is_reported(topology, hosts, tmp_path) -> None:
    """The left host's cable is pulled 1 s into the motion: the executor detects it (its joint
    states stop; feedback silence, unanswered liveness probe), cancels the right arm and confirms its stop, and reports
    the left arm's stop as unconfirmed. The left host, on its own, finishes its goal and holds."""
    up = hosts(record=True)
    cut = f"bash {SCRIPT} cut {NAME} left"
    try:
        result = drive(topology, "cut", up["config"], tmp_path / "exec_bag", cut=cut, cut_after=1.0)
    finally:
        topology.restore("left")
    report, cut_at = result["report"], result["cut_at"]
    assert cut_at is not None, f"the run ended before the cut: {report['first_failure']}"
    assert report["first_failure"]["arm"] == "left"
    # the left host's joint states stop with the link (0.25 s), before its feedback's silence
    # is probed (about 1 s): either names the left arm
    assert report["first_failure"]["reason"] in ("joint_states_stale", "feedback_timeout",
                                                 "controller_gone")
    left, right = report["arms"]["left"], report["arms"]["right"]
    assert left["status"] == "UNCONFIRMED_STOP" and not left["stop_confirmed"]
    assert right["status"] == "canceled" and right["stop_confirmed"]
    # detected and the peer stopped within the watchdog's bound: feedback_timeout_s (1 s) +
    # the liveness probe's answer time (0.5 s) + 0.5 s (measured: 1.04 s)
    assert right["cancel_acknowledged_at"] - cut_at < 2.0
    # the left host on its own: its controller ran the goal to the end and holds there
    plan = load_plan(CROSSING)["left"]
    end = report["start_stamp"] + plan.duration
    time.sleep(max(0.0, end + 1.0 - time.time()))  # hosts share this machine's clock
    up["procs"]["left"].send_signal(signal.SIGINT)
    assert up["procs"]["left"].wait(20) == 0
    bag = read_bag(tmp_path / "left_host_bag")
    # (before the cut the right host's joint states reached this host too: keep the left's)
    states = [m for m in bag.decoded("/joint_states") if list(m.name) == list(plan.joint_names)]
    stamps = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in states])
    q = np.array([m.position for m in states])
    assert stamps[-1] > end + 0.5, "the host's recording ends before the plan would"
    after = stamps > end + 0.5
    np.testing.assert_allclose(q[after][-1], plan.positions[-1], atol=0.05)
    assert np.ptp(q[after], axis=0).max() < 1e-3  # holding still
    status = bag.decoded("/left_arm_controller/follow_joint_trajectory/_action/status")
    assert status[-1].status_list[-1].status == 4  # SUCCEEDED, with nobody listening


def test_a_host_clock_50ms_ahead_is_refused_before_any_goal(topology, hosts, tmp_path) -> None:
    up = hosts(faults={"right": {"clock_offset_s": 0.05}})
    result = drive(topology, "refuse", up["config"], tmp_path / "exec_bag")
    assert result.get("refused") == "ClockOffsetError", result
    assert "right" in result["message"] and not result["bag_written"]
