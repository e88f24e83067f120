"""Safety promises through real processes: the simulator and ``execute`` as OS processes.
Joint states that lie or stop (a relay in this test forwards ``/joint_states`` to the topic the
arms read, corrupting it on purpose); the pre-flight check on by default, the approach move
included."""

from __future__ import annotations

import contextlib
import json
import math
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import rclpy
import yaml
from sensor_msgs.msg import JointState

from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.plan_io import save_plan
from mj_manipulator_ros.core.report import ExecutionReport
from mj_manipulator_ros.ros.spinner import BackgroundSpinner
from tiny_arm import tiny_mapping

CLI = [sys.executable, "-m", "mj_manipulator_ros.cli"]
RELAYED = "/relayed_joint_states"


class Relay:
    """Forwards /joint_states to RELAYED through ``edit(msg) -> msg | None`` (None: dropped)."""

    def __init__(self, context, edit) -> None:
        self.node = rclpy.create_node("joint_state_relay", context=context)
        self.edit = edit
        self.pub = self.node.create_publisher(JointState, RELAYED, 50)
        self.sub = self.node.create_subscription(JointState, "/joint_states", self._on, 50)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.spinner = BackgroundSpinner(self.executor, "relay").start()

    def _on(self, msg: JointState) -> None:
        out = self.edit(msg)
        if out is not None:
            self.pub.publish(out)

    def close(self) -> None:
        self.spinner.stop()
        self.node.destroy_node()


def setup(tmp_path: Path, start: dict, swing=(0.4, 0.0), relayed: bool = True,
          separation: float = 1.0, execution: dict | None = None) -> tuple[Path, Path]:
    """The tiny pair on real time (system clock), arms reading RELAYED (or /joint_states); a
    2 s swing by ``swing`` (j1, j2) out and back from ``start`` (arm -> (2,))."""
    data = tiny_mapping(tmp_path, sim={"real_time_factor": 1.0, "use_sim_time": False,
                                       # the simulated drivers publish where the relay reads
                                       "arms": {a: {"joint_states_topic": "/joint_states"}
                                                for a in ("left", "right")}},
                        execution=execution if execution is not None else {"preflight_check": False},
                        arm_extra={"joint_states_topic": RELAYED} if relayed else None,
                        separation=separation)
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(data))
    t = np.linspace(0.0, 2.0, 21)
    s = np.sin(np.pi * t / 2.0) ** 2
    plan = MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), t,
                                          np.asarray(q0) + np.outer(s, swing))
                         for a, q0 in start.items()})
    path = tmp_path / "plan.yaml"
    save_plan(plan, path)
    return config, path


def run_execute(processes, config: Path, plan: Path, *extra: str, record: Path | None = None
                ) -> subprocess.CompletedProcess:
    """Start the simulator (recording its joint states when ``record`` is given), run
    ``execute``; the simulator is stopped before returning, so its bag is complete."""
    args = [*CLI, "sim", "--config", str(config)] + (["--record", str(record)] if record else [])
    sim = processes(args)
    processes.wait_for_line(sim, "simulating arms", timeout=60)
    done = subprocess.run([*CLI, "execute", str(plan), "--config", str(config), "--json", *extra],
                          capture_output=True, text=True, timeout=120, env=processes.env)
    sim.send_signal(signal.SIGINT)
    sim.wait(timeout=30)
    return done


def test_a_nan_joint_state_is_refused_before_anything_moves(ros, processes, tmp_path) -> None:
    """Regression: with left_j1 reported as NaN and the plan starting 0.5 rad away on it,
    ``execute`` exited 0 'succeeded, max tracking error 0.0' and the arm jumped 0.5 rad within
    the start lead (NaN > tolerance is False)."""
    def nan_j1(msg):
        msg.position = [math.nan if n == "left_j1" else p for n, p in zip(msg.name, msg.position)]
        return msg
    relay = Relay(ros.context, nan_j1)
    try:
        config, plan = setup(tmp_path, {"left": [0.5, 0.0], "right": [0.0, 0.0]})
        done = run_execute(processes, config, plan)
    finally:
        relay.close()
    assert done.returncode == 2, done.stdout + done.stderr
    assert "'left'" in done.stderr and "'left_j1'" in done.stderr and "nan" in done.stderr
    assert "expected a finite number" in done.stderr


