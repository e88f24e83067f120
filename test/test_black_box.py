"""The black box (ros/black_box.py): always recording, written on a failure without --record,
read back with an independent reader (test/bag_reader.py: mcap, mcap_ros2, rclpy, and rosbags'
AnyReader on every message); a file cut mid-write by a killed process read up to the cut."""

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
from control_msgs.action import FollowJointTrajectory

from bag_reader import read_bag
from mj_manipulator_ros.core.report import ArmStatus, ExecutionStatus, FailureReason
from mj_manipulator_ros.ros.bag_file import BagFile, read_cut, recover
from mj_manipulator_ros.ros.bag_recorder import EVENTS_TOPIC, FEEDBACK
from mj_manipulator_ros.ros.black_box import PREFIX, Ring
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from rcl_interfaces.msg import Log
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState
from plan_moment import at_plan_time
from test_execution_watch import swing_plan
from tiny_arm import tiny_config

WINDOW_S = 1.0
ACTION = "/{}_arm_controller/follow_joint_trajectory"


def wait_full(executor: MultiArmExecutor) -> None:
    """Until the black box has kept messages for a whole window (its subscriptions matched:
    DDS discovery, longer on a loaded machine), bounded."""
    deadline = time.monotonic() + 20.0
    ring = executor.black_box.ring
    while ring.first_ns is None or time.time_ns() - ring.first_ns < ring.window_ns:
        assert time.monotonic() < deadline, "the black box received nothing for 20 s"
        time.sleep(0.02)


def _joint_states(bag) -> list[tuple[int, JointState]]:
    return [(t, m) for (topic, t, _), m in zip(bag.on("/joint_states"),
                                                bag.decoded("/joint_states", JointState))]


def test_a_failure_leaves_a_file_no_one_asked_for(tiny_sim, ros, tmp_path) -> None:
    """The left arm's goal aborts mid-swing (simulator fault), no --record: the report names a
    black box file holding the window before the failure, every arm until at rest after it,
    the goals and events, plan, config and report; every message deserializes. A second
    failure with black_box_keep 1 leaves only its own file (a file not the black box's stays)."""
    tiny_sim(left={"abort_after_s": 0.9})
    box = tmp_path / "box"
    box.mkdir()
    (box / "notes.mcap").write_text("not the black box's")
    config = tiny_config(tmp_path, execution={
        "use_sim_time": True, "black_box_s": WINDOW_S, "black_box_dir": str(box),
        "black_box_keep": 1}).executor
    with MultiArmExecutor(config, context=ros.context) as executor:
        wait_full(executor)
        report = executor.execute(swing_plan())
        assert report.first_failure is not None and report.first_failure.arm == "left", \
            report.summary()
        assert report.first_failure.reason is FailureReason.ABORTED
        assert report.black_box_path and f"black box: {report.black_box_path}" in report.summary()
        assert executor.black_box.wait_written(15.0), "the black box's writer did not end"
        assert executor.black_box.last_error is None, executor.black_box.last_error
        first = Path(report.black_box_path)
        box_rest = executor.black_box.last_rest
        bag = read_bag(first)
        second = executor.execute(swing_plan(), approach=True)
        assert executor.black_box.wait_written(15.0)
    # rotation: only the newest of its own files, the foreign file untouched
    assert sorted(p.name for p in box.iterdir()) == sorted(
        ["notes.mcap", Path(second.black_box_path).name])
    assert Path(second.black_box_path).name.startswith(PREFIX)

    # the report and the plan inside; the report names this very file
    inside = json.loads(bag.attachments["report"])
    assert inside["black_box_path"] == str(first) and inside["status"] == report.status.value
    assert "arms:" in bag.attachments["plan"] and "arms" in bag.attachments["config"]
    # events: the failure among them, at the time the executor recorded it
    events = [(t, m) for (_, t, _), m in zip(bag.on(EVENTS_TOPIC), bag.decoded(EVENTS_TOPIC, Log))]
    failure = [t for t, m in events if m.function == "failure"]
    assert len(failure) == 1, [m.function for _, m in events]
    results = [t for t, m in events if m.function == "result"]
    assert len(results) == 2
    # the window: joint states from black_box_s before the failure (the first kept is the
    # first at or after the window's start), to every arm at rest after the last result
    states = _joint_states(bag)
    times = np.array([t for t, _ in states]) * 1e-9
    gap = float(np.max(np.diff(times)))   # the first kept is within the stream's gap there
    assert times[0] <= failure[0] * 1e-9 - WINDOW_S + gap, (times[0], failure[0] * 1e-9, gap)
    assert times[-1] >= max(results) * 1e-9, (times[-1], max(results) * 1e-9, box_rest)
    last = [t for t, _ in states if t >= states[-1][0] - 0.1e9]
    end = np.array([m.position for t, m in states if t in set(last)])
    assert np.abs(end - end[-1]).max() <= 1e-4, f"the file ends before the arms are at rest " \
        f"({box_rest})"
    assert any(m.function == "black_box" and m.msg.startswith("every arm at rest")
               for _, m in events), [m.msg for _, m in events if m.function == "black_box"]
    # goals as sent and the feedback of both arms
    goals = bag.decoded("/mj_manipulator/left/goal", FollowJointTrajectory.Goal)
    assert goals and list(goals[0].trajectory.joint_names) == \
        list(config.arm("left").joint_names)
    for arm in ("left", "right"):
        assert bag.on(f"{ACTION.format(arm)}/_action/feedback"), arm
        assert bag.decoded(f"{ACTION.format(arm)}/_action/feedback", FEEDBACK)
    assert report.arms["right"].status in (ArmStatus.STOPPED, ArmStatus.CANCELED)


