"""Shared fixtures: an isolated DDS domain per test session, a fresh rclpy Context per test,
and a check that no test leaves a thread behind."""

from __future__ import annotations

import os
import threading
import time

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Must happen before any rclpy.init(): the RMW reads these when a context starts. A domain
    # derived from the PID keeps concurrent test sessions on one machine apart; LOCALHOST keeps
    # every participant on loopback.
    os.environ["ROS_DOMAIN_ID"] = str(100 + os.getpid() % 100)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.setdefault("RCUTILS_LOGGING_BUFFERED_STREAM", "1")
    os.environ.setdefault("MUJOCO_GL", "egl")  # offscreen rendering without a display


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
    """Factory: ``scripted({arm: (behavior, after)}) -> {arm: ScriptedController}`` serving
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
            behavior, after = (spec, 0.0) if isinstance(spec, (str, Behavior)) else spec
            controllers[arm] = ScriptedController(
                node, f"/{arm}_arm_controller/follow_joint_trajectory", Behavior(behavior), after)
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


@pytest.fixture
def processes():
    """Factory starting OS processes; every one is terminated (then killed) after the test."""
    import signal
    import subprocess

    started = []

    def start(args, **kwargs):
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
        started.append(p)
        return p
    yield start
    for p in started:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in started:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
        for stream in (p.stdout, p.stderr):
            if stream:
                stream.close()