def test_a_controller_clock_off_is_refused_with_exit_2_and_nothing_moves(processes,
                                                                        tmp_path) -> None:
    """The clock check's refusal comes before any goal: exit 2 (it was 1, the code of a run that
    failed while moving)."""
    config, plan = setup(tmp_path, {"left": [0.0, 0.0], "right": [0.0, 0.0]}, relayed=False)
    data = yaml.safe_load(config.read_text())
    data["sim"]["faults"] = {"right": {"clock_offset_s": 0.2}}
    config.write_text(yaml.safe_dump(data))
    bag = tmp_path / "sim_bag"
    done = run_execute(processes, config, plan, record=bag)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "'right'" in done.stderr and "clock" in done.stderr, done.stderr
    assert moved(bag) < 1e-3


def test_joint_states_that_stop_once_moving_fail_the_execution(ros, processes, tmp_path) -> None:
    """Regression: a relay that stops forwarding the right arm's joints once it moves left the
    watch blind: 'succeeded, max progress skew 0.0 ms'."""
    moving = threading.Event()

    def drop_right_once_moving(msg):
        q = dict(zip(msg.name, msg.position))
        if abs(q.get("right_j1", 0.0)) > 0.02:
            moving.set()
        if moving.is_set():
            keep = [k for k, n in enumerate(msg.name) if not n.startswith("right_")]
            msg.name = [msg.name[k] for k in keep]
            msg.position = [msg.position[k] for k in keep]
            msg.velocity = [msg.velocity[k] for k in keep] if msg.velocity else []
            msg.effort = [msg.effort[k] for k in keep] if msg.effort else []
        return msg
    relay = Relay(ros.context, drop_right_once_moving)
    try:
        config, plan = setup(tmp_path, {"left": [0.0, 0.0], "right": [0.0, 0.0]})
        done = run_execute(processes, config, plan)
    finally:
        relay.close()
    assert moving.is_set(), "the right arm never moved: the fixture did not run"
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    failure = report["first_failure"]
    assert (failure["arm"], failure["reason"]) == ("right", "joint_states_stale"), failure
    assert "right_j1" in failure["error_string"]
    for arm in ("left", "right"):
        assert report["arms"][arm]["stop_confirmed"], report["arms"][arm]


def test_a_stop_measured_on_the_stream_that_failed_says_not_measured(ros, processes,
                                                                     tmp_path) -> None:
    """Regression: with left_j1's reported value frozen every other message (a stale value
    interleaved with the true stream, as a position-only driver sends it), the watch stopped
    the run (velocity_limit), but the report's measured stop ("travel 1.8112 in 0.523 s") was
    computed from that same stream. Now it says not measured, and why."""
    frozen: dict = {}
    count = [0]

    def freeze_left_j1(msg):
        q = dict(zip(msg.name, msg.position))
        if "left_j1" not in q:
            return msg
        if abs(q["left_j1"]) > 0.02:   # once it moves: every other message, the value then
            frozen.setdefault("left_j1", q["left_j1"])
            count[0] += 1
            if count[0] % 2:
                q["left_j1"] = frozen["left_j1"]
        msg.position = [float(q[n]) for n in msg.name]
        msg.velocity = []              # positions only: the watch differentiates them
        return msg
    relay = Relay(ros.context, freeze_left_j1)
    try:
        config, plan = setup(tmp_path, {"left": [0.0, 0.0], "right": [0.0, 0.0]})
        done = run_execute(processes, config, plan)
    finally:
        relay.close()
    assert frozen, "left_j1 never moved: the fixture did not run"
    assert done.returncode == 1, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    failure = doc["first_failure"]
    assert (failure["arm"], failure["reason"]) == ("left", "velocity_limit"), failure
    left = doc["arms"]["left"]
    assert left["stop"] == "cancel" and left["stop_confirmed"], left
    assert (left["stop_travel"], left["stop_time_s"], left["stop_observed_s"]) == \
        (None, None, None), left
    assert left["stop_not_measured"] == \
        "the joint-state stream was the failure (velocity_limit)", left
    summary = ExecutionReport.from_dict(doc).summary()
    line = next(x for x in summary.splitlines() if x.strip().startswith("left:"))
    assert "not measured: the joint-state stream was the failure (velocity_limit)" in line, \
        summary


def moved(bag: Path) -> float:
    """The largest joint excursion (rad) in a simulator's recorded joint states."""
    from bag_reader import read_bag

    rows = read_bag(bag).decoded("/joint_states", JointState)
    assert rows, f"no joint states recorded in {bag}"
    q = np.array([list(m.position) for m in rows])
    return float(np.max(np.abs(q - q[0])))