@pytest.mark.parametrize("kind", ["watch", "operator"])
def test_a_watch_trip_and_an_operator_stop_leave_their_files(kind, tiny_sim, ros,
                                                           tmp_path) -> None:
    """The other kinds of failure after motion: the watch trips (the left controller stops
    following mid-swing: ``freeze``) and an operator's stop (``MultiArmExecutor.stop``), each
    at a seeded random moment: a file with the window before the failure and every arm at rest
    after it."""
    at = float(np.random.default_rng(11 if kind == "watch" else 12).uniform(0.4, 1.2))
    node = tiny_sim()
    config = tiny_config(tmp_path, execution={
        "use_sim_time": True, "black_box_s": WINDOW_S,
        "black_box_dir": str(tmp_path / "box")}).executor
    with MultiArmExecutor(config, context=ros.context) as executor:
        wait_full(executor)

        thread = at_plan_time(executor, at, (lambda: node.set_faults("left", freeze=True))
                              if kind == "watch" else
                              (lambda: executor.stop("operator stop (test)")))
        report = executor.execute(swing_plan())
        thread.join(25.0)
        assert executor.black_box.wait_written(15.0)
        assert executor.black_box.last_error is None, executor.black_box.last_error
    f = report.first_failure
    if kind == "watch":
        assert f is not None and f.reason in (FailureReason.PROGRESS_SKEW,
                                              FailureReason.TRACKING_ERROR), report.summary()
    else:   # a controlled stop: no failure, the stop's request is the moment
        assert report.status is ExecutionStatus.STOPPED and f is None, report.summary()
        assert "operator" in report.stops[0].reason
    bag = read_bag(Path(report.black_box_path))
    events = [(t, m) for (_, t, _), m in zip(bag.on(EVENTS_TOPIC), bag.decoded(EVENTS_TOPIC, Log))]
    # the moment it went wrong: the earliest of the failure and the first stop's request (a
    # watch trip stops the arms first; regression: the window was anchored on the scope's
    # failure, which a frozen arm's unconfirmed stop brought seconds later)
    failure = min(t for t, m in events if m.function in ("failure", "stop_requested")) * 1e-9
    states = _joint_states(bag)
    times = np.array([t for t, _ in states]) * 1e-9
    # the first message kept is the first at or after the window's start: within the
    # stream's gap there (the largest gap of the stream bounds it)
    assert times[0] <= failure - WINDOW_S + float(np.max(np.diff(times))), \
        (times[0], failure)
    assert times[-1] >= max(t for t, m in events if m.function == "result") * 1e-9
    end = np.array([m.position for t, m in states if t >= states[-1][0] - 0.1e9])
    assert np.abs(end - end[-1]).max() <= 1e-4, "the file ends before the arms are at rest"
    assert json.loads(bag.attachments["report"])["status"] == report.status.value


