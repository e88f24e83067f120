"""Random operator sequences against the whole executor: seeded sequences of pauses, resumes,
controlled stops, speed changes, aborts and injected controller failures, each at a random
moment of one execution of the tiny pair's swing (the simulator in-process, on sim time, real
DDS, the executor's own threads). Where ``bench/transitions.py`` drives the motion's ramps
synchronously (limits, freezes), this drives the lifecycle: every thread, every phase.

Per sequence it checks (``Sequence.problems``; the test asserts there are none):

- ``execute`` returned one report, with a terminal status, every arm's stop confirmed, no arm
  thread left running;
- no request was lost: each call returned True or False or raised this package's error; a
  pause that returned True while running has its record in the report; a stop that returned
  True shows in the report (its record, or the execution canceled or failed first); an abort
  that returned True is the report's first failure (or a failure stopped along the plan came
  before it);
- no arm moved while its phase said it stands: while an arm is ``paused`` (its pause goal
  succeeded, at rest), its joints' speed in physics stays below ``STANDING_SPEED``;
- every arm reported ``stopped`` is at rest at the end.

Usage: python bench/random_sequences.py [--sequences 1000] [--seed 1]   (prints JSON)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 50))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import numpy as np  # noqa: E402

from mj_manipulator_ros.core.arm_phase import ArmPhase  # noqa: E402
from mj_manipulator_ros.core.errors import MjManipulatorError  # noqa: E402
from mj_manipulator_ros.core.goal_kind import GoalKind  # noqa: E402
from mj_manipulator_ros.core.report import ArmStatus, ExecutionReport, ExecutionStatus  # noqa: E402

#: what an operator (or a failing controller) does
ACTIONS = ("pause", "resume", "stop", "speed", "abort", "fault")
#: how often each is drawn
WEIGHTS = (0.25, 0.2, 0.12, 0.25, 0.08, 0.1)
#: the swing's duration (s of plan time) and how far each joint swings (rad)
PLAN_S, AMPLITUDE = 1.5, 0.6
#: an arm that stands (its pause goal succeeded) moves slower than this in physics (rad/s):
#: the simulated controller ends a pause goal within its goal tolerance, stopped velocity
#: 0.01 rad/s (JTC's default)
STANDING_SPEED = 0.02
#: a stopped arm at the end is at rest below this (rad/s)
REST_SPEED = 0.02
#: how long a pause may hold before the execution ends (s, wall): short, so a sequence that
#: never resumes ends soon
MAX_PAUSE_S = 1.0
#: tries of the move home between sequences
HOME_TRIES = 3
#: the simulator's pace (sim s per wall s): the executor reads sim time, so every sim-time
#: bound scales with it; the wall-clock ones (max_pause_s, the stop's observation) do not
PACE = 2.0


@dataclass
class Request:
    action: str
    at: float                  # plan time it was made at (s)
    answer: object = None      # True / False, or the error's class name
    text: str = ""
    running: bool = False      # the motion was stamped and running when it was made
    at_sim: float = float("nan")   # physics time it was made at (s; the lockstep bench's)


@dataclass
class Sequence:
    seed: int
    requests: list[Request] = field(default_factory=list)
    report: ExecutionReport | None = None
    max_standing_speed: float = 0.0
    #: every arm phase transition (from, to) the arms made
    arm_moves: set = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    wall_s: float = 0.0


def plan_of(rng: np.random.Generator):
    from test_execution_watch import swing_plan
    return swing_plan(duration=PLAN_S, amplitude=AMPLITUDE * float(rng.uniform(0.5, 1.0)))


def actions_of(rng: np.random.Generator) -> list[tuple[float, str, float]]:
    """Between 1 and 5 (plan time, action, factor) sorted by plan time; plan times from before
    the start to past the end; the requests that end an execution (an abort, a failure) rarer
    than those it runs on through."""
    n = int(rng.integers(1, 6))
    out = [(float(rng.uniform(-0.2, PLAN_S + 0.3)), str(rng.choice(ACTIONS, p=WEIGHTS)),
            float(rng.uniform(0.3, 1.0))) for _ in range(n)]
    # an operator who pauses mostly resumes: a resume soon after most pauses
    out += [(t + float(rng.uniform(0.2, 0.8)), "resume", float(rng.uniform(0.3, 1.0)))
            for t, action, _f in list(out) if action == "pause" and rng.random() < 0.8]
    return sorted(out)


def run_one(executor, sim, seed: int) -> Sequence:
    """One seeded sequence on a running executor and simulator (the tiny pair)."""
    rng = np.random.default_rng(seed)
    seq = Sequence(seed)
    plan = plan_of(rng)
    actions = actions_of(rng)
    done = threading.Event()
    out: dict = {}
    started = time.monotonic()

    def operator() -> None:
        for plan_time, action, factor in actions:
            if not wait_for_plan_time(executor, plan_time, done):
                return
            req = Request(action, plan_time, running=running(executor))
            seq.requests.append(make_request(executor, sim, rng, req,
                                             f"seq {seed} {action} at {plan_time:.3f}", factor))

    def sampler() -> None:
        watch_standing(executor, sim, lambda run: run.plan is plan, seq, done)

    threads = [threading.Thread(target=f, name=f"seq-{f.__name__}") for f in (operator, sampler)]
    for t in threads:
        t.start()
    try:
        out["report"] = executor.execute(plan)
    except MjManipulatorError as exc:
        out["refused"] = exc
    finally:
        done.set()
        for t in threads:
            t.join(10.0)
        for arm in ("left", "right"):
            sim.set_faults(arm, abort_after_s=None)
    seq.report = out.get("report")
    run = executor.last_run
    if run is not None and run.plan is plan:
        seq.arm_moves |= arm_moves(run)
    seq.wall_s = round(time.monotonic() - started, 3)
    seq.problems = problems(seq, out, threads, sim)
    return seq


def make_request(executor, sim, rng: np.random.Generator, req: Request, reason: str,
                 factor: float) -> Request:
    """Make ``req.action`` now (a "fault": the simulator aborts an arm's goals from its next
    cycle on; the arm drawn from ``rng`` is ``req.text``) and record its answer: the bool,
    this package's error's class name, or "unexpected ..." (a problem by name). Returns
    ``req``."""
    action = req.action
    try:
        if action == "pause":
            req.answer = executor.pause(reason)
        elif action == "resume":
            req.answer = executor.resume()
        elif action == "stop":
            req.answer = executor.stop(reason)
        elif action == "speed":
            req.answer = executor.set_speed(factor)
        elif action == "abort":
            req.answer = executor.abort(reason)
        else:   # a controller fails: its goal aborted from now on
            arm = str(rng.choice(("left", "right")))
            sim.set_faults(arm, abort_after_s=0.0)
            req.answer, req.text = True, arm
    except MjManipulatorError as exc:
        req.answer, req.text = type(exc).__name__, str(exc)
    except Exception as exc:   # noqa: BLE001 - reported as a problem by name
        req.answer, req.text = f"unexpected {type(exc).__name__}", str(exc)
    req.text = req.text or reason
    return req


def wait_for_plan_time(executor, plan_time: float, done: threading.Event) -> bool:
    """Until the running execution's plan clock passes ``plan_time`` (at once for one before
    the start); False when ``done`` was set first."""
    while not done.is_set():
        stamp = executor.current_stamp
        if plan_time < 0 or (stamp is not None and executor.now() >= stamp.seconds + plan_time):
            return True
        time.sleep(0.002)
    return False


def running(executor) -> bool:
    """The motion is stamped and not held before its start."""
    return executor.current_stamp is not None and not executor.held_before_start


def watch_standing(executor, sim, mine, seq: Sequence, done: threading.Event) -> None:
    """Until ``done``: the largest joint speed (physics) of an arm whose phase is ``paused``,
    in the runs ``mine(run)`` accepts, into ``seq.max_standing_speed``."""
    while not done.is_set():
        run = executor.last_run
        if run is not None and mine(run):
            snap = sim.shared.snapshot()
            for arm, r in run.arms.items():
                if r.phase is ArmPhase.PAUSED:
                    speed = float(np.abs(snap.arms[arm].velocities).max())
                    seq.max_standing_speed = max(seq.max_standing_speed, speed)
        time.sleep(0.005)


def arm_moves(run) -> set:
    """Every (from, to) phase move the arms of ``run`` made, as words."""
    moves = set()
    for r in run.arms.values():
        phases = [ArmPhase.IDLE] + [p for p, _cause in r.phases]
        moves |= {(a.value, b.value) for a, b in zip(phases, phases[1:])}
    return moves


def problems(seq: Sequence, out: dict, threads, sim) -> list[str]:
    """What broke an invariant of the module docstring (empty: none)."""
    found = []
    if any(t.is_alive() for t in threads):
        found.append("a test thread did not end")
    arm_threads = [t.name for t in threading.enumerate() if t.name.startswith("mjmr-arm-")]
    if arm_threads:
        found.append(f"arm threads left running: {arm_threads}")
    report = seq.report
    if report is None:
        found.append(f"execute returned no report: {out.get('refused')!r}")
        return found
    if report.status not in (ExecutionStatus.SUCCEEDED, ExecutionStatus.STOPPED,
                             ExecutionStatus.CANCELED, ExecutionStatus.FAILED):
        found.append(f"status {report.status}")
    for arm, r in report.arms.items():
        if not r.stop_confirmed or r.status is ArmStatus.UNCONFIRMED_STOP:
            found.append(f"{arm}: stop not confirmed ({r.status.value}: {r.error_string})")
    failure = report.first_failure
    for req in seq.requests:
        if isinstance(req.answer, str) and req.answer.startswith("unexpected"):
            found.append(f"{req.action} at {req.at:.3f} raised {req.answer}: {req.text}")
        if req.answer is not True:
            continue
        if req.action == "pause" and req.running and not any(
                s.kind is GoalKind.PAUSE and s.reason == req.text for s in report.stops):
            found.append(f"pause at {req.at:.3f} returned True, no pause in the report")
        if req.action == "stop" and not (
                any(s.kind is GoalKind.STOP and s.reason == req.text for s in report.stops)
                or report.status in (ExecutionStatus.CANCELED, ExecutionStatus.FAILED)
                or any(s.kind is GoalKind.PAUSE for s in report.stops)):
            found.append(f"stop at {req.at:.3f} returned True; the report shows no stop")
        if req.action == "abort" and not (
                failure is not None and (req.text in failure.error_string
                                         or failure.reason.value != "external_abort")):
            found.append(f"abort at {req.at:.3f} returned True; first failure {failure}")
    if seq.max_standing_speed > STANDING_SPEED:
        found.append(f"a paused arm moved at {seq.max_standing_speed:.4f} rad/s")
    for arm, server in sim.arms.items():   # every goal it was given has ended
        running_goals = [k for k, t in enumerate(server.tickets) if not t.done.is_set()]
        if running_goals:
            found.append(f"{arm}: its controller still runs goal(s) {running_goals} of "
                         f"{len(server.tickets)} after execute returned")
    snap = sim.shared.snapshot()
    for arm, r in report.arms.items():
        if r.status is ArmStatus.STOPPED:
            speed = float(np.abs(snap.arms[arm].velocities).max())
            if speed > REST_SPEED:
                found.append(f"{arm} reported stopped, moving at {speed:.4f} rad/s")
    return found


class Bench:
    """The tiny pair's simulator and an executor in one ROS context, for many sequences."""

    def __init__(self, tmp: Path) -> None:
        from mj_manipulator_ros.ros.context import RosContext
        from mj_manipulator_ros.ros.executor import MultiArmExecutor
        from mj_manipulator_ros.sim.sim_node import SimNode
        from tiny_arm import tiny_config

        # the start lead is waited on sim time but covers wall-clock work (sending the goals,
        # their acceptance): scaled by the pace, as the bring-up's rehearsal does
        # (hil/session.py), so the goals get the wall time they get at real time (at 2x with
        # the plain 0.25 s, a homing goal was taken 26 ms late after 900 sequences: refused)
        config = tiny_config(tmp, sim={"real_time_factor": PACE},
                             execution={"use_sim_time": True, "max_pause_s": MAX_PAUSE_S})
        config = dataclasses.replace(config, executor=config.executor.with_pace(PACE))
        self.config = config
        self.ros = RosContext()
        self.sim = SimNode(config, context=self.ros.context).start()
        self.executor = MultiArmExecutor(config.executor, context=self.ros.context)
        #: the homing moves between sequences that did not succeed (each tried again)
        self.homes_failed: list[str] = []

    def run(self, seeds) -> list[Sequence]:
        out = []
        for seed in seeds:
            out.append(run_one(self.executor, self.sim, seed))
            self.home_after(out[-1])
        return out

    def home_after(self, seq: Sequence) -> None:
        """:meth:`_home` after ``seq``; when it cannot, what ``seq`` left is said."""
        try:
            self._home()
        except MjManipulatorError as exc:
            raise RuntimeError(
                f"could not bring the arms home after seed {seq.seed} ({exc}); its problems: "
                f"{seq.problems}; its requests: {[dataclasses.asdict(r) for r in seq.requests]}"
                f"; its report: {seq.report.summary() if seq.report else None}") from exc

    def _home(self) -> None:
        """Back to the swing's start (0) after a sequence that ended elsewhere: the approach
        move, checked like any plan."""
        from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
        if not self._away():
            return
        rest = MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), np.array([0.0, 0.1]),
                                              np.zeros((2, 2)), np.zeros((2, 2)))
                             for a in ("left", "right")})
        for _ in range(HOME_TRIES):   # the fixture's move, not what is measured: counted
            report = self.executor.execute(rest, approach=True)
            if report.succeeded:
                return
            self.homes_failed.append(report.summary().splitlines()[0])
        raise RuntimeError(f"could not bring the arms home: {report.summary()}")

    def _away(self) -> bool:
        snap = self.sim.shared.snapshot()
        return any(float(np.abs(s.positions).max()) > 0.005 for s in snap.arms.values())

    def close(self) -> None:
        self.executor.close()
        self.sim.close()
        self.ros.close()


