"""Random operator sequences against the whole executor, the simulator's physics in lockstep
with this driver: the same seeded sequences as ``bench/random_sequences.py`` (pauses, resumes,
controlled stops, speed changes, aborts, injected controller failures), and on top of its
checks, every controlled transition's reference against the joints' limits.

Synchronous mode: the simulator's physics thread is not started (``SimNode.start(physics=
False)``); this driver steps physics (``SharedModel.step_cycle``) from the one thread that also
makes the operator's requests, so each request is made at an exact physics time, between two
control cycles. Physics waits while the executor has a goal in flight (a replacement waiting in
an arm's slot or sent, a goal sent at the stamp, a goal accepted by its server and not yet handed
to the controller): no goal reaches its controller after its stamp, whatever the machine's load,
so every figure below is the executor's and the controllers', not the scheduler's. The
executor's threads, DDS and the action servers are the real ones; between waits physics runs at
most ``PACE`` x real time (the joint states are published per simulated second: faster floods
the executor's subscriptions).

Per sequence (``LockSequence.problems``; the test asserts there are none), besides
``random_sequences.problems``:

- no arm moved while its phase said it stands (``paused``), checked on every published state;
- **every controlled transition stays within each joint's velocity and acceleration limits**:
  each arm's position reference (what its controller commands, every control cycle) has
  ``|q[k+1] - q[k]| <= v_max dt`` and ``|q[k+1] - 2 q[k] + q[k-1]| <= a_max dt^2``. Both bounds
  are exact for any reference whose velocity and acceleration stay within the limits (a
  second difference is the acceleration averaged under a triangle of area dt^2), so a jump at a
  goal's handover, a ramp over its limit or a discontinuous velocity all show. Applies to the
  plan followed and to every speed change, pause, resume, controlled stop and peer stop (a
  failed arm's peers), from the stamp on. Measured and reported, not asserted (no goal can make
  them exact; ``bench/transitions.py`` classes them the same way): each goal's start from rest
  (the controller moves from the measured state to the first point before the stamp), a request
  made before the motion started, and an arm whose goal was canceled or aborted (it holds where
  it is, from then on).

Usage: python bench/lockstep_sequences.py [--sequences 1000] [--seed 1]   (prints JSON)
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 50))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import numpy as np  # noqa: E402

from random_sequences import (  # noqa: E402
    MAX_PAUSE_S, Request, Sequence, actions_of, arm_moves, make_request, plan_of, problems,
    run_and_report, _transitions)

from mj_manipulator_ros.core.arm_phase import ArmPhase  # noqa: E402
from mj_manipulator_ros.core.errors import MjManipulatorError  # noqa: E402
from mj_manipulator_ros.sim.goal import PREEMPTED_MESSAGE, GoalOutcome  # noqa: E402

#: most simulated seconds per wall second between the executor's goals (physics may be slower)
PACE = 2.0
#: how long physics waits for one goal in flight before the driver says so and steps on (s, wall)
HELD_BOUND_S = 10.0
#: one execution's wall-clock bound (s): past it the driver stops stepping and says so
SEQUENCE_BOUND_S = 120.0
#: after a goal's stamp, its start from rest is the controller's own move (not asserted), s
START_TAIL_S = 0.05
#: float slack of the limit checks (relative)
SLACK = 1e-6
#: each joint's acceleration limit (rad/s^2): the swings (at most 5.3 rad/s^2) keep within it,
#: so the plan is valid and every ramp is bounded by it (the tiny pair's file gives none; a
#: joint without one is bounded by ``execution.stop_acceleration`` in ramps only)
ACCELERATION_LIMIT = 8.0
#: the classes whose references are asserted within the limits
ASSERTED = ("plan", "pause", "resume", "stop", "speed", "peer_stop")


@dataclass
class LockSequence(Sequence):
    #: class -> [largest |v| / v_max, largest |a| / a_max] of the position references
    peaks: dict = field(default_factory=dict)
    #: physics waits for the executor: how many, and the longest (s, wall)
    holds: int = 0
    longest_hold_s: float = 0.0
    #: goals a controller aborted on its own (not preempted, not the injected fault): why
    controller_aborts: list = field(default_factory=list)


class Lockstep:
    """The tiny pair's simulator (physics stepped here) and an executor, for many sequences."""

    def __init__(self, tmp: Path) -> None:
        from mj_manipulator_ros.core.config import config_from_mapping
        from mj_manipulator_ros.ros.context import RosContext
        from mj_manipulator_ros.ros.executor import MultiArmExecutor
        from mj_manipulator_ros.sim.sim_config import sim_config
        from mj_manipulator_ros.sim.sim_node import SimNode
        from tiny_arm import tiny_mapping

        # the product's start lead (physics waits for the goals: none is late, so none needs
        # scaling) and its defaults otherwise; pauses bounded short so a sequence ends soon
        mapping = tiny_mapping(tmp, execution={"use_sim_time": True, "max_pause_s": MAX_PAUSE_S})
        for arm in mapping["arms"]:   # every joint limited in acceleration: what is checked
            for limits in arm["joint_limits"].values():
                limits["acceleration"] = ACCELERATION_LIMIT
        config = sim_config(config_from_mapping(mapping))
        self.config = config
        self.ros = RosContext()
        self.sim = SimNode(config, context=self.ros.context).start(physics=False)
        self.shared = self.sim.shared
        self.executor = MultiArmExecutor(config.executor, context=self.ros.context)
        self.homes_failed: list[str] = []
        ex = config.executor
        self.limits = {}
        for arm in ex.arm_names:
            lim = ex.arm(arm).joint_limits
            joints = ex.arm(arm).joint_names
            self.limits[arm] = (np.array([lim[j].velocity for j in joints]),
                                np.array([lim[j].acceleration for j in joints]))
        self._anchor = (time.monotonic(), self.now())
        self._step_for(0.3)   # /clock and joint states flowing before the first execution

    def now(self) -> float:
        return float(self.shared.data.time)

    # ---- physics, stepped here ----------------------------------------------------------------
    def _step(self, seq: LockSequence | None, trace: list | None) -> None:
        """One control cycle, paced at most PACE x real time; its references into ``trace``."""
        wall0, sim0 = self._anchor
        ahead = (self.now() - sim0) / PACE - (time.monotonic() - wall0)
        if ahead > 0:
            time.sleep(ahead)
        elif ahead < -0.05:           # behind (a hold, a slow cycle): no catch-up burst
            self._anchor = (time.monotonic(), self.now())
        t = self.now()                # the references below are this cycle's, at t
        snap = self.shared.step_cycle()
        if trace is not None:
            trace.append((t, {a: c.follower.position for a, c in
                              self.shared.controllers.items()}))
            self._endings(len(trace) - 1)
        if seq is not None and snap is not None:
            run = self.executor.last_run
            for arm, r in (run.arms.items() if run is not None else ()):
                if r.phase is ArmPhase.PAUSED:
                    speed = float(np.abs(snap.arms[arm].velocities).max())
                    seq.max_standing_speed = max(seq.max_standing_speed, speed)

    def _endings(self, cycle: int) -> None:
        """The goals that ended by this cycle: (arm, cycle, outcome, text) into
        ``self.ended`` (the controller's own account: a cancel or an abort holds the measured
        state, a step of the reference no goal makes)."""
        for arm, server in self.sim.arms.items():
            tickets = server.tickets
            while self._seen[arm] < len(tickets):     # accepted since: watched from now on
                self._live[arm].append(tickets[self._seen[arm]])
                self._seen[arm] += 1
            for ticket in [t for t in self._live[arm] if t.done.is_set()]:
                self._live[arm].remove(ticket)
                self.ended.append((arm, cycle, ticket.outcome, ticket.error_string))

    def _watch_goals(self) -> None:
        """From now on, record how each goal accepted ends (``_endings``)."""
        self.ended: list = []
        self._seen = {a: len(s.tickets) for a, s in self.sim.arms.items()}
        self._live: dict = {a: [] for a in self.sim.arms}

    def _step_for(self, seconds: float) -> None:
        until = self.now() + seconds
        while self.now() < until:
            self._step(None, None)

    def _held(self) -> str:
        """Why physics must wait now ('' when it may step): a goal of the running execution in
        flight whose stamp physics could otherwise pass before its controller has it."""
        run = self.executor.last_run
        if run is not None:
            for arm, r in run.arms.items():
                if r.phase in (ArmPhase.DONE, ArmPhase.STOPPING):
                    continue          # takes no replacement: its cancel needs physics to end
                if r.requests.pending or r.phase is ArmPhase.REPLACING:
                    return f"{arm}: a replacement goal in flight"
                if r.phase is ArmPhase.SENDING or (run.stamp is not None
                                                   and r.phase is ArmPhase.AT_GATE):
                    return f"{arm}: the plan's goal in flight"
        for arm, server in self.sim.arms.items():
            if server.goals_not_taken:
                return f"{arm}: a goal accepted, not yet handed to its controller"
        return ""

    # ---- one execution, driven ------------------------------------------------------------------
    def drive(self, plan, actions=(), act=None, seq: LockSequence | None = None,
              trace: list | None = None, approach: bool = False) -> dict:
        """``execute(plan)`` in a thread while this one steps physics and makes each of
        ``actions`` ((plan time, ...) sorted; before the start: at once) with ``act`` when the
        running plan's clock reaches it. Returns {"report"} or {"refused"} (and "stuck")."""
        out: dict = {}

        def execute() -> None:
            try:
                out["report"] = self.executor.execute(plan, approach=approach)
            except MjManipulatorError as exc:
                out["refused"] = exc

        thread = threading.Thread(target=execute, name="lockstep-execute")
        thread.start()
        waiting = list(actions)
        bound = time.monotonic() + SEQUENCE_BOUND_S
        held_since = None
        while thread.is_alive():
            if time.monotonic() > bound:
                out["stuck"] = f"execute did not return within {SEQUENCE_BOUND_S} s of wall time"
                break
            why = self._held()
            if why:
                now = time.monotonic()
                held_since = held_since or now
                if seq is not None and now - held_since > seq.longest_hold_s:
                    seq.longest_hold_s = now - held_since
                if now - held_since < HELD_BOUND_S:
                    time.sleep(0.0005)
                    continue
                out.setdefault("held_too_long", f"physics waited {HELD_BOUND_S} s: {why}")
            if held_since is not None and seq is not None:
                seq.holds += 1
            held_since = None
            run = self.executor.last_run
            stamp = run.stamp if run is not None and run.plan is plan else None
            if waiting and (waiting[0][0] < 0 or (stamp is not None and
                                                  self.now() >= stamp.seconds + waiting[0][0])):
                act(waiting.pop(0))
                continue          # its goals (if any) are in flight before physics steps on
            self._step(seq, trace)
        while thread.is_alive() and time.monotonic() < bound + 10.0:
            self._step(seq, trace)     # past the bound: physics goes on so the run can end
        thread.join(10.0)
        if thread.is_alive():
            out["stuck"] = "the execute thread did not end"
        return out

    def run_one(self, seed: int) -> LockSequence:
        rng = np.random.default_rng(seed)
        seq = LockSequence(seed)
        plan = plan_of(rng)
        actions = actions_of(rng)
        faults: dict[str, float] = {}          # arm -> physics time its fault was injected
        trace: list = []
        started = time.monotonic()

        def act(item) -> None:
            plan_time, action, factor = item
            ex = self.executor
            run = ex.last_run
            stamped = run is not None and run.plan is plan and run.stamp is not None
            req = Request(action, plan_time, running=stamped and not ex.held_before_start,
                          at_sim=self.now())
            make_request(ex, self.sim, rng, req, f"seq {seed} {action} at {plan_time:.3f}",
                         factor)
            if action == "fault" and req.answer is True:
                faults.setdefault(req.text, self.now())
            elif action in ("pause", "resume", "stop", "speed") and isinstance(req.answer, bool):
                # answered: applied, or why not (core/answer.py), the same as the bool
                said = ex.last_answer()
                if said is None or said.applied != req.answer or \
                        (not said.applied and said.refusal is None):
                    seq.problems.append(f"{action} at {plan_time:.3f} answered {req.answer} "
                                        f"without a matching answer: {said}")
                elif not said.applied:
                    req.text = said.text()
            seq.requests.append(req)

        self._watch_goals()
        try:
            out = self.drive(plan, actions, act, seq, trace)
        finally:
            for arm in ("left", "right"):
                self.sim.set_faults(arm, abort_after_s=None)
        seq.report = out.get("report")
        run = self.executor.last_run
        if run is not None and run.plan is plan:
            seq.arm_moves |= arm_moves(run)
        seq.wall_s = round(time.monotonic() - started, 3)
        seq.problems += problems(seq, out, [], self.sim)
        seq.problems += [out[k] for k in ("stuck", "held_too_long") if k in out]
        seq.controller_aborts = [f"{a}: {x}" for a, _c, o, x in self.ended
                                 if o is GoalOutcome.ABORTED and x != PREEMPTED_MESSAGE
                                 and not x.startswith("injected fault")]
        if seq.report is not None:
            self._limits(seq, trace, run.stamp.seconds if run is not None and run.plan is plan
                         and run.stamp is not None else None, faults)
        return seq

    def _limits(self, seq: LockSequence, trace: list, stamp: float | None,
                faults: dict[str, float]) -> None:
        """Each cycle's class, per arm; the peaks per class; a problem for every asserted class
        over a limit (module docstring)."""
        if len(trace) < 3 or stamp is None:
            return
        t = np.array([c[0] for c in trace])
        dt = self.shared.control_period
        lead = self.config.executor.execution.start_lead_s
        report = seq.report
        for arm, (v_max, a_max) in self.limits.items():
            cls = np.full(t.size, "plan", dtype=object)
            cls[t < stamp + START_TAIL_S] = "start"
            for req in seq.requests:
                if req.answer is True and req.action in ASSERTED:
                    window = (t >= req.at_sim) & (t <= req.at_sim + lead + 1.0)
                    early = req.at_sim < stamp + START_TAIL_S
                    cls[window & (cls != "start")] = req.action + ("_before_start" if early else "")
            for other, at in faults.items():
                if other != arm:
                    cls[t >= at] = "peer_stop"
            # a goal its controller ended canceled or aborted (a cancel, an injected fault, a
            # tolerance): the controller holds the measured state from that cycle on
            holds = [(c, outcome, text) for a, c, outcome, text in self.ended if a == arm and
                     outcome in (GoalOutcome.CANCELED, GoalOutcome.ABORTED)
                     and text != PREEMPTED_MESSAGE]
            if holds:
                cls[min(c for c, _o, _t in holds):] = "hold"
            cls[t < stamp + START_TAIL_S] = "start"
            q = np.array([c[1][arm] for c in trace])
            v = np.abs(np.diff(q, axis=0)) / (v_max * dt)            # (K-1, J) of the limit
            a = np.abs(np.diff(q, 2, axis=0)) / (a_max * dt * dt)    # (K-2, J)
            v_use, a_use = v.max(axis=1), a.max(axis=1)
            # a difference belongs to its last cycle's class (a step into a hold is the
            # hold's); asserted: every difference whose whole stencil is in asserted classes
            # (a jump between two of them, at a window's edge, counts too)
            ok = np.isin(cls, ASSERTED)
            v_ok, a_ok = ok[1:] & ok[:-1], ok[2:] & ok[1:-1] & ok[:-2]
            for name in set(cls):
                vm, am = cls[1:] == name, cls[2:] == name
                peak = [float(v_use[vm].max()) if vm.any() else 0.0,
                        float(a_use[am].max()) if am.any() else 0.0]
                prev = seq.peaks.get(name, [0.0, 0.0])
                seq.peaks[name] = [max(prev[0], peak[0]), max(prev[1], peak[1])]
            over_v = np.flatnonzero(v_ok & (v_use > 1.0 + SLACK)) + 1
            over_a = np.flatnonzero(a_ok & (a_use > 1.0 + SLACK)) + 2
            if over_v.size or over_a.size:
                k = int(min(np.concatenate([over_v, over_a])))
                ends = [(round(float(t[c]), 4), str(o), x[:60]) for a, c, o, x in self.ended
                        if a == arm]
                seq.problems.append(
                    f"{arm}: {cls[k]} reference over its limit at physics time {t[k]:.4f} s "
                    f"(plan stamp {stamp:.4f}): |v| {v_use[k - 1]:.3f} x v_max, |a| "
                    f"{a_use[max(k - 2, 0)]:.3f} x a_max; the arm "
                    f"{report.arms[arm].status.value}, first failure {report.first_failure}; "
                    f"its goals ended {ends}")

    # ---- between sequences ----------------------------------------------------------------------
    def run(self, seeds) -> list[LockSequence]:
        out = []
        for seed in seeds:
            out.append(self.run_one(seed))
            self._home()
        return out

    def _home(self) -> None:
        """Back to the swing's start (0): the approach move, checked like any plan."""
        from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
        snap = self.shared.snapshot()
        if not any(float(np.abs(s.positions).max()) > 0.005 for s in snap.arms.values()):
            return
        rest = MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), np.array([0.0, 0.1]),
                                              np.zeros((2, 2)), np.zeros((2, 2)))
                             for a in ("left", "right")})
        for _ in range(3):
            out = self.drive(rest, approach=True)
            report = out.get("report")
            if report is not None and report.succeeded:
                return
            self.homes_failed.append(report.summary().splitlines()[0] if report is not None
                                     else repr(out))
        raise RuntimeError(f"could not bring the arms home: {self.homes_failed[-1]}")

    def close(self) -> None:
        self.executor.close()
        self.sim.close()
        self.ros.close()


def _peaks(seqs) -> dict:
    out: dict = {}
    for s in seqs:
        for name, (v, a) in s.peaks.items():
            prev = out.get(name, [0.0, 0.0])
            out[name] = [round(max(prev[0], v), 4), round(max(prev[1], a), 4)]
    return {"limit_use_peaks (|v|/v_max, |a|/a_max)": dict(sorted(out.items())),
            "asserted": list(ASSERTED),
            "controller_aborts": sorted({x for s in seqs for x in s.controller_aborts})[:20],
            "sequences_with_a_controller_abort": sum(bool(s.controller_aborts) for s in seqs),
            "physics_waits": sum(s.holds for s in seqs),
            "longest_wait_s": round(max((s.longest_hold_s for s in seqs), default=0.0), 4),
            **_transitions(seqs)}


def main() -> int:
    return run_and_report(Lockstep, __doc__.split("\n\n")[0], 1000,
                          f"tiny pair, physics stepped in lockstep by the driver (at most {PACE:g}x "
                          "real time, waiting for the executor's goals), sim time, Fast DDS "
                          "loopback", _peaks)


if __name__ == "__main__":
    raise SystemExit(main())
