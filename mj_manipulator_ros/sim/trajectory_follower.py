"""One arm's trajectory controller, with joint_trajectory_controller (Jazzy/Kilted) semantics.

Threading: :meth:`submit` and :meth:`cancel` are called from action-server threads and only put
requests into a locked slot; :meth:`update` runs in the physics thread once per control cycle,
takes the slot, and is the only code that changes the active goal.

Per control cycle (``now`` on the controller clock, measured ``q``, ``qd``):

- a new goal preempts the active one (which ends ABORTED, -1, "Current goal preempted by new
  incoming action.");
- start time: stamp 0 -> this cycle; a future stamp -> the arm moves from its state at pick-up
  (the cycle after acceptance) to the first point, reached at stamp + its time_from_start; a
  past stamp with the end still ahead -> it joins the trajectory mid-way;
- the reference is the trajectory's spline (quintic/cubic/linear, see core.interpolation);
- path tolerance violated (|q - desired| or |qd - desired velocity| above tolerance, from
  pick-up to the end) -> ABORTED, -4, hold measured position;
- at or after the end: within goal tolerance -> SUCCEEDED, 0, hold the last point; not within
  by end + goal_time_tolerance -> ABORTED, -5, hold measured position;
- cancel -> CANCELED, 0, hold the measured position from this cycle on;
- inactive (``sim.arms.<arm>.start_active: false``, until :meth:`request_activation`; or
  deactivated): goals are refused (the arm server asks :attr:`activated`), the arm holds what it
  held; on activation the hold is the measured position (JTC with
  ``set_last_command_interface_value_as_state_on_activation`` and a hardware that started its
  command buffer at the measured position), or, with the ``activation_command`` fault, the
  value the fault names for its joints (a command buffer that started at zero, openarm_ros2#66,
  or a stale command); on deactivation the active and pending goals end ABORTED and the arm
  holds its measured position.

The compiled follower (``sim/_follow_kernel.c``, bound by :meth:`bind` to a position controller
whose joints and servos are contiguous) runs the cycles where nothing happens: holding, and
following between the events above. Every event's cycle (a new goal, a cancel, new faults, the
onset, a tolerance exceeded, the end) is this class's, which stays the reference implementation:
the tests compare the two cycle by cycle.
"""

from __future__ import annotations

import bisect
import threading
from typing import Optional

import numpy as np

from mj_manipulator_ros.core.interpolation import (
    Interpolation, Spline, interpolation_of, segment_coefficients)
from mj_manipulator_ros.sim.goal import (
    GOAL_TOLERANCE_VIOLATED, INVALID_GOAL, PATH_TOLERANCE_VIOLATED, PREEMPTED_MESSAGE, SUCCESSFUL,
    ControllerGoal, GoalOutcome, GoalTicket)
from mj_manipulator_ros.sim.sim_config import ArmFaults, DeadWire

try:
    from mj_manipulator_ros.sim import _follow_kernel as KERNEL
except ImportError:  # not built (no compiler): every cycle runs here
    KERNEL = None

#: the compiled follower's mode while it follows a goal (its cycles; 0: none, 1: holding)
KERNEL_FOLLOWING = 2

#: Motion onset: the first cycle, once the trajectory proper has begun (now >= stamp + first
#: time_from_start), at which the reference departs from the first point by more than this (rad).
ONSET_THRESHOLD = 1e-9


