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
