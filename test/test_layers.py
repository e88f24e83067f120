"""The core never imports rclpy or ROS message packages (checked in a fresh interpreter)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import mj_manipulator_ros.core as core

ROS_MODULES = ("rclpy", "control_msgs", "trajectory_msgs", "sensor_msgs", "builtin_interfaces",
               "action_msgs", "rosgraph_msgs", "std_msgs")


def test_core_imports_no_ros() -> None:
    modules = [f"mj_manipulator_ros.core.{m.name}" for m in pkgutil.iter_modules(core.__path__)]
    assert modules, "the core package has no modules to check"
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {ROS_MODULES!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"core imported ROS modules: {out.stdout.strip()}"