def run_seeds(bench_class, first: int, count: int) -> tuple[list[Sequence], str, list[str]]:
    """``count`` sequences from seed ``first`` on a fresh ``bench_class`` (closed after).
    Returns the sequences, why the fixture could not go on ('' when it could), and the homing
    moves that failed."""
    seqs: list[Sequence] = []
    aborted = ""
    with tempfile.TemporaryDirectory() as tmp:
        bench = bench_class(Path(tmp))
        try:
            for seed in range(first, first + count):
                seqs.extend(bench.run([seed]))
        except RuntimeError as exc:   # the fixture could not go on: said, with what ran
            aborted = str(exc)
        finally:
            bench.close()
    return seqs, aborted, bench.homes_failed


def tally(seqs: list[Sequence]) -> tuple[dict, dict, list[dict]]:
    """Per status, the count of sequences; per "action: answer", the count of requests; the
    sequences with problems (seed, problems)."""
    statuses: dict = {}
    answers: dict = {}
    for s in seqs:
        key = s.report.status.value if s.report else "none"
        statuses[key] = statuses.get(key, 0) + 1
        for r in s.requests:
            k = f"{r.action}: {r.answer}"
            answers[k] = answers.get(k, 0) + 1
    return statuses, answers, [{"seed": s.seed, "problems": s.problems}
                               for s in seqs if s.problems]