def test_success_writes_nothing_and_zero_turns_it_off(tiny_sim, ros, tmp_path) -> None:
    tiny_sim(left={"abort_after_s": 0.5})
    box = tmp_path / "box"
    config = tiny_config(tmp_path, execution={"use_sim_time": True, "black_box_s": 0.0,
                                              "black_box_dir": str(box)}).executor
    with MultiArmExecutor(config, context=ros.context) as executor:
        assert executor.black_box is None
        report = executor.execute(swing_plan())
    assert report.first_failure is not None and report.black_box_path is None
    assert not box.exists()


def test_the_ring_keeps_the_window_the_pin_and_the_byte_bound() -> None:
    """Against a plain list filter: the window, a pin holding older messages, the byte cap
    dropping the oldest first and counting them."""
    rng = np.random.default_rng(7)
    ring = Ring(window_ns=1_000, max_bytes=10**9)
    every = []
    t = 0
    for k in range(2_000):
        t += int(rng.integers(1, 20))
        data = bytes(int(rng.integers(1, 50)))
        if k == 1_000:
            ring.pin(t - 500)
            pinned = t - 500
        if k == 1_500:
            ring.unpin(pinned)
        every.append((t, "a", data))
        ring.add(t, "a", data)
        if k < 1_000 or k >= 1_500:
            want = [m for m in every if m[0] >= t - 1_000]
        else:
            want = [m for m in every if m[0] >= min(t - 1_000, pinned)]
        assert ring.since(0) == want, k
    capped = Ring(window_ns=10**12, max_bytes=10 * (100 + 120))
    for k in range(25):
        capped.add(k, "a", bytes(100))
    assert [m[0] for m in capped.since(0)] == list(range(15, 25)) and capped.dropped == 15


WRITER = r"""
import sys, time
import mj_manipulator_ros
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState
from mj_manipulator_ros.ros.bag_file import BagFile
from mj_manipulator_ros.ros.bag_types import BagTypes
types = BagTypes.shared()
name = "sensor_msgs/msg/JointState"
bag = BagFile(sys.argv[1], {"/joint_states": name}, {"plan": "arms: {}\n"})
k = 0
while True:   # until killed
    m = JointState(name=[f"j{i}" for i in range(14)], position=[k * 1e-3] * 14)
    m.header.stamp.sec = k
    bag.write("/joint_states", 10**9 + k * 10**6, types.exact_cdr(name, serialize_message(m)))
    k += 1
    if k % 200 == 0:
        time.sleep(0.001)
"""


def test_a_file_cut_by_a_killed_writer_reads_up_to_the_cut(tmp_path) -> None:
    """A process writing a black box file is killed (SIGKILL) mid-write: its complete chunks
    read (every message, in order, deserializing), no footer (rosbags' reader refuses the cut
    file), and recover() writes them into a file every reader opens."""
    from rosbags.highlevel import AnyReader

    path = tmp_path / "cut.mcap"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
    try:
        deadline = time.monotonic() + 60.0
        while (not path.exists() or path.stat().st_size < 600_000) and proc.poll() is None:
            assert time.monotonic() < deadline, "the writer wrote too little in 60 s"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL, "the writer ended before it was killed"
    records = list(read_cut(path))
    messages = [r for kind, _, r in records if kind == "message"]
    stamps = [JointStateFrom(r.data).header.stamp.sec for r in messages]
    assert len(messages) > 1_000 and stamps == list(range(len(stamps)))
    assert any(kind == "attachment" and key == "plan" for kind, key, _ in records)
    with pytest.raises(Exception):
        with AnyReader([path]):
            pass
    fixed = tmp_path / "recovered.mcap"
    assert recover(path, fixed) == {"/joint_states": len(messages)}
    bag = read_bag(fixed)
    assert [m.header.stamp.sec for m in bag.decoded("/joint_states", JointState)] == stamps
    assert bag.attachments["plan"] == "arms: {}\n"