def test_the_default_configuration_refuses_a_colliding_plan(processes, tmp_path) -> None:
    """No preflight_check key at all (the default): a plan that swings the left arm through the
    standing right arm (0.6 m apart) is refused before any goal, and nothing moves (regression:
    the check was off by default and the arms met)."""
    config, plan = setup(tmp_path, {"left": [0.0, 0.0], "right": [0.0, 0.0]}, swing=(1.5, 0.0),
                         relayed=False, separation=0.6, execution={})
    assert "preflight_check" not in yaml.safe_load(config.read_text())["execution"]
    bag = tmp_path / "sim_bag"
    done = run_execute(processes, config, plan, record=bag)
    assert done.returncode == 2, done.stdout + done.stderr   # refused: nothing was sent
    assert "pre-flight check refused the plan" in done.stderr
    assert "left" in done.stderr and "right" in done.stderr
    assert moved(bag) < 1e-3


def test_the_approach_move_is_checked_too(processes, tmp_path) -> None:
    """Arms apart and clear; a plan holding the left arm where it overlaps the right arm:
    ``--approach`` would drive it there. Refused before any goal (regression: the approach
    move drove the arms into each other)."""
    config, plan = setup(tmp_path, {"left": [1.5, 0.0], "right": [0.0, 0.0]}, swing=(0.0, 0.0),
                         relayed=False, separation=0.6, execution={})
    bag = tmp_path / "sim_bag"
    done = run_execute(processes, config, plan, "--approach", record=bag)
    assert done.returncode == 2, done.stdout + done.stderr   # refused: nothing was sent
    assert "pre-flight check refused the plan" in done.stderr
    assert moved(bag) < 1e-3


def test_ctrl_c_in_the_first_seconds_of_execute_ends_canceled_with_nothing_sent(
        processes, tmp_path) -> None:
    """Ctrl-C while ``execute`` imports, parses the plan, compiles the scene or runs the gate:
    exit 130 with a report (canceled, every arm not_sent), never a KeyboardInterrupt traceback
    (regression: the first seconds printed a raw traceback). The signal is sent at several
    moments of the start-up (each one lands in a different phase on this machine)."""
    import time

    config, plan = setup(tmp_path, {"left": [0.0, 0.0], "right": [0.0, 0.0]}, relayed=False,
                         execution={})
    sim = processes([*CLI, "sim", "--config", str(config)])
    processes.wait_for_line(sim, "simulating arms", timeout=60)
    outcomes = []
    for delay in (0.0, 0.5, 1.5, 2.5):
        with signalled_execute(processes, config, plan) as proc:
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, (delay, err[-3000:])
        assert proc.returncode == 130, (delay, proc.returncode, out[-2000:], err[-2000:])
        report = json.loads(out)
        outcomes.append((delay, report["status"]))
        if report["start_stamp"] is None:   # interrupted before anything was sent
            assert report["status"] == "canceled", report
            assert {r["status"] for r in report["arms"].values()} == {"not_sent"}, report
            assert set(report["arms"]) == {"left", "right"}, report
        else:   # the arms moved and were canceled away from the plan's start: a later,
            break   # later-interrupted run would be refused there (start state), not signalled
    assert any(s == "canceled" for _, s in outcomes), outcomes


