"""One arm's side of a synchronized execution.

:class:`ArmChannel` is the arm's persistent ROS endpoint: its own node, its own single-threaded
executor, a FollowJointTrajectory action client and a guard condition to wake the executor.

:class:`ArmRun` is one execution on that channel, run in the arm's own thread. That thread both
*makes* every action request (send goal, get result, cancel) and *spins* the executor that
receives the responses. rclpy's ActionClient is racy when requests are made on one thread while
another spins (rclpy#1123: a response that arrives before the request is registered is dropped
and its future never completes); making and spinning on one thread rules the race out.

Waiting is event-driven: ``executor.spin_once`` blocks in the RMW wait set until a response,
feedback, or the guard condition (triggered by the shared :class:`CancelScope`) arrives.
The periodic wake-ups (every :data:`CHECK_PERIOD_S`) are what rclpy offers no event for: server
discovery and departure (graph queries), the controllers' clock reaching the result deadline,
and the liveness watch. A server's departure also wakes the arm at once: a subscription to the
action's status topic hears DDS say its writer left (the server's node destroyed, its process
ended), and the graph is looked at then, and every DEPARTURE_RECHECK_S for a moment after.

**Is the controller gone?** The verdict rests on evidence, never on one fixed silence:

- the action server leaves the graph (one of the action's services served by no one:
  another server of the same name coming and going is not it, :meth:`ArmChannel.server_gone`):
  ``controller_gone`` (its evidence: DDS's word that the server's status writer left, where it
  came). A namesake that stays (a second driver serving the name) hides the departure from the
  graph; the watch below and the result deadline still end the goal;
- the result deadline passes on the controllers' clock: ``timeout``;
- the watch arms on the goal's *first* feedback (a server that never sends feedback, as the
  action allows, is never failed for silence). Once armed, feedback silent for longer than
  ``max(feedback_timeout_s, SILENCE_PERIODS x its own observed period)`` sends a liveness probe: a
  CancelGoal request for a goal id that does not exist (it cancels nothing; the action server
  answers it without calling its cancel callback). An answer proves the controller alive and
  the watch starts again; no answer within ``feedback_timeout_s`` fails the arm with
  ``feedback_timeout``.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Optional

from action_msgs.msg import GoalStatus
from action_msgs.srv import CancelGoal
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from mj_manipulator_ros.core.arm_phase import ArmPhase, arm_transition
from mj_manipulator_ros.core.arm_requests import ArmRequests, Replacement
from mj_manipulator_ros.core.config import ArmConfig, ExecutionSettings
from mj_manipulator_ros.core.errors import IllegalTransitionError
from mj_manipulator_ros.core.goal_handover import HandoverJump, handover_jump
from mj_manipulator_ros.core.goal_kind import GoalKind
from mj_manipulator_ros.core.plan import ArmTrajectory
from mj_manipulator_ros.core.report import ArmReport, ArmStatus, StopKind
from mj_manipulator_ros.core.start_lead import Acceptance, AcceptanceHistory
from mj_manipulator_ros.core.sync import CancelScope, Failure, FailureReason, StartGate, StartStamp
from mj_manipulator_ros.core.tolerances import GoalTolerances
from mj_manipulator_ros.ros.conversion import fill_tolerances, time_msg, time_ns, trajectory_msg

#: Discovery poll period (s): rclpy has no event for "action server appeared".
DISCOVERY_PERIOD_S = 0.02
#: Period (s) of the checks while a goal runs: graph presence, clock deadline, liveness.
CHECK_PERIOD_S = 0.05
#: After DDS said a writer of the action's status left (:class:`ArmChannel`'s departure
#: watch), the graph is looked at this often (s) for DEPARTURE_RECHECK_FOR_S: the graph cache
#: may take the server's other endpoints' leaving a moment later
DEPARTURE_RECHECK_S = 0.002
DEPARTURE_RECHECK_FOR_S = 0.25
#: Feedback silent for this many of its own observed periods (and at least feedback_timeout_s)
#: sends a liveness probe.
SILENCE_PERIODS = 5.0
#: The result wait also ends after this many times its budget in wall time (plus
#: WALL_BACKSTOP_S): a last bound for a controllers' clock that stopped advancing.
WALL_BACKSTOP_FACTOR = 10.0
WALL_BACKSTOP_S = 10.0
#: How many ready callbacks :meth:`ArmChannel.read_delivered` serves, at most (each
#: ``spin_once(0)`` serves one; a result, a cancel answer and a few feedback messages).
DELIVERED_SPINS = 8
#: the services every action server serves (``<action>/_action/<service>``)
ACTION_SERVICES = ("send_goal", "cancel_goal", "get_result")

#: the start lead's probe (``core/start_lead.py``) waits at least this long (s, wall)
PROBE_WAIT_MIN_S = 0.05
#: after a server's discovery, a probe not answered within this long (s, wall) is sent again
SETTLE_PROBE_S = 0.05

FeedbackHook = Callable[[str, FollowJointTrajectory.Feedback], None]


def _departure_watch(node: Node, action: str, on_departure: Callable[[], None]):
    """A subscription to the action's status topic whose only use is DDS's word that one of
    its writers left (the ``matched`` event, where rclpy has it: Iron on; else ``liveliness``,
    Humble), which comes the moment the server's node is destroyed; rclpy has no event for the
    graph. Its messages are taken as bytes and dropped."""
    from action_msgs.msg import GoalStatusArray
    try:
        from rclpy.event_handler import SubscriptionEventCallbacks
    except ImportError:   # Humble
        from rclpy.qos_event import SubscriptionEventCallbacks

    def matched(info) -> None:
        if info.current_count_change < 0:
            on_departure()

    def liveliness(info) -> None:
        if info.alive_count_change < 0:
            on_departure()

    try:
        events = SubscriptionEventCallbacks(matched=matched)
    except TypeError:
        events = SubscriptionEventCallbacks(liveliness=liveliness)
    return node.create_subscription(GoalStatusArray, f"{action}/_action/status",
                                    lambda _data: None, 1, event_callbacks=events, raw=True)


class ArmChannel:
    """A persistent endpoint for one arm. Only one :class:`ArmRun` may use it at a time."""

    def __init__(self, arm: ArmConfig, node: Node) -> None:
        self.arm = arm
        self.node = node
        self.executor = SingleThreadedExecutor(context=node.context)
        self.executor.add_node(node)
        self.client = ActionClient(node, FollowJointTrajectory, arm.action_name)
        #: liveness probes go to the action's own cancel service
        self.probe = node.create_client(CancelGoal, f"{arm.action_name}/_action/cancel_goal")
        self._guard = node.create_guard_condition(lambda: None)
        #: monotonic time DDS last said a writer of the action's status topic left (the
        #: server's node destroyed, its process ended): the graph is looked at at once
        self.departed_at: float | None = None
        self._departures = _departure_watch(node, arm.action_name, self._on_departure)
        self._read_lock = threading.Lock()
        self._reads_asked: list[threading.Event] = []   # asked, not yet read
        self._reads_served: list[threading.Event] = []    # read; set once the thread is back
        #: monotonic time the server was (re)discovered; reset when it leaves the graph, so a
        #: restarted server gets discovery_settle_s again
        self.discovered_at: float | None = None
        #: the discovery time whose server has answered a probe since (its services matched
        #: both ways): its goals need no further settling; None: not yet
        self.settled_for: float | None = None
        #: this arm's recent plan goals, sending to taking (``core/start_lead.py``)
        self.acceptances = AcceptanceHistory()
        self._discovery_lock = threading.Lock()
        #: monotonic time this arm's thread last began to wait for what comes (a result read
        #: now may have arrived any time since: the thread may have been kept off the CPU)
        self.waiting_since: float = time.monotonic()

    def _on_departure(self) -> None:
        self.departed_at = time.monotonic()

    def check_period(self) -> float:
        """How long (s) a wait may go before the graph is looked at again: CHECK_PERIOD_S, or
        DEPARTURE_RECHECK_S just after a departure."""
        at = self.departed_at
        if at is not None and time.monotonic() - at < DEPARTURE_RECHECK_FOR_S:
            return DEPARTURE_RECHECK_S
        return CHECK_PERIOD_S

    def departure_since(self, t: float) -> bool:
        """Did a status writer leave after monotonic time ``t``?"""
        at = self.departed_at
        return at is not None and at > t

    def wake(self) -> None:
        """Make a blocked :meth:`spin_until` re-check its condition now (any thread)."""
        self._guard.trigger()

    def request_read(self) -> threading.Event:
        """Ask this arm's thread to read what has already been delivered to it (a result, a
        cancel's answer, feedback) and act on it (any thread). The event is set once it has:
        when the thread is back waiting (or has ended: :meth:`release_reads`)."""
        event = threading.Event()
        with self._read_lock:
            self._reads_asked.append(event)
        self._guard.trigger()
        return event

    def read_delivered(self) -> None:
        """Serve what is already ready in this arm's executor, without waiting for more (the
        arm's thread): a result that arrived is read before anything is decided on it."""
        for _ in range(DELIVERED_SPINS):
            self.executor.spin_once(timeout_sec=0.0)

    def release_reads(self) -> None:
        """Set the events of the read requests served so far (the arm's thread, once it has
        acted on what it read: back waiting, or ending)."""
        with self._read_lock:
            done, self._reads_served = self._reads_served, []
        for event in done:
            event.set()

    def _serve_reads(self) -> None:
        with self._read_lock:
            asked, self._reads_asked = self._reads_asked, []
            self._reads_served.extend(asked)
        if asked:
            self.read_delivered()

    def spin_until(self, done: Callable[[], bool], deadline: float,
                   max_block: float | None = None) -> bool:
        """Spin this arm's executor until ``done()`` or the monotonic ``deadline``, serving
        :meth:`request_read` on the way.

        Must be called from the thread that makes this arm's requests.
        Returns ``done()``.
        """
        while True:
            self.release_reads()   # what was read before has been acted on: back waiting
            self._serve_reads()
            if done():
                return True        # the caller acts first; its next wait releases the reads
            self.release_reads()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return done()
            self.waiting_since = time.monotonic()
            self.executor.spin_once(
                timeout_sec=remaining if max_block is None else min(remaining, max_block))

    def note_server(self) -> None:
        """Notice the action server between executions (any thread: the executor's discovery
        watch): its first sighting is its discovery time, so that a first goal waits only what
        is left of ``discovery_settle_s`` since then, not all of it after the goal came."""
        with self._discovery_lock:
            if self.discovered_at is None and self.client.server_is_ready():
                self.discovered_at = time.monotonic()

    def discovery_time(self) -> float:
        """When the server present now was first seen (monotonic s; now, if not before)."""
        with self._discovery_lock:
            if self.discovered_at is None:
                self.discovered_at = time.monotonic()
            return self.discovered_at

    def server_ready(self) -> bool:
        """Is a server of the action ready for a goal (rclpy's ``server_is_ready``)? Forgets
        the discovery time when it is not."""
        with self._discovery_lock:   # (the discovery watch writes it from another thread)
            ready = self.client.server_is_ready()
            if not ready:
                self.discovered_at = self.settled_for = None
            return ready

    def server_gone(self) -> bool:
        """Has the action's server left the graph: is one of its three services served by no
        one? Not being ready is not enough: ``server_is_ready`` also reads False while another
        server of the same name is discovered or removed endpoint by endpoint (Fast DDS wants
        as many request readers as response writers, and as many of each matched), for under
        a millisecond to 0.6 s (measured here: a second process serving the name starting, and
        leaving, also 20 s after it was killed, when its lease ran out), and for as long as a
        namesake's service QoS does not match this client's. Where rclpy cannot count
        services (Humble), not ready is taken as gone."""
        if self.server_ready():
            return False
        count = getattr(self.node, "count_services", None)
        if count is None:
            return True
        return min(count(f"{self.arm.action_name}/_action/{service}")
                   for service in ACTION_SERVICES) == 0

    def close(self) -> None:
        self.client.destroy()
        self.node.destroy_subscription(self._departures)
        self.node.destroy_client(self.probe)
        self.node.destroy_guard_condition(self._guard)
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()