def JointStateFrom(raw: bytes) -> JointState:  # noqa: N802 - reads like the type it makes
    from rclpy.serialization import deserialize_message
    return deserialize_message(raw, JointState)


def test_a_whole_file_is_a_bag_every_reader_opens(tmp_path) -> None:
    from rclpy.serialization import serialize_message

    from mj_manipulator_ros.ros.bag_types import BagTypes

    types = BagTypes.shared()
    name = "sensor_msgs/msg/JointState"
    bag = BagFile(tmp_path / "whole.mcap", {"/joint_states": name}, {"config": "arms: []\n"})
    for k in range(300):
        m = JointState(name=["a"], position=[float(k)])
        bag.write("/joint_states", 10**9 + k, types.exact_cdr(name, serialize_message(m)))
    bag.attach("report", json.dumps({"status": "failed"}))
    bag.close()
    read = read_bag(tmp_path / "whole.mcap")
    assert [m.position[0] for m in read.decoded("/joint_states", JointState)] == \
        [float(k) for k in range(300)]
    assert json.loads(read.attachments["report"]) == {"status": "failed"}
    with pytest.raises(Exception, match="exists"):
        BagFile(tmp_path / "whole.mcap", {"/joint_states": name})


def test_the_file_waits_while_an_execution_is_in_motion(ros, tmp_path) -> None:
    """A file due while another execution is in motion is not written until that motion ends
    (the writer's Python work would delay the arms' threads: their cancels); then it is."""
    import rclpy

    from mj_manipulator_ros.core.report import ExecutionReport
    from mj_manipulator_ros.ros.black_box import BlackBox

    config = tiny_config(tmp_path, execution={"black_box_s": 1.0, "black_box_after_s": 0.0,
                                              "black_box_dir": str(tmp_path / "box")}).executor
    node = rclpy.create_node("black_box_defer", context=ros.context)
    box = BlackBox(node, config, lambda joints, window: None)
    try:
        now = time.time_ns()
        for k in range(50):
            box.ring.add(now - 10**9 + k * 10**7, "/joint_states", bytes(40))
        report = ExecutionReport(ExecutionStatus.FAILED, None, None)
        with box.in_motion():
            path = box.dump(report, swing_plan(), {}, 0.0, 0.0)
            assert not box.wait_written(0.5), "written while an execution was in motion"
            assert not path.exists() or path.stat().st_size < 4096
        assert box.wait_written(10.0) and box.last_error is None, box.last_error
        assert path.stat().st_size > 4096
    finally:
        box.close()
        node.destroy_node()


