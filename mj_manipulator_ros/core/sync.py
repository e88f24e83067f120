"""Synchronisation primitives shared by the per-arm threads of one execution.

- :class:`StartStamp`: the one start time every arm's goal carries, computed once.
- :class:`CancelScope`: the first failure wins; every waiter and callback is woken at once.
- :class:`StartGate`: arms report ready; the coordinator opens the gate with the stamp.

All waits are event-driven (Condition/Event) and bounded by a timeout; nothing here polls.
"""

from __future__ import annotations

import contextlib
import enum
import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional


@dataclass(frozen=True)
class StartStamp:
    """A start time on the controllers' clock, in integer nanoseconds."""

    nanoseconds: int

    @classmethod
    def after(cls, now_ns: int, lead_s: float) -> "StartStamp":
        """``now + lead`` (now in ns on the controllers' clock, lead in s)."""
        return cls(int(now_ns) + int(round(lead_s * 1e9)))

    @property
    def seconds(self) -> float:
        return self.nanoseconds * 1e-9

    @property
    def sec_nanosec(self) -> tuple[int, int]:
        """(sec, nanosec) as in builtin_interfaces/Time."""
        return divmod(self.nanoseconds, 1_000_000_000)


class FailureReason(str, enum.Enum):
    """Why an execution stopped early."""

    GOAL_REJECTED = "goal_rejected"
    ABORTED = "aborted"
    CANCELED = "canceled"               # canceled by someone other than this executor
    ERROR_CODE = "error_code"           # a result with error_code != 0
    SERVER_UNAVAILABLE = "server_unavailable"
    NO_RESPONSE = "no_response"         # goal sent, no accept/reject within accept_wait_s
    LATE_ACCEPTANCE = "late_acceptance"  # accepted after the start stamp had passed
    TIMEOUT = "timeout"
    FEEDBACK_TIMEOUT = "feedback_timeout"  # feedback stopped and a liveness probe went unanswered
    CONTROLLER_GONE = "controller_gone"    # the action server left the graph during the goal
    TRACKING_ERROR = "tracking_error"      # a joint strayed beyond its path tolerance
    PROGRESS_SKEW = "progress_skew"        # two arms out of step beyond max_progress_skew_s
    JOINT_STATES_STALE = "joint_states_stale"      # a watched joint stopped being reported
    JOINT_STATES_INVALID = "joint_states_invalid"  # a watched joint reported NaN or infinity
    VELOCITY_LIMIT = "velocity_limit"      # a joint measured faster than its limit (with margin)
    EXCEPTION = "exception"
    EXTERNAL_ABORT = "external_abort"   # abort() or Ctrl-C
    CLOCK_UNAVAILABLE = "clock_unavailable"


@dataclass(frozen=True)
class Failure:
    """The first failure of an execution. ``arm`` is None for an external abort."""

    arm: Optional[str]
    reason: FailureReason
    error_code: Optional[int] = None
    error_string: str = ""
    #: when its first evidence reached this process (the executor's clock, s): a failed goal's
    #: result read, the joint-state message that crossed a bound, the moment a stream went
    #: stale; None where there is none to point at (an operator's abort, an exception)
    evidence_at: Optional[float] = None

    def to_dict(self) -> dict:
        return {"arm": self.arm, "reason": self.reason.value, "error_code": self.error_code,
                "error_string": self.error_string, "evidence_at": self.evidence_at}


class CancelScope:
    """Records the first failure and wakes everybody waiting on the scope.

    Thread-safe. Callbacks registered with :meth:`on_cancel` run exactly once, in the thread that
    recorded the first failure (or immediately, if the scope is already canceled); they must be
    quick and must not block (e.g. set an Event, trigger a guard condition).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._failure: Failure | None = None
        self._callbacks: list[Callable[[], None]] = []
        self.canceled_at_monotonic: float | None = None

    def fail(self, failure: Failure) -> bool:
        """Record a failure. Returns True if it is the first (and so the one reported)."""
        with self._lock:
            if self._failure is not None:
                return False
            self._failure = failure
            self.canceled_at_monotonic = time.monotonic()
            callbacks, self._callbacks = self._callbacks, []
        self._event.set()
        for cb in callbacks:
            cb()
        return True

    def on_cancel(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if self._failure is None:
                self._callbacks.append(callback)
                return
        callback()

    @property
    def canceled(self) -> bool:
        return self._event.is_set()

    @property
    def failure(self) -> Failure | None:
        return self._failure

    def wait(self, timeout: float) -> bool:
        """Block until canceled or ``timeout`` s passed. Returns True if canceled."""
        return self._event.wait(timeout)


class StartGate:
    """Arms arrive when ready to send; the coordinator opens the gate with the start stamp.

    Canceling the scope wakes every waiter: :meth:`wait_all_arrived` returns False and
    :meth:`wait_open` returns None.
    """

    def __init__(self, arms: Iterable[str], scope: CancelScope) -> None:
        self._expected = set(arms)
        self._arrived: set[str] = set()
        self._stamp: StartStamp | None = None
        self._cond = threading.Condition()
        self._scope = scope
        scope.on_cancel(self._wake)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def arrive(self, arm: str) -> None:
        with self._cond:
            self._arrived.add(arm)
            self._cond.notify_all()

    def wait_all_arrived(self, timeout: float) -> bool:
        with self._cond:
            self._cond.wait_for(
                lambda: self._scope.canceled or self._arrived >= self._expected, timeout)
            return not self._scope.canceled and self._arrived >= self._expected

    def open(self, stamp: StartStamp) -> None:
        with self._cond:
            self._stamp = stamp
            self._cond.notify_all()

    def wait_open(self, timeout: float) -> StartStamp | None:
        with self._cond:
            self._cond.wait_for(lambda: self._scope.canceled or self._stamp is not None, timeout)
            return None if self._scope.canceled else self._stamp

    @property
    def missing(self) -> list[str]:
        with self._cond:
            return sorted(self._expected - self._arrived)


#: the failure text of a Ctrl-C
INTERRUPTED = "interrupted (Ctrl-C)"

#: Ctrl-Cs received by :func:`interrupts_cancel`'s handler (written by the main thread only, in
#: the handler: it takes no lock) and handled by their threads (under the condition)
_interrupts_received = [0]
_interrupts_handled = [0]
_interrupts_cond = threading.Condition()


def settle_interrupts(timeout: float) -> bool:
    """Wait (at most ``timeout`` s) until every Ctrl-C received so far has been acted on. The
    handler hands each one to a short thread; on a loaded machine that thread can run a second
    later, after the caller has read its scope as not canceled: call this before an act that
    cannot be taken back (opening the start gate). Returns False when one is still unsettled.
    Not from the main thread's signal handler."""
    deadline = time.monotonic() + timeout
    with _interrupts_cond:
        while _interrupts_handled[0] < _interrupts_received[0]:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _interrupts_cond.wait(left)
    return True