@dataclass
class ArmRun:
    """One arm's part of one execution. Call :meth:`run` in the arm's thread, then :meth:`report`.

    Args:
        channel: the arm's endpoint.
        trajectory: the arm's trajectory (validated).
        scope: the execution's shared cancel scope.
        gate: the execution's start gate.
        settings: execution settings (timeouts in s).
        now: the controllers' clock, s (the same clock for every arm).
        duration_s: the longest arm's duration, s, for the execution timeout.
        on_feedback: called with (arm, feedback) from this arm's thread.
        tolerances: path/goal tolerances and goal time tolerance for this arm's goal.
    """

    channel: ArmChannel
    trajectory: ArmTrajectory
    scope: CancelScope
    gate: StartGate
    settings: ExecutionSettings
    now: Callable[[], float]
    duration_s: float
    on_feedback: Optional[FeedbackHook] = None
    tolerances: Optional[GoalTolerances] = None
    #: called with this arm's failure when its goal ends failed (aborted, an error code); True:
    #: handled (its peers stop along the plan), False: the scope fails (every arm canceled)
    on_goal_failed: Optional[Callable[[Failure], bool]] = None
    #: the tolerances of its replacement goals (``core/tolerances.replacement_tolerances``:
    #: ``tolerances`` with the executor's path tolerance where they set none); None: as
    #: ``tolerances``
    replacement_tolerances: Optional[GoalTolerances] = None
    #: called with (arm, the feedback message as its controller sent it) from this arm's
    #: thread before anything reads it (the black box keeps it); its exceptions are ignored
    keep_feedback: Optional[Callable[[str, object], None]] = None

    #: what happened so far (a frozen value, replaced as events arrive). Its ``status`` says
    #: only how this arm's latest goal *ended* (written when the ending is read, or said
    #: unconfirmed); while a goal runs, :meth:`report` says what an ending now would be
    out: ArmReport = field(default_factory=lambda: ArmReport(ArmStatus.NOT_SENT))
    #: a goal of this arm was accepted and its ending is not known yet (it may be moving)
    _goal_running: bool = False
    _watch: Optional["LivenessWatch"] = None
    _handle: object = None           # the accepted goal's handle, once known
    _result_future: object = None
    #: what other threads ask of this arm's thread (``core/arm_requests.py``: who wins)
    requests: ArmRequests = field(init=False, repr=False)
    retimes: int = 0                 # goals replaced by a speed change
    #: what the running goal is (``core/goal_kind.py``: what its success leaves the arm in)
    goal_kind: GoalKind = GoalKind.PLAN
    #: where the arm's part is (``core/arm_phase.py``): changed by the arm's thread only
    phase: ArmPhase = ArmPhase.IDLE
    #: every phase entered, in order, with its cause: (phase, cause)
    phases: list = field(default_factory=list)
    _feedback_failed: bool = False   # on_feedback raised: not called again
    #: every goal sent, with its send time on the controllers' clock (s): for the records
    sent: list = field(default_factory=list)
    #: the goal the controller runs (or holds the end of): (trajectory, start stamp in s)
    _running: Optional[tuple] = None
    #: for a goal its controller ended failed: since when (s, the controllers' clock) its
    #: result may have been waiting unread (the thread's last wait began then); None otherwise
    unread_since: Optional[float] = None
    #: a goal sent and never answered (what it was, said): it may be running, whatever else
    #: this arm's goals said; None when every goal sent was answered
    _unanswered: Optional[str] = None
    #: the probe's round trip just before the gate (s, controllers' clock; inf: no answer) and
    #: what this arm's goal needs to be taken (``core/start_lead.py``; None: not measured)
    probe_s: float = math.inf
    lead_need: Optional[float] = None
    #: the start stamp's lead (s), set by the run before it opens the gate
    lead_s: float = math.nan

    def __post_init__(self) -> None:
        arm = self.channel.arm
        self.requests = ArmRequests(arm.name)
        #: model name -> its controller's, and back (None: the same names): made once
        self._to_wire = arm.to_wire() if arm.driver_joint_names else None
        self._to_model = ({w: m for m, w in self._to_wire.items()} if self._to_wire else None)

    def request_retime(self, trajectory: ArmTrajectory, stamp: StartStamp,
                       kind: GoalKind = GoalKind.SPEED, departs_s: Optional[float] = None) -> None:
        """Replace the running goal by ``trajectory`` from ``stamp`` (a speed change, a
        controlled stop, a pause or a resume: ``kind``). ``departs_s``: where it departs from
        the running goal (its ramp's start, s on the controllers' clock; default the stamp): a
        controller that takes it later jumps (``core/goal_handover.py``) and the execution
        fails, ``late_acceptance``. Any thread: the arm's own thread sends it, at its next
        wake-up."""
        self.requests.replace(Replacement(trajectory, stamp, GoalKind(kind),
                                          stamp.seconds if departs_s is None else departs_s))
        self.channel.wake()

    def request_end(self) -> None:
        """A paused arm ends (STOPPED, at rest) instead of waiting for a resume. Any thread."""
        self.requests.end()
        self.channel.wake()

    def _set(self, **changes) -> None:
        """Record ``changes``; a ``status`` among them is how the running goal ended."""
        if "status" in changes:
            self._goal_running = False
        self.out = dataclasses.replace(self.out, **changes)

    def _enter(self, phase: ArmPhase, cause: str) -> None:
        """Move to ``phase`` (the arm's thread only).

        Raises:
            IllegalTransitionError: the table of ``core/arm_phase.py`` has no such move."""
        self.phase = arm_transition(self.phase, phase, cause, self.name)
        self.phases.append((phase, cause))

    @property
    def paused(self) -> bool:
        """At rest after a pause goal, waiting for the resume (any thread)."""
        return self.phase is ArmPhase.PAUSED

    @property
    def name(self) -> str:
        return self.channel.arm.name

    def _fail(self, reason: FailureReason, error_string: str, error_code: int | None = None,
              evidence_at: float | None = None) -> None:
        self.scope.fail(Failure(self.name, reason, error_code, error_string, evidence_at))

    def _gone(self, when: str) -> None:
        """Fail ``controller_gone``; its evidence is DDS's word that the server's status writer
        left, when that came (on the controllers' clock, by the time passed since), or this
        look at the graph."""
        ch = self.channel
        at = ch.departed_at
        ago = 0.0 if at is None else time.monotonic() - at
        if ago > DEPARTURE_RECHECK_FOR_S:   # an old departure: this look is the evidence
            ago = 0.0
        self._fail(FailureReason.CONTROLLER_GONE,
                   f"action server {ch.arm.action_name} left the graph {when}",
                   evidence_at=self.now() - ago)

    def run(self) -> None:
        """Discover, wait for the gate, send, wait for the result; stop when the scope cancels.
        An exception anywhere fails the scope and, if a goal is active, still cancels it."""
        try:
            self._enter(ArmPhase.DISCOVERING, "the arm's thread starts")
            self._run()
        except Exception as exc:  # noqa: BLE001 - any exception in an arm stops every arm
            text = f"{type(exc).__name__}: {exc}"
            self._fail(FailureReason.EXCEPTION, text)
            self._set(error_string=text)
        try:
            handle, result_future = self._handle, self._result_future
            # a goal that is, or may be, active is canceled and its result read: any goal
            # whose result is unread, and the running goal of an arm that was replacing it or
            # is stopping (a cancel of a goal that has ended is answered "terminated")
            if handle is not None and (
                    self.phase in (ArmPhase.REPLACING, ArmPhase.STOPPING)
                    or result_future is None or not result_future.done()):
                try:
                    if self.phase is not ArmPhase.STOPPING:
                        self._enter(ArmPhase.STOPPING, "canceled: the execution ended first"
                                    if self.scope.canceled else "its replacement failed")
                    self._stop(handle, result_future or handle.get_result_async())
                except Exception as exc:  # noqa: BLE001
                    self._set(status=ArmStatus.UNCONFIRMED_STOP, stop_confirmed=False,
                              error_string=f"stopping failed: {type(exc).__name__}: {exc}")
            if self._unanswered is not None:
                # whatever the goal canceled above said, a goal sent and never answered may
                # have been taken after it and be running
                self._set(status=ArmStatus.UNCONFIRMED_STOP, stop_confirmed=False,
                          error_string=_joined(self.out.error_string, self._unanswered))
        finally:
            self._end("the arm's part ended")
            self.channel.release_reads()

    def end_unstarted(self, why: str) -> None:
        """This arm's thread could not be started: its part ends here, nothing sent (the
        caller's thread, before any arm thread could read this run)."""
        self._set(error_string=why)
        self._end(why)

    def _end(self, cause: str) -> None:
        """Move to DONE, from any phase the table allows it from; one it does not is a bug,
        said in the report and the scope's failure, and the part still ends."""
        if self.phase is ArmPhase.DONE:
            return
        try:
            self._enter(ArmPhase.DONE, cause)
        except IllegalTransitionError as exc:
            self._fail(FailureReason.EXCEPTION, str(exc))
            self._set(error_string=_joined(self.out.error_string, str(exc)))
            self.phase = ArmPhase.DONE
            self.phases.append((ArmPhase.DONE, f"{cause} (illegal: {exc})"))

    def _run(self):
        ch, s = self.channel, self.settings
        server_ready = ch.spin_until(
            lambda: self.scope.canceled or ch.server_ready(),
            time.monotonic() + s.server_wait_s, max_block=DISCOVERY_PERIOD_S)
        if self.scope.canceled:
            return
        if not server_ready:
            self._set(error_string=f"action server {ch.arm.action_name} not available within "
                                   f"{s.server_wait_s} s")
            self._fail(FailureReason.SERVER_UNAVAILABLE, self.out.error_string)
            return
        self._settle()
        if self.scope.canceled:
            return
        # the goal message is built before the gate (a 1,401-point plan is ~1,400 Python
        # objects: tens of ms on a loaded machine, which would come out of the start lead);
        # only its stamp is set once the gate opens. Its points are the trajectory's shared
        # ones: the executor has them made while the pre-flight gate runs
        goal = self._goal(self.trajectory, None, shared=True)
        self.probe_s = self._probe_round_trip()
        if self.scope.canceled:
            return
        self.lead_need = ch.acceptances.need(len(self.trajectory.times), self.probe_s)
        self._enter(ArmPhase.AT_GATE, "the action server is there")
        self.gate.arrive(self.name)
        stamp = self.gate.wait_open(timeout=gate_wait_s(s))
        if stamp is None:
            if not self.scope.canceled:  # the gate never opened: nothing was sent anywhere
                self._fail(FailureReason.SERVER_UNAVAILABLE,
                           f"the start gate did not open within {gate_wait_s(s):.2f} s")
            return

        goal.trajectory.header.stamp = time_msg(stamp)
        self._enter(ArmPhase.SENDING, "the gate opened")
        self._running = (self.trajectory, stamp.seconds)
        self._set(goal_sent_at=self.now())
        self.sent.append((self.out.goal_sent_at, goal))
        handle = self._send_goal(goal, "goal")
        if handle is None:
            return
        if handle.accepted:
            self._handle = handle
            if self.phase is ArmPhase.SENDING:   # else stopping: run() cancels it
                self._enter(ArmPhase.RUNNING, "the goal was accepted")
        if not handle.accepted:
            self._set(status=ArmStatus.REJECTED, error_string=f"goal rejected by {ch.arm.action_name}")
            self._fail(FailureReason.GOAL_REJECTED, self.out.error_string)
            return
        # running: its ending (a result, or a stop said unconfirmed) sets the status
        read = self.now()
        taken_ns = time_ns(handle.stamp)
        self._goal_running = True
        self._set(accepted_at=read,
                  taken_at=taken_stamp(taken_ns * 1e-9 if taken_ns else None,
                                       self.out.goal_sent_at, read, s.max_clock_offset_s))
        ch.acceptances.add(Acceptance(len(self.trajectory.times), self.probe_s,
                                      (read if self.out.taken_at is None else self.out.taken_at)
                                      - self.out.goal_sent_at))
        if self.phase is ArmPhase.STOPPING:
            return   # canceled while the goal was in flight: run() cancels it
        if acceptance_lateness(stamp.seconds, self.out.taken_at, read) > 0 \
                and not s.allow_late_acceptance:
            self._fail(FailureReason.LATE_ACCEPTANCE, late_acceptance_text(
                stamp.seconds, self.out.goal_sent_at, taken_ns * 1e-9 if taken_ns else None,
                self.out.accepted_at, self.lead_s, s.max_clock_offset_s, s.start_lead_s))
        result_future = self._result_future = handle.get_result_async()
        self._await_result(result_future, stamp.seconds)

    def _await_result(self, result_future, stamp_s: float) -> None:
        """Wait for the result until the deadline on the controllers' clock, watching that the
        controller is still there (see the module docstring)."""
        ch, s = self.channel, self.settings
        budget, deadline, wall_limit = self._bounds(stamp_s)
        watch = LivenessWatch(s.feedback_timeout_s)
        self._watch = watch
        while True:
            since = time.monotonic()
            ch.spin_until(lambda: result_future.done() or self.scope.canceled
                          or watch.probe_answered() or self.requests.pending
                          or ch.departure_since(since),
                          min(wall_limit, time.monotonic() + ch.check_period()))
            if self.requests.pending and not result_future.done():
                # a result already delivered wins: a goal its controller has ended is never
                # replaced (a controlled stop sent to an arm its controller holds moves it again)
                ch.read_delivered()
            if self.requests.pending and not self.scope.canceled and not result_future.done():
                replaced = self._replace_goal(result_future)
                if replaced is None:
                    return
                result_future, stamp_s = replaced
                budget, deadline, wall_limit = self._bounds(stamp_s)
                continue
            if result_future.done():
                response = result_future.result()
                if self.goal_kind is GoalKind.PAUSE and _succeeded(response) and \
                        not self.scope.canceled:
                    resumed = self._pause_wait(result_future)
                    if resumed is None:
                        return
                    result_future, stamp_s = resumed
                    budget, deadline, wall_limit = self._bounds(stamp_s)
                    watch = self._watch = LivenessWatch(s.feedback_timeout_s)
                    continue
                self._finish(response, stopping=False)
                return
            if self.scope.canceled:
                return
            now = self.now()
            if now >= deadline or time.monotonic() >= wall_limit:
                what = f"{self.goal_kind.words}: " if self.goal_kind.ramps_to_rest else ""
                self._fail(FailureReason.TIMEOUT,
                           f"{what}no result by {budget:.2f} s after the start stamp (duration "
                           f"{self.duration_s:.2f} s x {s.timeout_scaling} + {s.timeout_margin_s} s"
                           f"{'' if now >= deadline else ', wall-clock backstop'})"
                           + ("; every arm canceled instead (hold)" if what else ""))
                return
            if ch.server_gone():
                self._gone("during the goal")
                return
            verdict = watch.check(time.monotonic(), self._send_probe)
            if verdict:
                self._fail(FailureReason.FEEDBACK_TIMEOUT,
                           f"{ch.arm.action_name}: {verdict}: the controller is presumed dead")
                return

    def _bounds(self, stamp_s: float) -> tuple[float, float, float]:
        """The running goal's result budget (s), its deadline on the controllers' clock, and
        the wall-clock backstop (monotonic)."""
        s = self.settings
        budget = self.duration_s * s.timeout_scaling + s.timeout_margin_s
        deadline = stamp_s + budget
        return budget, deadline, time.monotonic() + WALL_BACKSTOP_FACTOR * (
            deadline - self.now()) + WALL_BACKSTOP_S

    def _pause_wait(self, done_future):
        """At rest after a pause goal succeeded (no goal active): wait for the resume goal, the
        end of the execution, or ``max_pause_s``; watch that the controller stays. Returns the
        resume goal's (result future, stamp in s), or None when the arm's part has ended."""
        ch, s = self.channel, self.settings
        self._set(status=ArmStatus.STOPPED, stop=StopKind.CONTROLLED, stop_confirmed=True)
        self._enter(ArmPhase.PAUSED, "the pause's goal succeeded")
        until = time.monotonic() + s.max_pause_s
        while True:
            since = time.monotonic()
            ch.spin_until(lambda: self.scope.canceled or self.requests.pending
                          or self.requests.end_requested or ch.departure_since(since),
                          min(until, time.monotonic() + ch.check_period()))
            if self.scope.canceled or self.requests.end_requested or time.monotonic() >= until:
                self._set(result_at=self.now(), error_code=0)
                return None
            if self.requests.pending:
                replaced = self._replace_goal(done_future)
                if replaced is not None:   # a goal runs again: the pause's ending is past
                    self._set(stop=None)
                    self._goal_running = True
                return replaced
            if ch.server_gone():
                self._gone("while paused")
                return None

    def _replace_goal(self, old_future):
        """Send the retimed goal (it preempts the running one at the controller); switch to it.
        Returns (its result future, its stamp in s), or None after failing the scope."""
        ch, s = self.channel, self.settings
        # REPLACING before the slot empties: at every moment a replacement is pending or the
        # phase says it is in flight (a driver that steps physics only while no goal is in
        # flight saw neither between the take and the phase, and stepped past a pause's
        # ramp start on a loaded machine: the lockstep sequences, seed 21)
        self._enter(ArmPhase.REPLACING, f"the {self.requests.waiting.kind} goal is sent")
        # one step: a request made meanwhile stays for the next turn (core/arm_requests.py)
        taken = self.requests.take()
        trajectory, stamp, kind, departs = (taken.trajectory, taken.stamp, taken.kind,
                                            taken.departs_s)
        goal = self._goal(trajectory, stamp, replacement=True)
        sent_at = self.now()
        self.sent.append((sent_at, goal))
        # a retimed goal, once accepted, is the goal running (it preempts the old one at the
        # controller): never answered, run() still cancels the old goal (it may be the one)
        handle = self._send_goal(goal, f"{kind} goal")
        if handle is None:
            return None
        if not handle.accepted:
            if not self.scope.canceled:
                self._fail(FailureReason.GOAL_REJECTED,
                           f"{kind} goal rejected by {ch.arm.action_name}")
            return None   # the running goal is canceled by run() on the way out
        self._handle = handle
        self._result_future = handle.get_result_async()
        if self.phase is ArmPhase.STOPPING:
            return None   # canceled while it was in flight: run() cancels it
        self.duration_s = trajectory.duration
        self.goal_kind = kind
        # a goal runs (a resume's, after the pause's ending): said before the phase is
        # (another thread that sees RUNNING reads a report that says the arm may move)
        self._goal_running = True
        self._enter(ArmPhase.RUNNING, f"the {kind} goal was accepted")
        self.retimes += 1
        read = self.now()
        taken_ns = time_ns(handle.stamp)
        taken = taken_stamp(taken_ns * 1e-9 if taken_ns else None, sent_at, read,
                            s.max_clock_offset_s)
        if acceptance_lateness(departs, taken, read) > 0 and not s.allow_late_acceptance \
                and not self.scope.canceled and self._running is not None:
            jump = handover_jump(self._running, (trajectory, stamp.seconds),
                                 read if taken is None else taken, trajectory.joint_names)
            text = late_handover_text(kind, departs, sent_at, taken, read, jump, s.start_lead_s)
            if kind.ramps_to_rest:   # said; a cancel now would stop harder than the ramp
                self._set(error_string=f"{self.out.error_string}; {text}"
                          if self.out.error_string else text)
            else:
                self._fail(FailureReason.LATE_ACCEPTANCE, text)
        self._running = (trajectory, stamp.seconds)
        if self.scope.canceled:
            return None   # run() cancels the goal just adopted on the way out
        # the replaced goal ends preempted: its result is not this arm's outcome
        ch.spin_until(old_future.done, time.monotonic() + s.cancel_wait_s)
        return self._result_future, stamp.seconds

    def _send_goal(self, goal, what: str):
        """Send ``goal`` and wait (bounded: ``accept_wait_s``) for its accept/reject. Returns
        the goal handle (accepted or not), or None when it was never answered; then it may have
        been accepted and be running: the arm is ``UNCONFIRMED_STOP``. Canceled while the goal
        is in flight, or no answer in time, it waits (bounded: ``cancel_wait_s``) for the
        answer, in order to cancel the goal if it was accepted."""
        ch, s = self.channel, self.settings
        send_future = ch.client.send_goal_async(goal, feedback_callback=self._feedback)
        ch.spin_until(lambda: send_future.done() or self.scope.canceled,
                      time.monotonic() + s.accept_wait_s)
        if not send_future.done():
            if not self.scope.canceled:
                self._fail(FailureReason.NO_RESPONSE,
                           f"no accept/reject within {s.accept_wait_s} s of sending the {what}")
            # the execution ends: the goal is canceled once its answer says it was accepted
            self._enter(ArmPhase.STOPPING, f"canceled with the {what} in flight")
            if not ch.spin_until(send_future.done, time.monotonic() + s.cancel_wait_s):
                self._unanswered = (f"{what} sent but never answered: it may have been "
                                    "accepted and be running")
                self._set(status=ArmStatus.UNCONFIRMED_STOP, stop_confirmed=False,
                          error_string=_joined(self.out.error_string, self._unanswered))
                return None
        return send_future.result()

    def _settle(self) -> None:
        """After the server's discovery, until it answers a probe (a request and its answer
        through one of its services: DDS has matched its endpoints both ways, which the graph
        showing the server does not say), at most ``discovery_settle_s`` from the discovery; a
        probe unanswered after SETTLE_PROBE_S is sent again (a request sent before the match
        is not delivered). Once answered, later goals to the same discovery do not wait."""
        ch = self.channel
        discovered = ch.discovery_time()
        if ch.settled_for == discovered:
            return
        until = discovered + self.settings.discovery_settle_s
        while not self.scope.canceled and time.monotonic() < until:
            future = self._send_probe()
            ch.spin_until(lambda: future.done() or self.scope.canceled,
                          min(until, time.monotonic() + SETTLE_PROBE_S))
            if future.done():
                ch.settled_for = discovered
                return

    def _probe_round_trip(self) -> float:
        """One probe's round trip to the action server, s on the controllers' clock (bounded
        by ``start_lead_s`` of wall time, at least PROBE_WAIT_MIN_S; inf: not answered)."""
        ch = self.channel
        sent = self.now()
        future = self._send_probe()
        ch.spin_until(lambda: future.done() or self.scope.canceled,
                      time.monotonic() + max(self.settings.start_lead_s, PROBE_WAIT_MIN_S))
        return self.now() - sent if future.done() else math.inf

    def _send_probe(self):
        """A CancelGoal request for a goal id that does not exist: cancels nothing; an answer
        proves the action server alive."""
        request = CancelGoal.Request()
        request.goal_info.goal_id.uuid = list(uuid.uuid4().bytes)
        return self.channel.probe.call_async(request)

    def _stop(self, handle, result_future) -> None:
        """Cancel the active goal; wait (bounded) for the cancel response and the final result."""
        ch, s = self.channel, self.settings
        self._set(cancel_requested_at=self.now(), stop=StopKind.CANCEL)
        cancel_future = handle.cancel_goal_async()
        if ch.spin_until(cancel_future.done, time.monotonic() + s.cancel_wait_s):
            response = cancel_future.result()
            code = response.return_code
            # A refused cancel may come back as ERROR_REJECTED, or (rclpy's ActionServer) as
            # ERROR_NONE with our goal missing from goals_canceling.
            if (code == CancelGoal.Response.ERROR_NONE and response.goals_canceling) or \
                    code == CancelGoal.Response.ERROR_GOAL_TERMINATED:
                self._set(cancel_acknowledged_at=self.now())
            else:
                self._set(error_string=f"cancel refused by the controller (return code {code}, "
                                       f"{len(response.goals_canceling)} goal(s) canceling)")
        else:
            self._set(error_string=f"no cancel response within {s.cancel_wait_s} s")
        if ch.spin_until(result_future.done, time.monotonic() + s.cancel_wait_s):
            self._finish(result_future.result(), stopping=True)
        else:
            previous = self.out.error_string + "; " if self.out.error_string else ""
            self._set(status=ArmStatus.UNCONFIRMED_STOP, stop_confirmed=False,
                      error_string=previous + f"no final result within {s.cancel_wait_s} s of "
                      "the cancel: the arm may be moving")

    def _finish(self, response, stopping: bool) -> None:
        result = response.result
        read = self.now()
        if not stopping and not _succeeded(response):
            self.unread_since = read - max(0.0, time.monotonic() - self.channel.waiting_since)
        self._set(result_at=read, error_code=int(result.error_code),
                  error_string=result.error_string or self.out.error_string, stop_confirmed=True)
        if _succeeded(response):
            if self.goal_kind is GoalKind.STOP:
                self._set(status=ArmStatus.STOPPED, stop=StopKind.CONTROLLED)
            else:
                self._set(status=ArmStatus.SUCCEEDED)
            return
        if response.status == GoalStatus.STATUS_CANCELED:
            self._set(status=ArmStatus.CANCELED)
            reason = FailureReason.CANCELED
        elif response.status == GoalStatus.STATUS_SUCCEEDED:
            self._set(status=ArmStatus.ABORTED)
            reason = FailureReason.ERROR_CODE
        else:
            self._set(status=ArmStatus.ABORTED)
            reason = FailureReason.ABORTED
        if not stopping:
            text = result.error_string or f"goal ended with status {response.status}"
            failure = Failure(self.name, reason, int(result.error_code), text, read)
            if reason is not FailureReason.CANCELED and self.on_goal_failed is not None \
                    and self.on_goal_failed(failure):
                return
            self.scope.fail(failure)

    def _goal(self, trajectory: ArmTrajectory, stamp, replacement: bool = False,
              shared: bool = False) -> FollowJointTrajectory.Goal:
        """The goal message for ``trajectory`` (model names) in its controller's names; a
        ``replacement`` with :attr:`replacement_tolerances`; ``shared``: with the
        trajectory's shared points (``conversion.trajectory_points``)."""
        goal = FollowJointTrajectory.Goal()
        goal.trajectory = trajectory_msg(trajectory, stamp, self._to_wire, shared)
        tolerances = self.replacement_tolerances if replacement and \
            self.replacement_tolerances is not None else self.tolerances
        if tolerances is not None:
            fill_tolerances(goal, tolerances, self._to_wire)
        return goal

    def _feedback(self, msg) -> None:
        """Feedback (in this arm's thread, inside its executor's spin). The caller's handler
        raising fails the scope here, as any exception in an arm does, and is not called
        again: an exception escaping the spin could leave before the goal's acceptance is
        known, and an accepted goal would then never be canceled."""
        if self._watch is not None:
            self._watch.feedback(time.monotonic())
        if self.keep_feedback is not None:
            try:
                self.keep_feedback(self.name, msg)
            except Exception:  # noqa: BLE001 - a record's trouble never stops an arm
                pass
        if self.on_feedback is not None and not self._feedback_failed:
            try:
                fb = msg.feedback
                if self._to_model:   # the model's names for every reader of feedback
                    fb.joint_names = [self._to_model.get(j, j) for j in fb.joint_names]
                self.on_feedback(self.name, fb)
            except Exception as exc:  # noqa: BLE001 - any exception in an arm stops every arm
                self._feedback_failed = True
                text = f"{type(exc).__name__}: {exc}"
                self._set(error_string=text)
                self._fail(FailureReason.EXCEPTION, text)

    def report(self) -> ArmReport:
        """What this arm's part says now: how its goal ended, or, while a goal accepted has no
        known ending (the thread has not read it, or never will), ``UNCONFIRMED_STOP``: the
        arm may be moving."""
        if self._goal_running:
            return dataclasses.replace(self.out, status=ArmStatus.UNCONFIRMED_STOP,
                                       stop_confirmed=False)
        return self.out


