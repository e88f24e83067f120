"""One execution recorded as a bag (:class:`~mj_manipulator_ros.ros.bag_recorder.BagRecorder`).

While the arms move, the bag records the topics as they arrive (its own thread). When the
execution is over, :meth:`ExecutionRecording.finish` adds what the executor knows: each goal as
sent, and the events of the run from the report (start stamp, goal sent / accepted, the first
failure, cancel requested / acknowledged, the result and whether the stop was confirmed), each at
the time it happened, and the report itself. Nothing is added to the arm threads' work.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Callable, Mapping, Optional

from control_msgs.action import FollowJointTrajectory
from rcl_interfaces.msg import Log
from rclpy.serialization import serialize_message
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectoryPoint

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.plan_io import plan_yaml
from mj_manipulator_ros.core.report import ArmStatus, ExecutionReport
from mj_manipulator_ros.ros.bag_recorder import (
    EVENTS_TOPIC, MATCH_WAIT_S, RESERVE_BYTES, BagRecorder, arm_topics, event_message, goal_topic)


#: feedback messages per second assumed per arm for the size estimate (JTC publishes at its
#: action_monitor_rate, 20 Hz by default; the simulator at sim.feedback_rate_hz)
FEEDBACK_HZ = 50.0
#: joint-state messages per second assumed when none could be measured
JOINT_STATE_HZ = 500.0
#: bytes MCAP adds per message (record header, chunk index share)
PER_MESSAGE_BYTES = 48


def plan_text(plan: MultiArmPlan) -> str:
    """The plan as a bag keeps it: its file's YAML form, keys in the file's order
    (:func:`~mj_manipulator_ros.core.plan_io.plan_yaml`)."""
    return plan_yaml(plan)


def expected_bytes(config: ExecutorConfig, plan: MultiArmPlan, joint_state_hz: float,
                   artifacts: Mapping[str, str], text: Optional[str] = None) -> tuple[int, str]:
    """An upper estimate of a run's bag, bytes, and the figures it rests on (said in a
    refusal): the longest the run may last (lead + duration x timeout_scaling + margin), joint
    states at the measured rate (at least ``JOINT_STATE_HZ`` when none was measured), feedback
    at ``FEEDBACK_HZ`` per arm, each message at its serialized size for these arms' joints,
    twice over, plus the artifacts and the plan (each kept twice: metadata.yaml and the MCAP
    record; ``text``: the plan's :func:`plan_text` when already made)."""
    s = config.execution
    seconds = s.start_lead_s + plan.duration * s.timeout_scaling + s.timeout_margin_s
    joints = [j for a in config.arms for j in a.joint_names]
    zeros = [0.0] * len(joints)
    js = len(serialize_message(JointState(name=joints, position=zeros, velocity=zeros,
                                          effort=zeros))) + PER_MESSAGE_BYTES
    hz = joint_state_hz if joint_state_hz > 0 else JOINT_STATE_HZ
    fb = 0
    for arm in plan.arm_names:
        names = list(config.arm(arm).joint_names)
        z = [0.0] * len(names)
        point = JointTrajectoryPoint(positions=z, velocities=z, accelerations=z)
        msg = FollowJointTrajectory.Impl.FeedbackMessage()
        msg.feedback.joint_names = names
        msg.feedback.desired = msg.feedback.actual = msg.feedback.error = point
        fb += len(serialize_message(msg)) + PER_MESSAGE_BYTES
    per_second = hz * js + FEEDBACK_HZ * fb
    goals = 4 * sum(plan[a].positions.size * 8 * 3 for a in plan.arm_names)
    kept = 2 * sum(len(t.encode()) for t in artifacts.values()) + 2 * len(
        (plan_text(plan) if text is None else text).encode())
    total = int(2 * seconds * per_second + goals + kept + RESERVE_BYTES + 65536)
    how = (f"{seconds:.1f} s at most; joint states {hz:.0f}/s x {js} B, feedback "
           f"{FEEDBACK_HZ:.0f}/s per arm, {fb} B for all arms; twice that, plus "
           f"{(kept + goals) / 1e6:.2f} MB of plan, goals, config and scene")
    return total, how


def check_record_space(path: str | Path, needed: int, how: str) -> None:
    """Refuse, before anything moves, a bag that will not fit where it is to be written.

    Raises:
        ConfigError: the filesystem has less free space than ``needed`` (bytes), or the path
            cannot hold a directory (naming both figures, or the path part that is a file).
    """
    path = Path(path)
    existing = path.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"record: {path}: {existing} is a file, not a directory")
    free = shutil.disk_usage(existing).free
    if free < needed:
        raise ConfigError(
            f"record: this run's bag needs about {needed / 1e6:.2f} MB ({how}); the filesystem of "
            f"{existing} has {free / 1e6:.2f} MB free. Free space or record elsewhere "
            "(nothing was sent)")


def config_text(config: ExecutorConfig) -> str:
    """The configuration file's text (what a bag keeps), or a note when it came from no file."""
    if config.source and Path(config.source).is_file():
        return Path(config.source).read_text()
    return f"# configuration built in code (no file); arms: {list(config.arm_names)}\n"


