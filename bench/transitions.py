"""Random transitions on the simulated OpenArm pair: controlled stops, pauses, resumes and speed
changes (the executor's ``PlanSpeed``), cancels and raw preemptions (what a client does to a
joint_trajectory_controller), at random control cycles, in each controller kind.

The physics is driven synchronously (no DDS, no wall clock: the controllers' clock is physics
time), so thousands of transitions run in minutes and every run is reproducible from its seed.
Goals go to the very simulated controllers the simulator serves; ``PlanSpeed`` builds them as
the executor does. Every control cycle each arm's position reference is recorded; after the run:

- controlled transitions (speed, stop, pause, resume) once the plan moves, and plain plan
  following: the largest |velocity| / limit and |acceleration| / limit of the reference by
  finite differences, and the largest one-cycle position step (asserted within the limits by
  the test);
- cancel (hold), raw preemption (stamp 0: the controller starts from the measured state), the
  start of each plan (a fresh goal from rest: the same) and controlled transitions asked before
  the plan moves (``*_before_start``: the controller is still in its move from the measured
  state to the first point, which no goal can continue exactly): the same figures, measured and
  reported;
- freezes: a goal that never got a result, a round whose arms stopped moving with a goal
  still active past its end (counted; asserted 0).

Usage: python bench/transitions.py [--transitions 1000] [--kinds position,torque,mit] [--seed 1]
Prints JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from dataclasses import dataclass, field

import numpy as np

from mj_manipulator_ros.core.approach import approach_plan
from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.goal_kind import GoalKind
from mj_manipulator_ros.core.interpolation import remainder
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.core.execution_phase import MotionPhase
from mj_manipulator_ros.core.plan_speed import PlanSpeed
from mj_manipulator_ros.core.sync import CancelScope, PlanClock, StartStamp
from mj_manipulator_ros.resources import config_file, share_dir
from mj_manipulator_ros.sim.goal import GoalOutcome, GoalRequest, check_goal
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.sim_config import ArmSimSettings, sim_config

CONFIGS = {"position": "sim_openarm.yaml", "torque": "sim_openarm.yaml",
           "mit": "sim_openarm_twin.yaml"}
CONTROLLED = ("speed", "stop", "pause", "resume")
UNCONTROLLED = ("cancel", "preempt")
#: a transition's window: from its request until its ramp has ended, plus this (s)
WINDOW_TAIL_S = 0.05


class DirectRun:
    """What ``PlanSpeed`` needs of an arm's run, submitting straight to the controller."""

    def __init__(self, rehearsal: "Rehearsal", arm: str) -> None:
        self.rehearsal, self.arm = rehearsal, arm
        self.tickets: list = []

    @property
    def paused(self) -> bool:
        kind, ticket = self.tickets[-1] if self.tickets else (None, None)
        return (kind is GoalKind.PAUSE and ticket.done.is_set()
                and ticket.outcome is GoalOutcome.SUCCEEDED)

    def request_retime(self, trajectory, stamp: StartStamp, kind: GoalKind,
                       departs_s: float | None = None) -> None:
        self.tickets.append((kind, self.rehearsal.submit(self.arm, trajectory,
                                                         stamp.seconds)))

    def request_end(self) -> None:
        pass


@dataclass
class Outcome:
    """What one rehearsal measured."""

    kind: str
    seed: int
    transitions: dict = field(default_factory=dict)      # kind -> count
    refused: dict = field(default_factory=dict)          # kind -> count (nothing to act on)
    peaks: dict = field(default_factory=dict)            # class -> [v/vmax, a/amax, step rad]
    goals: int = 0
    goals_without_result: int = 0
    freezes: int = 0
    cycles: int = 0
    wall_s: float = 0.0


