"""A record that does not fit: refused before anything moves when the disk cannot hold the
expected bag; a disk that fills up during the run never stops the arms, the bag is closed
readable up to the failure, the report says so and is saved elsewhere (issue 29 item 5).
Filesystems of a known size are real tmpfs mounts (root; CI runs as root)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import rclpy
import yaml
from sensor_msgs.msg import JointState

from bag_reader import read_bag
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.ros.bag_recorder import (
    FREE_CHECK_S, RESERVE_BYTES, RESERVE_NAME, BagRecorder)

CLI = [sys.executable, "-m", "mj_manipulator_ros.cli"]


@pytest.fixture
def small_fs(tmp_path):
    """small_fs(bytes) -> a directory on a tmpfs of that size; unmounted after the test."""
    mounts = []

    def make(size: int) -> Path:
        where = tmp_path / f"fs{len(mounts)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs of a known size here (needs root): "
                        f"{done.stderr.strip()}")
        mounts.append(where)
        return where
    yield make
    for where in mounts:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(directory: Path) -> None:
    """Write into ``directory`` until its filesystem is full."""
    with open(directory / "filler", "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass


def test_a_full_disk_stops_the_recording_not_the_caller_and_the_bag_stays_readable(
        ros, small_fs) -> None:
    """12 MB of joint states into an 8 MB filesystem: no exception reaches the writer's caller,
    the reason is kept, the bag is closed with its metadata and reads back (rosbags and mcap)
    with the messages written before recording stopped."""
    from rosbags.highlevel import AnyReader

    fs = small_fs(8 << 20)
    bag = BagRecorder(fs / "bag", ros.context, [], [("/joint_states", JointState)], {"note": "x"})
    names = [f"j{k}" for k in range(14)]
    msg = JointState(name=names, position=[0.1] * 14, velocity=[0.0] * 14, effort=[0.0] * 14)
    written = 0
    for k in range(40000):   # ~12 MB
        bag.write("/joint_states", msg, 1_000_000_000 + k * 1_000_000)
        written += 1
        if k % 2000 == 0:
            time.sleep(FREE_CHECK_S)   # the free space is looked at every FREE_CHECK_S
    bag.close()
    assert bag.error is not None and "No space left on device" in bag.error, bag.error
    assert (fs / "bag" / "metadata.yaml").is_file()
    kept = read_bag(fs / "bag").decoded("/joint_states", JointState)
    assert 0 < len(kept) < written
    assert list(kept[0].name) == names
    with AnyReader([fs / "bag"]) as reader:
        assert sum(1 for _ in reader.messages()) == len(kept)


def cli_inputs(tmp_path: Path, duration: float) -> tuple[Path, Path]:
    from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
    from mj_manipulator_ros.core.plan_io import save_plan
    from tiny_arm import tiny_mapping
    import numpy as np

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(tiny_mapping(
        tmp_path, sim={"real_time_factor": 1.0, "use_sim_time": False,
                       "joint_state_rate_hz": 500})))
    t = np.linspace(0.0, duration, 41)
    s = np.sin(np.pi * t / duration) ** 2
    plan = MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), t, np.outer(s, [0.3, 0.0]))
                         for a in ("left", "right")})
    path = tmp_path / "plan.yaml"
    save_plan(plan, path)
    return cfg, path


def test_a_bag_that_cannot_fit_is_refused_before_anything_moves(processes, small_fs, tmp_path
                                                                ) -> None:
    """A 10 s plan, a 1 MB filesystem: exit 2 naming the figures, no bag, no goal (regression:
    the whole plan ran, then OSError: No space left on device, nothing printed, exit 1, a
    truncated bag.mcap without metadata.yaml). A record path through a file: exit 2 too."""
    cfg, plan = cli_inputs(tmp_path, 10.0)
    fs = small_fs(1 << 20)
    sim = processes([*CLI, "sim", "--config", str(cfg)])
    processes.wait_for_line(sim, "simulating arms", timeout=60)
    out = subprocess.run([*CLI, "execute", str(plan), "--config", str(cfg), "--record",
                          str(fs / "bag")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "needs about" in out.stderr and "MB free" in out.stderr and "Traceback" not in out.stderr
    assert not (fs / "bag").exists()
    (tmp_path / "a_file").write_text("")
    out = subprocess.run([*CLI, "execute", str(plan), "--config", str(cfg), "--record",
                          str(tmp_path / "a_file" / "bag")], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and "is a file, not a directory" in out.stderr, out.stderr
    sim.send_signal(__import__("signal").SIGINT)
    sim.wait(timeout=30)
    assert "goal received" not in "".join(sim.stderr_seen)


def test_a_disk_that_fills_during_the_run(processes, small_fs, tmp_path) -> None:
    """The bag fits when the run starts; then the disk fills. The run goes on and succeeds, the
    report (printed) says the record failed, is saved elsewhere, and the exit code is 4."""
    import threading
    import time

    cfg, plan = cli_inputs(tmp_path, 5.0)
    fs = small_fs(8 << 20)
    sim = processes([*CLI, "sim", "--config", str(cfg)])
    processes.wait_for_line(sim, "simulating arms", timeout=60)
    proc = subprocess.Popen([*CLI, "execute", str(plan), "--config", str(cfg), "--json",
                             "--record", str(fs / "bag")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    filled = threading.Event()

    def fill_once_recording() -> None:
        reserve = fs / "bag" / RESERVE_NAME    # the recording has started
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                reserve.exists() and reserve.stat().st_size == RESERVE_BYTES):
            time.sleep(0.01)
        time.sleep(0.5)
        fill(fs)
        filled.set()
    t = threading.Thread(target=fill_once_recording)
    t.start()
    stdout, stderr = proc.communicate(timeout=120)
    t.join(60)
    assert filled.is_set()
    assert proc.returncode == 4, stdout + stderr
    report = json.loads(stdout)
    assert report["status"] == "succeeded"
    assert "No space left on device" in report["record_error"]
    saved = stderr.split("report saved to ")[-1].split()[0]
    assert json.loads(Path(saved).read_text())["record_error"] == report["record_error"]
    Path(saved).unlink()