def run_messages(report: ExecutionReport, runs: Mapping, now: float,
                 failed_at: Optional[float] = None, rate: float = 1.0,
                 to_receipt: Optional[Callable[[float], int]] = None
                 ) -> list[tuple[str, object, int]]:
    """What the executor knows of a run, as (topic, message, receipt time ns) in time order:
    each goal as sent (on its arm's goal topic) and the events of the report (start stamp, goal
    sent / accepted, cancel requested / acknowledged, each arm's result and whether its stop
    was confirmed, each controlled stop or pause asked, the first failure) on :data:`EVENTS_TOPIC`, each at the time it happened.

    Args:
        report: the execution's report.
        runs: arm -> its ArmRun (for the goals as sent).
        now: the controllers' clock now, s (maps event times to receipt times).
        failed_at: when the first failure was recorded, controllers' clock, s.
        rate: seconds of the controllers' clock per second of this machine's (sim time at
            another pace): an event ``now - t`` ago on the controllers' clock was received
            ``(now - t) / rate`` ago.
        to_receipt: a moment of the controllers' clock -> the receipt time (ns, this
            machine's clock) of the joint states stamped then (``core/clock_map.py``); None:
            by ``now`` and ``rate`` alone.
    """
    wall_ns = time.time_ns()

    def log_ns(t: float) -> int:
        if to_receipt is not None:
            return to_receipt(t)
        return wall_ns - int((now - t) / rate * 1e9)

    out: list[tuple[str, object, int]] = []
    events = []
    if report.start_stamp is not None:
        events.append((report.start_stamp, "start_stamp", "executor",
                       f"shared start stamp {report.start_stamp:.6f} s", Log.INFO))
    for arm, run in runs.items():
        for sent_at, goal in run.sent:
            out.append((goal_topic(arm), goal, log_ns(sent_at)))
    for arm, r in report.arms.items():
        for t, kind, text in ((r.goal_sent_at, "goal_sent", "goal sent"),
                              (r.accepted_at, "goal_accepted", "goal accepted"),
                              (r.cancel_requested_at, "cancel_requested", "cancel requested"),
                              (r.cancel_acknowledged_at, "cancel_acknowledged",
                               "cancel acknowledged")):
            if t is not None:
                events.append((t, kind, arm, text, Log.INFO))
        confirmed = "stop confirmed" if r.stop_confirmed else "STOP UNCONFIRMED"
        level = Log.INFO if r.status is ArmStatus.SUCCEEDED else Log.WARN
        if not r.stop_confirmed:
            level = Log.ERROR
        end = r.result_at if r.result_at is not None else now
        events.append((end, "result", arm, f"{r.status.value}: {confirmed}; error_code "
                       f"{r.error_code}; {r.error_string}".rstrip("; "), level))
    for r in report.stops:
        events.append((r.requested_at, f"{r.kind.value}_requested", "executor",
                       f"{r.kind.value} requested ({r.reason}) at plan time "
                       f"{r.plan_time_requested:.3f} s", Log.WARN))
    if report.first_failure is not None:
        f = report.first_failure
        when = failed_at if failed_at is not None else now
        events.append((when, "failure", f.arm or "executor",
                       f"first failure: {f.reason.value}: {f.error_string}", Log.ERROR))
    for t, kind, source, text, level in sorted(events, key=lambda e: e[0]):
        out.append((EVENTS_TOPIC, event_message(kind, text, source, t, level), log_ns(t)))
    return sorted(out, key=lambda m: m[2])


class ExecutionRecording:
    """Args:
        path: the bag directory (must not exist).
        context: rclpy context.
        config: the executor configuration (topics, clock; its file is kept in the bag).
        plan: the plan about to run (kept in the bag).
        artifacts: more name -> text to keep (e.g. ``scene_xml``, ``physics_step``).
        text: the plan's :func:`plan_text` when already made.
    """

    def __init__(self, path: str | Path, context, config: ExecutorConfig, plan: MultiArmPlan,
                 artifacts: Optional[Mapping[str, str]] = None,
                 text: Optional[str] = None) -> None:
        arms = [config.arm(a) for a in plan.arm_names]
        topics = [(t, JointState) for t in dict.fromkeys(a.joint_states_topic for a in arms)]
        if config.execution.use_sim_time:
            topics.append(("/clock", Clock))
        for arm in arms:
            topics += arm_topics(arm.action_name)
        written = [(goal_topic(a.name), FollowJointTrajectory.Goal) for a in arms]
        self.bag = BagRecorder(path, context, topics, written, {
            "plan": plan_text(plan) if text is None else text,
            "config": config_text(config), **(artifacts or {})},
            stamped=[t for t, cls in topics if cls is JointState])
        # before any goal: the first feedback and joint states after this are recorded
        unmatched = self.bag.wait_matched()
        if unmatched:
            self.bag.event("recording", f"subscriptions not matched after "
                           f"{MATCH_WAIT_S:g} s: {unmatched} (their first messages may be "
                           "missing)", level=Log.WARN)

    def finish(self, report: ExecutionReport, runs: Mapping, now: float,
               failed_at: Optional[float] = None, rate: float = 1.0) -> Path:
        """Write goals and events, keep the report, close the bag.

        Args:
            report: the execution's report.
            runs: arm -> its ArmRun (for the goals as sent).
            now: the controllers' clock now, s (maps event times to receipt times).
            failed_at: when the first failure was recorded, controllers' clock, s.
            rate: controllers' seconds per second of this machine's (:func:`run_messages`).
        """
        try:
            self._write_run(report, runs, now, failed_at, rate)
            self.bag.attach("report", report.to_json())
        finally:
            path = self.bag.close()  # whatever happened above: no node or thread left behind
        return path

    def _write_run(self, report: ExecutionReport, runs: Mapping, now: float,
                   failed_at: Optional[float], rate: float = 1.0) -> None:
        to_receipt = self.bag.clock_map.mapper(now, time.time_ns(), rate)
        for topic, msg, log_ns in run_messages(report, runs, now, failed_at, rate, to_receipt):
            self.bag.write(topic, msg, log_ns)

    def abandon(self) -> None:
        """Close the bag without an execution (nothing ran)."""
        self.bag.close()

    @property
    def error(self) -> Optional[str]:
        """The first write or close failure, else None."""
        return self.bag.error