def _joined(before: str, text: str) -> str:
    """``text`` after what was said ``before`` (once)."""
    if not before:
        return text
    return before if text in before else f"{before}; {text}"


def _succeeded(response) -> bool:
    return response.status == GoalStatus.STATUS_SUCCEEDED and response.result.error_code == 0


#: an acceptance stamp up to this long after its answer was read here is on the controllers'
#: clock read ahead of this process's lagging one (s): another clock is off by far more
STAMP_AHEAD_S = 1.0


def taken_stamp(taken_s: Optional[float], sent_s: float, read_s: float,
                max_offset_s: float) -> Optional[float]:
    """The controller's acceptance stamp (s) when it is on the controllers' clock, else None.

    A stamp before the sending by more than the clocks' allowed offset (``max_offset_s``), or
    after the reading by more than ``STAMP_AHEAD_S``, is on another clock (rclpy stamps it with
    its node's clock, which need not be the controllers' clock: an rclpy server on sim time
    whose node runs on the system clock) and is not used. After the reading it may be by more
    than the offset: this process's clock lags the controllers' (on sim time, its latest
    /clock under load), and a stamp after the reading only makes the goal later than the
    reading says: never a lateness hidden."""
    if taken_s is None or not sent_s - max_offset_s <= taken_s <= read_s + max(max_offset_s,
                                                                               STAMP_AHEAD_S):
        return None
    return taken_s