def test_a_buzzing_joint_is_not_at_rest_and_a_still_one_is(ros, tmp_path) -> None:
    """The file ends once every arm is at rest: no joint moved more than REST_TOLERANCE over
    REST_WINDOW_S of its readings, judged on every reading (real DDS, the executor's own
    JointStateMonitor). Regression: rest was two polled samples about a window apart, so a
    joint whose readings alternate 0 / 5x the tolerance at 200 Hz (never at rest) was called
    at rest as soon as two polls read the same phase (and a loaded machine's file ended with
    a joint still settling, 1.4e-4 rad over its last 0.113 s)."""
    import threading

    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from mj_manipulator_ros.core.report import ExecutionReport
    from mj_manipulator_ros.ros.black_box import REST_TOLERANCE, BlackBox
    from mj_manipulator_ros.ros.joint_state_monitor import JointStateMonitor

    config = tiny_config(tmp_path, execution={"black_box_s": 1.0, "black_box_after_s": 1.0,
                                              "black_box_dir": str(tmp_path / "box")}).executor
    topic = config.arms[0].joint_states_topic
    joints = [j for a in config.arms for j in a.joint_names]
    node = rclpy.create_node("black_box_rest", context=ros.context)
    monitor = JointStateMonitor(node, [topic], time.time)
    publisher = node.create_publisher(JointState, topic, 50)
    spin = SingleThreadedExecutor(context=ros.context)
    spin.add_node(node)
    stop, buzz = threading.Event(), threading.Event()
    buzz.set()

    def spin_until_stopped() -> None:
        while not stop.is_set():
            spin.spin_once(0.01)
    spinner = threading.Thread(target=spin_until_stopped, name="test-spin")

    def publish() -> None:
        k = 0
        while not stop.is_set():
            msg = JointState(name=joints, position=[5 * REST_TOLERANCE * (k % 2 if
                                                                          buzz.is_set() else 0)
                                                    ] * len(joints))
            publisher.publish(msg)
            k += 1
            time.sleep(0.005)
    publishing = threading.Thread(target=publish, name="test-publish")
    box = BlackBox(node, config, monitor.motion)
    spinner.start()
    publishing.start()
    try:
        assert monitor.wait_for(joints, 10.0) is not None, "no joint states came"
        time.sleep(0.3)
        report = ExecutionReport(ExecutionStatus.FAILED, None, None)
        box.dump(report, swing_plan(), {}, 0.0, 0.0)
        assert box.wait_written(15.0) and box.last_error is None, box.last_error
        assert box.last_rest.startswith("not every arm at rest 1 s"), box.last_rest
        buzz.clear()
        box.dump(report, swing_plan(), {}, 0.0, 0.0)
        assert box.wait_written(15.0) and box.last_error is None, box.last_error
        assert box.last_rest.startswith("every arm at rest"), box.last_rest
    finally:
        stop.set()
        publishing.join(5.0)
        spinner.join(5.0)
        box.close()
        spin.shutdown()
        node.destroy_node()
    assert not publishing.is_alive() and not spinner.is_alive()


#: a joint state's reading held this long (s) in the executor's process: slower than the
#: tiny simulator's stream at 2x, so a backlog of unread messages builds up (to the
#: subscription's depth), as on a loaded machine
READING_DELAY_S = 0.004


def slow_readings(executor: MultiArmExecutor) -> None:
    """Every joint state's reading in the executor's process held READING_DELAY_S: a backlog
    of unread messages builds up, as on a loaded machine."""
    keep = executor.monitor.raw_sink

    def slow_reading(*message) -> None:
        keep(*message)
        time.sleep(READING_DELAY_S)
    executor.monitor.raw_sink = slow_reading


@pytest.mark.parametrize("backlog", [False, True], ids=["idle", "reading_backlog"])
def test_events_are_placed_on_this_machines_clock_when_sim_time_runs_faster(
        ros, tmp_path, backlog) -> None:
    """The simulator at 2x real time (sim time): the executor's events, on the controllers'
    clock, land in the file at the receipt time of the joint states stamped at that moment
    (regression: mapped one to one, an event a second of sim time back landed a whole second
    back on this machine's clock, where half a second had passed). With a backlog of unread
    joint states (each reading held READING_DELAY_S in the executor's process from the start
    stamp on, as a loaded machine does: CI placed an event 168 ms before the states stamped
    then, when events were placed by the clocks' rate alone) the events still land among the
    states stamped then."""
    from mj_manipulator_ros.sim.sim_node import SimNode

    node = SimNode(tiny_config(tmp_path, sim={"real_time_factor": 2.0, "faults": {}}),
                   context=ros.context).start()
    try:
        config = tiny_config(tmp_path, execution={
            "use_sim_time": True, "black_box_s": WINDOW_S,
            "black_box_dir": str(tmp_path / "box")}).executor
        with MultiArmExecutor(config, context=ros.context) as executor:
            wait_full(executor)
            # the backlog from the moment the start stamp is chosen: during the start check it
            # would (rightly) refuse the start on a loaded machine, no clock offset estimable
            # from states read late (CI beside a busy loop), before any event is placed
            threads = [at_plan_time(executor, -1e3, lambda: slow_readings(executor))] \
                if backlog else []
            threads.append(at_plan_time(executor, 0.6,
                                        lambda: executor.stop("operator (test)")))
            try:
                report = executor.execute(swing_plan())
            finally:
                for thread in threads:
                    thread.join(25.0)
            assert executor.black_box.wait_written(15.0), executor.black_box.last_error
        assert report.stops, report.summary()
        requested = report.stops[0].requested_at
        bag = read_bag(Path(report.black_box_path))
        events = [(t, m) for (_, t, _), m in zip(bag.on(EVENTS_TOPIC),
                                                 bag.decoded(EVENTS_TOPIC, Log))]
        placed = [t for t, m in events if m.function == "stop_requested"][0] * 1e-9
        states = _joint_states(bag)
        stamps = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9
                           for _, m in states])
        k = int(np.argmin(np.abs(stamps - requested)))
        received = states[k][0] * 1e-9
        # within a few of the stream's periods (its receipt lags its stamp by transport)
        assert abs(placed - received) < 0.05, (placed - received, requested, stamps[k])
    finally:
        node.close()