class TrajectoryFollower:
    """Args: joint_names (J,), initial hold positions (J,), faults of this arm."""

    def __init__(self, joint_names: tuple[str, ...], hold: np.ndarray,
                 faults: ArmFaults = ArmFaults()) -> None:
        self.joint_names = joint_names
        #: does the controller take goals (ros2_control's active state)? Set by its owner
        #: before physics starts (sim.arms.<arm>.start_active), then changed only in the
        #: physics thread, on a request (:meth:`request_activation`)
        self.activated = True
        self._switch: Optional[tuple[bool, threading.Event]] = None   # a requested change
        self._kernel = None        # the compiled follower, once bound
        self._kernel_goal: Optional[GoalTicket] = None   # the goal it was loaded with
        self.faults = faults
        self._lock = threading.Lock()
        self._pending: Optional[GoalTicket] = None
        self._active: Optional[GoalTicket] = None
        self._hold = np.array(hold, dtype=float)
        self._pre: Optional[Spline] = None       # the move to the first point (future stamp)
        self._spline: Optional[Spline] = None
        self._start = self._first = self._end = 0.0
        self._ref0: Optional[np.ndarray] = None
        #: with the freeze fault: (the reference it froze at (3, J), the goal it froze)
        self._frozen: Optional[tuple] = None
        self.reference: Optional[np.ndarray] = None
        self._command = self._hold.copy()  # the latest position reference (J,)

    @property
    def position(self) -> np.ndarray:
        """The latest position reference (J,), a copy."""
        return self._command.copy()

    @property
    def faults(self) -> ArmFaults:
        return self._faults

    @faults.setter
    def faults(self, value: ArmFaults) -> None:
        self._faults = value
        # the compiled cycles know none of these faults: with one, every cycle runs here
        #: a dead wire whose states are honest: the driver's controller checks no tolerance
        #: (joint_trajectory_controller's default), so every goal succeeds at its end
        self._unchecked = value.dead_wire == DeadWire.STILL
        self._kernel_faults_ok = (not value.stall and not value.freeze and
                                  value.dead_wire == DeadWire.NONE and
                                  value.abort_after_s is None and
                                  value.clock_offset_s == 0 and value.clock_step_s == 0)
        if self._kernel is not None:
            self._kernel.dirty = 1

    def bind(self, qpos: np.ndarray, qvel: np.ndarray, ctrl: np.ndarray, qadr: int, vadr: int,
             cadr: int):
        """Physics owner, before its thread starts: let the compiled follower run this arm's
        steady cycles on ``qpos[qadr:qadr+J]``, ``qvel[vadr:...]``, writing ``ctrl[cadr:...]``
        (the MjData's arrays). Returns it (None when it is not built)."""
        if KERNEL is None:
            return None
        self._command = np.array(self._command, dtype=float)
        self._kernel = KERNEL.Follow(qpos, qvel, ctrl, qadr, vadr, cadr, self._command)
        self._sync_kernel()
        return self._kernel

    def _sync_kernel(self) -> None:
        """After a cycle run here: hand the next ones to the compiled follower, as the state
        now is (holding, or the active goal loaded once), or keep them (a fault it lacks)."""
        k = self._kernel
        if k is None:
            return
        t = self._active
        if not self._kernel_faults_ok:
            if k.mode:
                k.python()
            return
        if t is None:
            k.hold(self._hold)
            return
        if self._kernel_goal is not t or k.mode != KERNEL_FOLLOWING:
            tol = t.goal.tolerances
            k.follow(self._spline.parts(), self._pre.parts() if self._pre is not None else None,
                     self._start, self._first, self._end,
                     np.ascontiguousarray(tol.path_position, dtype=float),
                     np.ascontiguousarray(tol.path_velocity, dtype=float),
                     self._path_position, self._path_velocity,
                     np.ascontiguousarray(self._p0, dtype=float), t.feedback,
                     t.motion_onset is None)
            self._kernel_goal = t
        k.onset_pending = t.motion_onset is None

    # ---- any thread ---------------------------------------------------------------------------
    def submit(self, goal: ControllerGoal) -> GoalTicket:
        ticket = GoalTicket(goal)
        with self._lock:
            if self._pending is not None:  # never picked up: preempted before it started
                self._finish(self._pending, GoalOutcome.ABORTED, INVALID_GOAL, PREEMPTED_MESSAGE)
            self._pending = ticket
            if self._kernel is not None:
                self._kernel.dirty = 1
        return ticket

    def cancel(self, ticket: GoalTicket) -> None:
        with ticket.lock:
            ticket.cancel_requested = True
        if self._kernel is not None:
            self._kernel.dirty = 1

    @property
    def active(self) -> Optional[GoalTicket]:
        return self._active

    def request_activation(self, active: bool) -> threading.Event:
        """Ask for the controller activated (True) or deactivated at the next control cycle
        (module docstring); the event is set once the physics thread has done it."""
        done = threading.Event()
        with self._lock:
            self._switch = (bool(active), done)
            if self._kernel is not None:
                self._kernel.dirty = 1
        return done

    # ---- physics thread -----------------------------------------------------------------------
    def update(self, now: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """One control cycle (see :meth:`_update`); :attr:`position` keeps what it returned."""
        if self._kernel is not None:
            self._kernel.dirty = 0   # before the slot is read: a later submit sets it again
        command = self._update(now, q, qd)
        self._command[:] = command
        self._sync_kernel()
        return command

    def _update(self, now: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """One control cycle. Returns the position reference (J,); :attr:`reference` holds the
        whole reference (3, J: position, velocity, acceleration) when it comes from the
        trajectory, None when holding (velocity and acceleration zero)."""
        self.reference = None
        with self._lock:
            switch, self._switch = self._switch, None
        if switch is not None:
            self._set_activated(switch[0], q)
            switch[1].set()
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None and not self.activated:   # raced a deactivation
            self._finish(pending, GoalOutcome.ABORTED, PATH_TOLERANCE_VIOLATED,
                         "controller deactivated")
            pending = None
        if pending is not None:
            if self._active is not None:
                self._finish(self._active, GoalOutcome.ABORTED, INVALID_GOAL, PREEMPTED_MESSAGE)
            self._activate(pending, now, q, qd)
        t = self._active
        if t is None:
            return self._hold
        if t.cancel_requested:
            self._hold = q.copy()
            self._finish(t, GoalOutcome.CANCELED, SUCCESSFUL, "")
            return self._hold
        goal = t.goal
        traj = goal.trajectory
        end = self._end
        if self.faults.stall:
            ref = self._stalled
        elif self.faults.freeze:
            if self._frozen is None or self._frozen[1] is not t:
                self._frozen = (np.stack([q.copy(), 0 * q, 0 * q]), t)
            ref = self._frozen[0]
        elif self._pre is not None and now < self._first:
            ref = self._pre.at(now)
        else:
            ref = self._spline.at(now - self._start)
        desired = ref[0]
        error = q - desired
        self._record(t, now, ref, q, qd, error)

        if self.faults.abort_after_s is not None and now >= self._start + self.faults.abort_after_s:
            self._hold = q.copy()
            self._finish(t, GoalOutcome.ABORTED, PATH_TOLERANCE_VIOLATED,
                         f"injected fault: abort {self.faults.abort_after_s} s after the start")
            return self._hold
        tol = goal.tolerances
        if now <= end and not self._unchecked:  # path tolerances apply from pick-up (including the move to the first point)
            bad = self._path_position and self._violation(error, tol.path_position, "position")
            bad = bad or (self._path_velocity and
                          self._violation(qd - ref[1], tol.path_velocity, "velocity"))
            if bad:
                self._hold = q.copy()
                self._finish(t, GoalOutcome.ABORTED, PATH_TOLERANCE_VIOLATED, f"path tolerance violated: {bad}")
                return self._hold
        if now >= end and not self.faults.stall and not self.faults.freeze:
            final = traj.positions[-1]
            bad = "" if self._unchecked else \
                self._violation(q - final, tol.goal_position, "position")
            bad = bad or (not self._unchecked and
                          self._violation(qd, tol.goal_velocity, "velocity"))
            if not bad:
                self._hold = final.copy()
                self._finish(t, GoalOutcome.SUCCEEDED, SUCCESSFUL, "")
                return self._hold
            if now > end + tol.goal_time:
                self._hold = q.copy()
                self._finish(t, GoalOutcome.ABORTED, GOAL_TOLERANCE_VIOLATED,
                             f"goal tolerance violated {tol.goal_time} s after the end: {bad}")
                return self._hold
            return traj.positions[-1]
        self.reference = ref
        return desired

    def abort_active(self, q: np.ndarray, text: str) -> None:
        """Physics thread: end the active goal (and a pending one) ABORTED, -4 with ``text``,
        and hold ``q`` (the measured position), as on a path tolerance violation."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            self._finish(pending, GoalOutcome.ABORTED, PATH_TOLERANCE_VIOLATED, text)
        if self._active is not None:
            self._hold = np.array(q, dtype=float)
            self._finish(self._active, GoalOutcome.ABORTED, PATH_TOLERANCE_VIOLATED, text)
        self._sync_kernel()

    def _set_activated(self, active: bool, q: np.ndarray) -> None:
        """Physics thread: the controller's activation or deactivation (module docstring)."""
        if active == self.activated:
            return
        self.activated = active
        if not active:
            self.abort_active(q, "controller deactivated")
            self._hold = np.array(q, dtype=float)
            return
        hold = np.array(q, dtype=float)
        for j, value in self.faults.activation_command.items():   # the injected fault
            hold[self.joint_names.index(j)] = value
        self._hold = hold

    def _activate(self, ticket: GoalTicket, now: float, q: np.ndarray, qd: np.ndarray) -> None:
        goal = ticket.goal
        traj = goal.trajectory
        self._start = now if goal.start_time is None else goal.start_time
        self._first = self._start + traj.times[0]
        self._end = self._start + traj.duration
        self._spline = Spline(traj)
        self._pre = None
        if self._first > now:
            kind = interpolation_of(traj)
            v1 = traj.velocities[0] if traj.velocities is not None else np.zeros_like(q)
            a1 = traj.accelerations[0] if traj.accelerations is not None else np.zeros_like(q)
            c = segment_coefficients(q, qd if kind is not Interpolation.LINEAR else 0 * q,
                                     0 * q, traj.positions[0], v1, a1, self._first - now, kind)
            self._pre = Spline(coefficients=c, start=now, duration=self._first - now)
        tol = goal.tolerances
        self._path_position = bool(np.isfinite(tol.path_position).any())
        self._path_velocity = bool(np.isfinite(tol.path_velocity).any())
        self._times = traj.times.tolist()
        self._p0 = traj.positions[0]
        self._active = ticket
        self._ref0 = q.copy()  # what a stalled arm holds
        self._stalled = np.stack([self._ref0, np.zeros_like(q), np.zeros_like(q)])
        ticket.started_at = self._start
        ticket.picked_up_at = now

    def _record(self, t: GoalTicket, now: float, ref: np.ndarray, q, qd, error) -> None:
        """The feedback, written in one operation (``GoalTicket.latest`` copies it in one)."""
        err = float(np.abs(error).max()) if q.size else 0.0
        # as JTC: the index of the segment's end point (0 before the first point, N after the last)
        local = now - self._start
        index = bisect.bisect_right(self._times, local)
        worst = t.feedback[-1]
        t.feedback[:] = np.concatenate((ref.ravel(), q, qd,
                                        (now, index, err if err > worst else worst)))
        if t.motion_onset is None and local >= self._times[0] and \
                np.abs(ref[0] - self._p0).max() > ONSET_THRESHOLD:
            with t.lock:
                t.motion_onset = now

    def _violation(self, error: np.ndarray, tol: np.ndarray, what: str) -> str:
        over = np.flatnonzero(np.abs(error) > tol)
        if not over.size:
            return ""
        k = int(over[0])
        return f"joint {self.joint_names[k]}: {what} error {error[k]:.4g} exceeds {tol[k]:.4g}"

    def _finish(self, ticket: GoalTicket, outcome: GoalOutcome, code: int, text: str) -> None:
        with ticket.lock:
            actual = ticket.actual
            if actual is not None and ticket.goal.trajectory.positions.size:
                ticket.final_error = float(np.max(np.abs(
                    actual - ticket.goal.trajectory.positions[-1])))
            ticket.outcome, ticket.error_code, ticket.error_string = outcome, code, text
        ticket.done.set()
        if ticket is self._active:
            self._active = None