def acceptance_lateness(stamp_s: float, taken_s: Optional[float], read_s: float) -> float:
    """How long after the start stamp the controller had its goal (s; > 0: late).

    The controller's own acceptance stamp when it is on the controllers' clock (``taken_s``
    from :func:`taken_stamp`): a goal it took before the stamp starts at the stamp, however
    late its answer is read here (this process busy): nothing is late but the reading. Without
    one, the time the answer was read here (``read_s``): the controller took it no later."""
    return (read_s if taken_s is None else taken_s) - stamp_s


def late_acceptance_text(stamp_s: float, sent_s: float, taken_s: Optional[float],
                         read_s: float, lead_s: float, max_offset_s: float,
                         ceiling_s: Optional[float] = None) -> str:
    """Why a goal's acceptance came after its start stamp, from the times the executor knows
    (s on the controllers' clock): the stamp, when the goal was sent, when the controller took
    it (the acceptance's own stamp, on the controller's clock; None: not given) and when its
    answer was read here. Says when the controller took it (after the stamp: a goal taken in
    time is not late, :func:`acceptance_lateness`), or that it did not say, or said it on
    another clock (:func:`taken_stamp`: said and not used); the late reading here is then all
    that is known. ``lead_s`` below ``ceiling_s`` (``start_lead_s``) was a measured lead
    (``core/start_lead.py``): the text says which setting to raise."""
    def ms(t: float) -> str:   # relative to the stamp
        return f"{(t - stamp_s) * 1e3:+.1f} ms"
    text = (f"goal accepted {(read_s - stamp_s) * 1e3:.1f} ms after the start stamp (sent at "
            f"{ms(sent_s)}, ")
    if taken_s is None:
        text += "taken by the controller at a time it did not say"
    elif taken_stamp(taken_s, sent_s, read_s, max_offset_s) is None:
        text += (f"taken by the controller at a time not on this clock (its acceptance stamp is "
                 f"{taken_s - stamp_s:+.3f} s from the start stamp)")
    else:   # (taken in time is not late: :func:`acceptance_lateness`)
        text += (f"taken by the controller at {ms(taken_s)} on its clock: the controller took it "
                 "late (busy, or the goal reached it late)")
    if ceiling_s is not None and lead_s < ceiling_s:
        raise_it = (f"the lead, {lead_s:.3f} s, was measured from the arms' recent goals: raise "
                    f"execution.start_lead_floor_s above it, up to execution.start_lead_s, "
                    f"{ceiling_s} s")
    else:
        raise_it = f"raise execution.start_lead_s above {lead_s} s"
    return (text + f", read here at {ms(read_s)}); the arms would not start together "
            f"({raise_it})")