def test_the_window_reaches_back_from_the_failure_where_the_file_places_it(ros, tmp_path
                                                                           ) -> None:
    """The controllers' clock read 50 ms stale when the failure was recorded (a /clock
    reading starved on a loaded machine): the failure lands in the file where the joint states
    stamped at its evidence were received, 50 ms before this machine's clock says it was
    recorded; the window still reaches ``black_box_s`` back from where it lands (regression:
    it reached back from this machine's clock only, 50 ms short before the file's failure
    event; CI 2026-12-07)."""
    import rclpy

    from mj_manipulator_ros.core.report import ExecutionReport
    from mj_manipulator_ros.core.sync import Failure
    from mj_manipulator_ros.ros.bag_types import BagTypes
    from mj_manipulator_ros.ros.black_box import BlackBox

    def exact(cls, msg) -> bytes:   # the bytes a subscription hands over (no padding)
        return BagTypes.shared().exact_cdr("sensor_msgs/msg/JointState", serialize_message(msg))

    config = tiny_config(tmp_path, execution={"black_box_s": WINDOW_S, "black_box_after_s": 0.0,
                                              "black_box_dir": str(tmp_path / "box")}).executor
    node = rclpy.create_node("black_box_window", context=ros.context)
    box = BlackBox(node, config, lambda joints, window: None)
    try:
        # 3 s of joint states at 250 Hz, stamped s0 + k / 250, each received 1 ms after its stamp
        period, stale = 0.004, 0.05
        s0 = 100.0
        data = []
        for k in range(750):
            msg = JointState(name=["left_j1"], position=[0.0])
            stamp = s0 + k * period
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp), int(stamp % 1 * 1e9)
            data.append((stamp, exact(JointState, msg)))
        wall0 = time.time_ns() - 3 * 10**9
        box.ring.pin(wall0)               # an execution's hold, from before its start
        for k, (stamp, raw) in enumerate(data):
            box.keep("/joint_states", raw, wall0 + int((k * period + 0.001) * 1e9), stamp)
        evidence = s0 + 2.5               # stamped 0.5 s ago
        now = s0 + 3.0 - stale            # the controllers' clock as read, 50 ms stale
        failure = Failure("left", FailureReason.ABORTED, evidence_at=evidence)
        report = ExecutionReport(ExecutionStatus.FAILED, None, failure)
        path = box.dump(report, swing_plan(), {}, now, now - evidence, held=wall0)
        assert box.wait_written(10.0) and box.last_error is None, box.last_error
    finally:
        box.close()
        node.destroy_node()
    bag = read_bag(path)
    events = [(t, m) for (_, t, _), m in zip(bag.on(EVENTS_TOPIC), bag.decoded(EVENTS_TOPIC, Log))]
    placed = [t for t, m in events if m.function == "failure"][0] * 1e-9
    times = np.array([t for t, _ in _joint_states(bag)]) * 1e-9
    assert abs(placed - (wall0 * 1e-9 + 2.501)) < 0.002, "placed at its evidence's receipt"
    gap = float(np.max(np.diff(times)))   # the first kept is within the stream's gap there
    assert times[0] <= placed - WINDOW_S + gap, (times[0] - (placed - WINDOW_S), gap)