class Rehearsal:
    """The OpenArm pair in controller ``kind``, random transitions from ``seed``."""

    def __init__(self, kind: str, seed: int) -> None:
        cfg = sim_config(load_config(config_file(CONFIGS[kind])))
        if kind == "torque":
            cfg = dataclasses.replace(cfg, sim=dataclasses.replace(
                cfg.sim, arms={a: ArmSimSettings(controller="torque") for a in cfg.sim.arms}
                or {a.name: ArmSimSettings(controller="torque") for a in cfg.executor.arms}))
        self.cfg = cfg
        self.config = cfg.executor
        self.shared = SharedModel.from_config(cfg)
        self.period = self.shared.control_period
        self.rng = np.random.default_rng(seed)
        self.plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
        self.speed = PlanSpeed(self.config, lambda: int(round(self.now() * 1e9)),
                               lambda pose: None)
        self.outcome = Outcome(kind, seed)
        self.times: list[float] = []
        self.refs: list[dict] = []
        self.windows: list[tuple[float, float, str]] = []   # (from, to, class)
        self.all_tickets: list = []
        self.limits = {}
        for a in self.plan.arm_names:
            lim = self.config.arm(a).joint_limits
            self.limits[a] = (
                np.array([lim[j].velocity for j in self.plan[a].joint_names]),
                np.array([lim[j].acceleration or self.config.execution.stop_acceleration
                          for j in self.plan[a].joint_names]))

    def now(self) -> float:
        return float(self.shared.data.time)

    def submit(self, arm: str, trajectory, stamp: float | None):
        t = trajectory
        req = GoalRequest(t.joint_names, t.times.tolist(), t.positions.tolist(),
                          (t.velocities.tolist() if t.velocities is not None
                           else [[] for _ in t.times]),
                          (t.accelerations.tolist() if t.accelerations is not None
                           else [[] for _ in t.times]), stamp or 0.0)
        controller = self.shared.controllers[arm]
        reason, goal = check_goal(req, controller.joint_names, self.now(),
                                  self.cfg.sim.tolerances)
        if reason is not None:
            raise AssertionError(f"{arm}: goal rejected: {reason}")
        ticket = controller.submit(goal)
        self.all_tickets.append(ticket)
        return ticket

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            t = self.now()   # the references below are evaluated at this time, by this cycle
            self.shared.step_cycle()
            self.times.append(t)
            self.refs.append({a: np.array(c.follower.position)
                              for a, c in self.shared.controllers.items()})

    def measured(self) -> dict:
        snap = self.shared.snapshot()
        return {a: s.positions for a, s in snap.arms.items()}

    def start_round(self, plan: MultiArmPlan, runs: dict) -> PlanClock:
        stamp = self.now() + self.config.execution.start_lead_s
        # a fresh goal from rest: the controller starts from the measured state (measured)
        self.windows.append((self.now(), stamp + WINDOW_TAIL_S, "start"))
        self.round_stamp = stamp
        for arm, run in runs.items():
            run.tickets.append(("plan", self.submit(arm, plan[arm], stamp)))
        clock = PlanClock(stamp)
        self.speed.begin(plan, runs, clock, CancelScope(), stamp)
        return clock

    def run(self, transitions: int) -> Outcome:
        started = time.perf_counter()
        out = self.outcome
        done = 0
        start = {a: self.plan[a].positions[0] for a in self.plan.arm_names}
        at_start = False
        while done < transitions:
            # each round: back to the plan's start (an approach, transitions included) until
            # one reached it; then the plan (the executor's start check would refuse it
            # anywhere else)
            plan = self.plan if at_start else approach_plan(self.config, self.measured(), start)
            runs = {a: DirectRun(self, a) for a in plan.arm_names}
            clock = self.start_round(plan, runs)
            done += self._play(plan, runs, clock, transitions - done)
            self.speed.end()
            self._drain(runs)
            at_start = plan is not self.plan and all(
                r.tickets[-1][0] in (GoalKind.PLAN, GoalKind.SPEED, GoalKind.RESUME) and
                r.tickets[-1][1].outcome is GoalOutcome.SUCCEEDED for r in runs.values())
        out.cycles = len(self.times)
        out.wall_s = round(time.perf_counter() - started, 1)
        self._measure()
        return out

    def _play(self, plan, runs, clock, budget: int) -> int:
        """Random transitions while the round's plan runs; returns how many were made."""
        made = 0
        end_guard = self.now() + plan.duration / self.config.execution.min_speed_factor
        while made < budget and self.now() < end_guard:
            self.step(int(self.rng.integers(5, 400)))
            if all(r.tickets[-1][1].done.is_set() for r in runs.values()) and \
                    self.speed.state is not MotionPhase.PAUSED:
                return made          # the round ended (succeeded, stopped, canceled)
            kind = str(self.rng.choice(CONTROLLED + UNCONTROLLED,
                                       p=[0.3, 0.15, 0.2, 0.15, 0.1, 0.1]))
            requested, ramps = self.now(), self.speed.ramp_total_s
            acted = self._act(kind, plan, runs, clock)
            self.outcome.transitions[kind] = self.outcome.transitions.get(kind, 0) + acted
            if not acted:
                self.outcome.refused[kind] = self.outcome.refused.get(kind, 0) + 1
                continue
            made += 1
            ramp = self.speed.ramp_total_s - ramps if kind in CONTROLLED else 1.0
            until = requested + self.config.execution.start_lead_s + WINDOW_TAIL_S + ramp
            # before the plan moves, each controller still runs its move from the measured
            # state to the first point, which no goal can continue exactly (measured)
            early = requested < self.round_stamp + WINDOW_TAIL_S
            self.windows.append((requested, until, kind + ("_before_start" if early else "")))
            if kind in UNCONTROLLED or kind == "stop":
                return made
        return made

    def _act(self, kind: str, plan, runs, clock) -> bool:
        speed = self.speed
        if kind == "speed":   # (answers are truthy when applied: core/answer.py)
            return speed.set_speed(float(self.rng.uniform(0.2, 1.0))).applied
        if kind == "stop":
            return speed.stop("random stop").applied
        if kind == "pause":
            return speed.pause("random pause").applied
        if kind == "resume":
            return speed.resume().applied
        if kind == "cancel":
            for arm, run in runs.items():
                self.shared.controllers[arm].cancel(run.tickets[-1][1])
            return True
        # preempt: the rest of the plan from the current plan time, stamp 0 (as a client that
        # re-sends a goal: the controller starts it from the measured state)
        s = clock.plan_time(self.now())
        if s >= plan.duration - 0.05 or speed.state is not MotionPhase.RUNNING:
            return False
        for arm, run in runs.items():
            run.tickets.append(("preempt", self.submit(arm, remainder(plan[arm], max(s, 0.0),
                                                                       1.0), None)))
        return True

    def _drain(self, runs) -> None:
        """Run until every goal of the round has a result (bounded); count the freezes."""
        for _ in range(int(60.0 / self.period)):
            if all(t.done.is_set() for t in self.all_tickets):
                return
            self.step()
        self.outcome.freezes += 1

    def _measure(self) -> None:
        out = self.outcome
        out.goals = len(self.all_tickets)
        out.goals_without_result = sum(not t.done.is_set() for t in self.all_tickets)
        t = np.array(self.times)
        classes = np.full(t.size, "plan", dtype=object)
        for lo, hi, kind in self.windows:   # later windows win
            classes[(t >= lo) & (t <= hi)] = kind
        for arm in self.refs[0]:
            q = np.array([r[arm] for r in self.refs])
            v_max, a_max = self.limits[arm]
            dt = np.diff(t)
            v = np.diff(q, axis=0) / dt[:, None]
            a = np.diff(v, axis=0) / dt[1:, None]
            step = np.abs(np.diff(q, axis=0)).max(axis=1)
            v_use = (np.abs(v) / v_max).max(axis=1)
            a_use = (np.abs(a) / a_max).max(axis=1)
            for cls in set(classes):
                mask = classes[1:] == cls       # a difference belongs to its later cycle
                amask = classes[2:] == cls
                if not mask.any():
                    continue
                prev = out.peaks.get(cls, [0.0, 0.0, 0.0])
                out.peaks[cls] = [max(prev[0], float(v_use[mask].max())),
                                  max(prev[1], float(a_use[amask].max()) if amask.any() else 0.0),
                                  max(prev[2], float(step[mask].max()))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transitions", type=int, default=1000)
    parser.add_argument("--kinds", default="position,torque,mit")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    results = []
    for kind in args.kinds.split(","):
        results.append(dataclasses.asdict(Rehearsal(kind, args.seed).run(args.transitions)))
    print(json.dumps({"conditions": "synchronous physics (no wall clock), one core, seeded",
                      "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