def late_handover_text(kind: GoalKind, departs_s: float, sent_s: float, taken_s: Optional[float],
                       read_s: float, jump: HandoverJump, lead_s: float) -> str:
    """Why a replacement goal (``kind``) was taken late: times relative to where it departs
    from the running goal (its ramp's start, s on the controllers' clock), and the jump."""
    def ms(t: float) -> str:
        return f"{(t - departs_s) * 1e3:+.1f} ms"
    when = (f"taken by the controller at {ms(taken_s)} on its clock" if taken_s is not None
            else f"its acceptance read here at {ms(read_s)} (the controller did not say when "
                 "it took it on this clock)")
    return (f"{kind} goal taken after its ramp began ({when}, sent at {ms(sent_s)}, relative "
            f"to the ramp's start): the controller joined it there and {jump.text()} (raise "
            f"execution.start_lead_s above {lead_s} s, or make the goals shorter)")


def gate_wait_s(s: ExecutionSettings) -> float:
    """How long the gate may take to open: discovery, settling, and a second of slack."""
    return s.server_wait_s + s.discovery_settle_s + 1.0


class LivenessWatch:
    """Per goal: is the controller still there? Armed by the goal's first feedback.

    Times are monotonic seconds. ``check`` returns a verdict text when the controller is
    presumed dead, else "" (it may send a probe through ``send_probe``).
    """

    def __init__(self, feedback_timeout_s: float) -> None:
        self.timeout = feedback_timeout_s
        self.count = 0
        self.last = 0.0
        self.period = 0.0            # largest observed feedback interval, s
        self._probe = None           # (future, sent_at)
        self.probes_answered = 0

    def feedback(self, now: float) -> None:
        if self.count:
            self.period = max(self.period, now - self.last)
        self.count += 1
        self.last = now

    def silence_limit(self) -> float:
        return max(self.timeout, SILENCE_PERIODS * self.period)

    def probe_answered(self) -> bool:
        return self._probe is not None and self._probe[0].done()

    def check(self, now: float, send_probe) -> str:
        if self.timeout <= 0 or self.count == 0:   # disabled, or never armed for this goal
            return ""
        if self._probe is not None:
            future, sent_at = self._probe
            if future.done() or self.last > sent_at:  # answered, or feedback came back
                self._probe = None
                self.probes_answered += 1
                self.last = now          # proof of life: the watch starts again
                return ""
            if now - sent_at > self.timeout:
                return (f"no feedback for {now - self.last:.2f} s and no answer to a liveness "
                        f"probe within {self.timeout} s")
            return ""
        if now - self.last > self.silence_limit():
            self._probe = (send_probe(), now)
        return ""