def run_and_report(bench, description: str, default_sequences: int, conditions: str,
                   extra=lambda seqs: {}) -> int:
    """The command line of a random-sequence benchmark: ``--sequences`` and ``--seed``, the
    seeds run on ``bench``, and one JSON summary (the figures every such benchmark reports, and
    ``extra(seqs)``'s). Exit status 1 when a sequence had a problem or the run was aborted."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sequences", type=int, default=default_sequences)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.monotonic()
    seqs, aborted, homes_failed = run_seeds(bench, args.seed, args.sequences)
    statuses, answers, bad = tally(seqs)
    print(json.dumps({"sequences": len(seqs), "with_problems": len(bad), "problems": bad[:20],
                      "statuses": statuses, "answers": dict(sorted(answers.items())),
                      "max_standing_speed": round(max((s.max_standing_speed for s in seqs),
                                                      default=0.0), 5),
                      **extra(seqs),
                      "homes_failed": homes_failed[:10], "aborted": aborted,
                      "wall_s": round(time.monotonic() - started, 1),
                      "conditions": conditions}, indent=1))
    return 1 if bad or aborted else 0


def _transitions(seqs) -> dict:
    """The arm table's transitions the sequences reached, and those they never did."""
    from mj_manipulator_ros.core.arm_phase import TRANSITIONS
    seen = set().union(*(s.arm_moves for s in seqs))
    return {"refusals": sorted({f"{r.action}: {r.answer}: {r.text}" for s in seqs
                                for r in s.requests if isinstance(r.answer, str)})[:20],
            "arm_transitions_seen": len(seen & {(a.value, b.value) for a, b in TRANSITIONS}),
            "arm_transitions_in_table": len(TRANSITIONS),
            "arm_transitions_never_seen": sorted(f"{a.value} -> {b.value}" for a, b in TRANSITIONS
                                                 if (a.value, b.value) not in seen)}


def main() -> int:
    return run_and_report(Bench, __doc__.split("\n\n")[0], 1000,
                          f"tiny pair, in-process simulator at {PACE:g}x real time, sim time, "
                          "Fast DDS loopback", _transitions)


if __name__ == "__main__":
    raise SystemExit(main())