@contextlib.contextmanager
def signalled_execute(processes, config: Path, plan: Path):
    """``execute --json`` as a process, yielded once its signal handlers are installed (before
    that, a signal meets the interpreter's start-up); killed on the way out if still running."""
    from conftest import _default_sigint   # (a suite run as a background job ignores SIGINT)

    proc = subprocess.Popen([*CLI, "execute", str(plan), "--config", str(config), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=processes.env, preexec_fn=_default_sigint)
    try:
        catches(proc.pid, signal.SIGTSTP, timeout=30.0)   # installed with the SIGINT one
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def catches(pid: int, signum: int, timeout: float) -> None:
    """Wait (bounded) until process ``pid`` has a handler for ``signum`` (/proc SigCgt): from
    then on the signal is the program's, not the interpreter's start-up."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/status") as f:
            caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
        if caught >> (signum - 1) & 1:
            return
        time.sleep(0.005)
    raise AssertionError(f"process {pid} installed no handler for signal {signum} in {timeout} s")


def test_ctrl_z_at_every_phase_of_execute_holds_until_ctrl_z_again(processes, tmp_path) -> None:
    """Ctrl-Z (SIGTSTP) at several moments of the start-up (imports, parsing, scene compile,
    gate, start checks) or of the run: held before the start (the stamp is made only after the
    second Ctrl-Z) or paused along the plan; the second Ctrl-Z resumes and the run succeeds.
    Regression: before the executor existed Ctrl-Z suspended the process; during the checks it
    was dropped and the arms started."""
    import time

    config, plan = setup(tmp_path, {"left": [0.0, 0.0], "right": [0.0, 0.0]}, relayed=False,
                         execution={})
    sim = processes([*CLI, "sim", "--config", str(config)])
    processes.wait_for_line(sim, "simulating arms", timeout=60)
    held_seen = 0
    for delay in (0.0, 0.4, 0.8, 1.5):
        with signalled_execute(processes, config, plan) as proc:
            time.sleep(delay)
            proc.send_signal(signal.SIGTSTP)
            time.sleep(3.0)   # held this long: past every start check
            resumed_at = time.time()
            proc.send_signal(signal.SIGTSTP)
            try:
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:   # paused along the plan, its resume refused
                proc.send_signal(signal.SIGINT)
                try:
                    out, err = proc.communicate(timeout=60)
                except subprocess.TimeoutExpired:   # seen once beside the suite: say where
                    proc.kill()
                    out, err = proc.communicate(timeout=30)
                    raise AssertionError(
                        f"Ctrl-Z at {delay} s: execute neither ended 30 s after the second "
                        f"Ctrl-Z nor 60 s after Ctrl-C (killed); its stderr:\n{err[-4000:]}"
                        f"\nstdout:\n{out[-2000:]}") from None
        assert "Traceback" not in err, (delay, err[-3000:])
        if "held before the start" in err:
            held_seen += 1
            assert proc.returncode == 0, (delay, proc.returncode, out[-2000:], err[-2000:])
            report = json.loads(out)
            assert report["start_stamp"] > resumed_at, (delay, report["start_stamp"], resumed_at)
        else:   # the stamp was made: a pause along the plan (a refused resume says why)
            assert "paused along the plan" in err, (delay, err[-2000:])
            assert proc.returncode in (0, 130), (delay, proc.returncode, out[-2000:], err[-2000:])
    assert held_seen >= 2, held_seen


_RECORD_HANDLERS = r"""
import json, signal, sys
real, seen = signal.signal, []
def recording(signum, handler):
    kind = ("default" if handler in (signal.SIG_DFL, signal.default_int_handler) else
            "ignored" if handler == signal.SIG_IGN else "caught")
    seen.append((int(signum), kind))
    return real(signum, handler)
signal.signal = recording
from mj_manipulator_ros.cli import main
code = main(["execute", sys.argv[1], "--config", sys.argv[2], "--json"])
print(json.dumps({"code": code, "seen": seen}))
"""


def test_ctrl_c_and_ctrl_z_are_never_left_to_python_defaults_once_caught(tmp_path) -> None:
    """From the first line of ``execute`` Ctrl-C and Ctrl-Z are caught, and the real handlers
    replace the early ones directly: never an instant, until the command ends, with Python's
    defaults in between (there Ctrl-Z suspended the process, or Ctrl-C raised a traceback).
    Regression: the early handlers were first put back to the defaults, then the real ones
    installed after an import; a Ctrl-Z at the start of ``execute`` on a loaded machine landed
    there, the process stopped and no later signal reached it (the Ctrl-Z test hung in CI).
    Every handler installed while ``execute`` runs to a refusal is recorded in the process."""
    missing = tmp_path / "missing.yaml"
    done = subprocess.run([sys.executable, "-c", _RECORD_HANDLERS, str(tmp_path / "p.json"),
                           str(missing)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 2 and str(missing) in done.stderr, (result, done.stderr[-2000:])
    for signum in (signal.SIGINT, signal.SIGTSTP):
        kinds = [k for s, k in result["seen"] if s == signum]
        assert kinds and kinds[0] == "caught", (signum.name, result["seen"])
        # until its last change (the command ending) the signal is never Python's default's
        assert "default" not in kinds[:-1], (
            f"{signum.name} went back to Python's default handler while execute ran: "
            f"{kinds} (every change of its handler, in order)")
