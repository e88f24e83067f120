"""Shared fixtures: an isolated DDS domain per test session, a fresh rclpy Context per test,
and a check that no test leaves a thread behind."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Must happen before any rclpy.init(): the RMW reads these when a context starts. A domain
    # per worker keeps the workers of one session (pytest-xdist) and concurrent sessions on one
    # machine apart; LOCALHOST keeps every participant on loopback.
    os.environ["ROS_DOMAIN_ID"] = str(_domain_id())
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.setdefault("MUJOCO_GL", "egl")  # offscreen rendering without a display
    # The allowed-collision matrices this session generates (model/allowed_collisions.py), in
    # a folder of its own: never one cached by another version of the code.
    # The black box's files (ros/black_box.py: every execution that fails after a goal was
    # sent writes one under $ROS_HOME) in a folder of this session's, not the user's ~/.ros
    if "MJM_TEST_ROS_HOME" not in os.environ:
        os.environ["MJM_TEST_ROS_HOME"] = os.environ["ROS_HOME"] = tempfile.mkdtemp(
            prefix="mjm-ros-home-")
        config._mjm_ros_home = os.environ["ROS_HOME"]
    if "MJ_MANIPULATOR_CACHE" not in os.environ:
        os.environ["MJ_MANIPULATOR_CACHE"] = tempfile.mkdtemp(prefix="mjm-acm-")
        config._mjm_cache = os.environ["MJ_MANIPULATOR_CACHE"]


#: xdist workers per session at most (-n): each gets its own domain from the session's block
MAX_WORKERS = 4


#: the blocks of domains test sessions take (100-199)
BLOCKS = 25
#: open lock files of the block this session holds (kept open for the session's life)
_held_block: list = []


def _claim_block() -> int:
    """A block of domains no other test session on this machine holds: the first free one from
    this PID's (an exclusive lock on a file per block, released when the process ends, however
    it ends). Two sessions with PIDs 25 apart once shared a block: one's simulator's /clock
    reached the other's executor ("its controller's clock is 155188 ms ahead")."""
    import fcntl

    start = os.getpid() % BLOCKS
    for k in range(BLOCKS):
        block = (start + k) % BLOCKS
        f = open(os.path.join(tempfile.gettempdir(), f"mjm-test-domains-{block}.lock"), "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _held_block.append(f)
        return block
    raise pytest.UsageError(f"every one of the {BLOCKS} blocks of test DDS domains is held by "
                            "another test session on this machine")


def _domain_id() -> int:
    """This process's DDS domain: a block of MAX_WORKERS domains per test session (100-199, one
    no other session holds: :func:`_claim_block`, by the session's controller, whose workers
    inherit it), one per xdist worker in it."""
    if "MJM_TEST_DOMAIN_BASE" not in os.environ:
        os.environ["MJM_TEST_DOMAIN_BASE"] = str(100 + _claim_block() * MAX_WORKERS)
    base = os.environ["MJM_TEST_DOMAIN_BASE"]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")   # gw<N>; absent without xdist
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    if index >= MAX_WORKERS:
        raise pytest.UsageError(f"at most {MAX_WORKERS} test workers (-n): each needs its own DDS "
                                f"domain; worker {worker} has none")
    return int(base) + index


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = getattr(config, "_mjm_cache", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("MJ_MANIPULATOR_CACHE", None)
    home = getattr(config, "_mjm_ros_home", None)
    if home:
        shutil.rmtree(home, ignore_errors=True)
        os.environ.pop("MJM_TEST_ROS_HOME", None)


@pytest.fixture
def ros():
    """A fresh, initialised rclpy context, shut down after the test even when it fails."""
    from mj_manipulator_ros.ros.context import RosContext

    ctx = RosContext()
    try:
        yield ctx
    finally:
        ctx.close()


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    """Fail a test that leaves a thread running (after a bounded grace period)."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5.0
    while True:
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not extra or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not extra, f"threads left behind: {[t.name for t in extra]}"


@pytest.fixture
def scripted(ros):
    """Factory: ``scripted({arm: behavior | (behavior, after) | (behavior, after, from_goal)})
    -> {arm: ScriptedController}`` serving
    /<arm>_arm_controller/follow_joint_trajectory in the test's context, spun in a background
    thread that is stopped (and every running goal ended) after the test."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor

    from mj_manipulator_ros.ros.scripted_controller import Behavior, ScriptedController
    from mj_manipulator_ros.ros.spinner import BackgroundSpinner

    made = []

    def make(behaviors: dict):
        node = rclpy.create_node(f"scripted_{len(made)}", context=ros.context)
        controllers = {}
        for arm, spec in behaviors.items():
            behavior, after, from_goal = (
                (spec, 0.0, 1) if isinstance(spec, (str, Behavior)) else (*spec, 1)[:3])
            controllers[arm] = ScriptedController(
                node, f"/{arm}_arm_controller/follow_joint_trajectory", Behavior(behavior), after,
                from_goal)
        executor = MultiThreadedExecutor(num_threads=4, context=ros.context)
        executor.add_node(node)
        spinner = BackgroundSpinner(executor, f"scripted-{len(made)}").start()
        made.append((node, controllers, spinner))
        return controllers

    yield make
    for node, controllers, spinner in made:
        for c in controllers.values():
            c.shutdown()
        spinner.stop()
        node.destroy_node()


class Processes:
    """Starts OS processes; a thread per process collects its stderr lines (so waiting for a
    line never blocks on a pipe); everything is terminated, killed if needed, and joined."""

    def __init__(self) -> None:
        # PYTHONFAULTHANDLER: a child that crashes in native code (a signal) prints every
        # thread's Python stack to its stderr, which the failing test shows
        self.env = {**os.environ, "RCUTILS_LOGGING_BUFFERED_STREAM": "0", "PYTHONUNBUFFERED": "1",
                    "PYTHONFAULTHANDLER": "1"}
        self.started: list = []

    def __call__(self, args, **kwargs):
        import queue
        import subprocess

        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=self.env, preexec_fn=_default_sigint, **kwargs)
        p.lines = queue.Queue()
        p.stderr_seen = []

        def pump():
            for line in p.stderr:
                p.lines.put(line)
            p.lines.put(None)
        p.reader = threading.Thread(target=pump, name=f"stderr-{p.pid}", daemon=True)
        p.reader.start()
        self.started.append(p)
        return p

    def wait_for_line(self, proc, text: str, timeout: float) -> str:
        """The first (not yet consumed) stderr line of proc containing text."""
        import queue

        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                line = proc.lines.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                proc.lines.put(None)
                break
            proc.stderr_seen.append(line)
            if text in line:
                return line
        ended = proc.poll()
        if ended is None:
            try:
                ended = proc.wait(timeout=1.0)
            except Exception:  # noqa: BLE001 - still running: said below
                ended = None
        how = "" if ended is None else (
            f" (the process ended: killed by signal {-ended})" if ended < 0
            else f" (the process ended: exit code {ended})")
        raise AssertionError(f"no line containing {text!r} within {timeout} s{how}; stderr so "
                             "far:\n" + "".join(proc.stderr_seen)[-3000:])

    def close(self) -> None:
        import signal
        import subprocess

        for p in self.started:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.started:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
            p.reader.join(timeout=10)
            p.stdout.close()
            p.stderr.close()
            _print_stderr_tail(p)


def _print_stderr_tail(p, lines: int = 40) -> None:
    """The last lines of a process's stderr, printed at teardown: pytest shows them with a
    failed test's report (a child that exited 1 under load says why there, not nowhere)."""
    import queue

    rest = []
    while True:
        try:
            line = p.lines.get_nowait()
        except queue.Empty:
            break
        if line is not None:
            rest.append(line)
    text = "".join((p.stderr_seen + rest)[-lines:])
    print(f"--- stderr of {' '.join(map(str, p.args))[:160]} (pid {p.pid}, exit {p.returncode}), "
          f"last {lines} lines ---\n{text}", flush=True)


def _default_sigint() -> None:
    """In the child, before exec: Ctrl-C as a terminal gives it. A suite run as a background job
    (``make test &``) has SIGINT ignored, and an ignored signal stays ignored across exec: the
    Ctrl-C tests would then test nothing but the ignoring."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def processes():
    """Factory starting OS processes (see Processes); all are ended after the test."""
    procs = Processes()
    yield procs
    procs.close()


@pytest.fixture
def busy_loops():
    """Factory: ``busy_loops(n)`` starts ``n`` processes spinning ``while True: pass`` (a loaded
    machine, as a real one is at times); every one is killed at the end of the test."""
    started: list[subprocess.Popen] = []

    def start(n: int) -> list[subprocess.Popen]:
        started.extend(subprocess.Popen([sys.executable, "-c", "while True: pass"])
                       for _ in range(n))
        return started
    yield start
    for p in started:
        p.kill()
        p.wait(10)


@pytest.fixture
def tiny_sim(ros, tmp_path):
    """Factory: ``tiny_sim(**faults) -> SimNode`` of the tiny two-arm scene, real time, sim
    time, with ``faults`` per arm; closed after the test."""
    from mj_manipulator_ros.sim.sim_node import SimNode
    from tiny_arm import tiny_config

    made = []

    def make(**faults):
        node = SimNode(tiny_config(tmp_path, sim={"real_time_factor": 1.0, "faults": faults}),
                       context=ros.context).start()
        made.append(node)
        return node
    # The simulator runs in this test's process, a worker that holds every earlier test's
    # objects (~110,000): a full collection there stops every thread, the simulator's too, for
    # 67-116 ms (measured here), long enough to take a goal after its stamp. The package's
    # own long-running processes keep what they hold out of those scans (core/heap.py); the
    # worker's earlier objects are kept out the same way for the test, and handed back after.
    gc.freeze()
    try:
        yield make
        for node in made:
            node.close()
    finally:
        gc.unfreeze()


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """The longest tests first (their own ``timeout`` marker, then ``slow``): with the workers
    of ``make test`` (pytest-xdist, worksteal) the long rehearsal starts at once and the short
    tests fill the other worker; the order never changes a verdict (each test sets up its own
    world)."""
    def weight(item) -> tuple:
        timeout = item.get_closest_marker("timeout")
        return (-(timeout.args[0] if timeout and timeout.args else 0),
                item.get_closest_marker("slow") is None)
    items.sort(key=weight)   # stable: the collection order within each group