@contextlib.contextmanager
def interrupts_cancel(scope: CancelScope, first: Optional[Callable[[], bool]] = None,
                      over: tuple = ()):
    """In the main thread with Python's default SIGINT handling: Ctrl-C fails ``scope``
    (``external_abort``, "interrupted (Ctrl-C)") instead of raising KeyboardInterrupt, and so
    does every further Ctrl-C, so an interrupt can never leave goals running unattended. With
    ``first``, the first Ctrl-C calls it instead (a controlled stop; it returns False where it
    cannot act, and then the scope fails); every further one fails the scope (cancel: hold).
    Elsewhere (another thread, or a caller that installed its own handler other than one of
    ``over``, which it replaces directly) it does nothing.

    The handler only starts a short thread: it never takes a lock the interrupted code may
    hold. :func:`settle_interrupts` waits until those threads have acted.
    """
    current = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or \
            (current is not signal.default_int_handler and current not in over):
        yield
        return
    count = [0]
    failure = Failure(None, FailureReason.EXTERNAL_ABORT, None, INTERRUPTED)

    def act(k: int) -> None:
        try:
            if k == 1 and first is not None and first():
                return
            scope.fail(failure)
        finally:
            with _interrupts_cond:
                _interrupts_handled[0] += 1
                _interrupts_cond.notify_all()

    def on_sigint(_signum, _frame) -> None:
        count[0] += 1
        _interrupts_received[0] += 1   # (main thread only: settle_interrupts waits for it)
        threading.Thread(target=act, name="mjmr-sigint", daemon=True, args=(count[0],)).start()
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is on_sigint:  # unless the body replaced it itself
            signal.signal(signal.SIGINT, previous)


class PlanClock:
    """Plan time as a function of the controllers' clock: the plan starts at ``stamp`` at
    speed 1; every :meth:`retime` from a later stamp continues from the plan time reached there
    at a new speed, and every :meth:`rescale` under a time scaling (a smooth ramp of the speed:
    ``core/time_scaling.py``). Before the first stamp the plan time is negative."""

    def __init__(self, stamp: float) -> None:
        # (stamp, plan time there, speed after, scaling or None)
        self._segments: list[tuple] = [(stamp, 0.0, 1.0, None)]
        self._lock = threading.Lock()

    def plan_time(self, now: float) -> float:
        with self._lock:
            segments = list(self._segments)
        stamp, t0, speed, scaling = segments[0]
        for seg in segments:
            if now >= seg[0]:
                stamp, t0, speed, scaling = seg
        if scaling is None or now < stamp:
            return t0 + (now - stamp) * speed
        return t0 + float(scaling.at(now - stamp)[0])

    def rate(self, now: float) -> float:
        """d(plan time)/dt at ``now`` (the speed there, mid-ramp included)."""
        with self._lock:
            segments = list(self._segments)
        stamp, _t0, speed, scaling = segments[0]
        for seg in segments:
            if now >= seg[0]:
                stamp, _t0, speed, scaling = seg
        if scaling is None or now < stamp:
            return speed if now >= segments[0][0] else 0.0
        return float(scaling.at(now - stamp)[1])

    @property
    def slowest_moving(self) -> float:
        """The lowest non-zero speed any segment runs at (a stop or pause runs at 0)."""
        with self._lock:
            return min((seg[2] for seg in self._segments if seg[2] > 0), default=1.0)

    @property
    def speed(self) -> float:
        """The speed of the latest segment once its change is complete."""
        with self._lock:
            return self._segments[-1][2]

    @property
    def slowest(self) -> float:
        """The lowest speed any segment has run at (bounds on the whole execution use it)."""
        with self._lock:
            return min(seg[2] for seg in self._segments)

    def retime(self, stamp: float, speed: float) -> float:
        """From ``stamp`` on, the plan runs at ``speed``. Returns the plan time at ``stamp``."""
        t0 = self.plan_time(stamp)
        with self._lock:
            self._segments.append((stamp, t0, speed, None))
        return t0

    def rescale(self, stamp: float, t0: float, scaling) -> None:
        """From ``stamp`` (where the plan time is ``t0``) on, the plan time advances by
        ``scaling.at(now - stamp)`` (a :class:`~mj_manipulator_ros.core.time_scaling.TimeScaling`);
        its final rate holds afterwards."""
        with self._lock:
            self._segments.append((stamp, t0, scaling.final_rate, scaling))
