"""How far an arm runs on after a cancel, measured in the simulator, per controller kind.

A cancel makes joint_trajectory_controller (and our simulated controllers) hold the position
measured when the cancel arrives; the arm, moving, runs on past it before its servo brings it
back to rest. The pre-flight gate's stop band assumes it runs on at most
``execution.hold_overshoot_s`` of plan time (``check/failure_band.py``); this measures it.

Each trial runs the plan from its start in a fresh copy of the simulation (the physics driven
synchronously: no DDS, no wall clock, reproducible), cancels every arm's goal at one request
plan time, lets ``SETTLE_S`` pass, and finds where along the plan each arm came to rest: the
plan time whose pose is nearest the arm's final pose (searched within ``SETTLE_S`` of the
request, every ``STEP_S``; of poses within ``TIE`` of the nearest, the one nearest the request;
not where the arm's plan speed at the request is below the watch's ``MIN_SPEED``: a standing
arm has no run-on, NaN).
The cancel is taken at the next control cycle: no transport latency (HIL stage 3 measures the
robot's, latency included); the action server's cancel faults apply (``ignore_cancel``: refused;
``cancel_delay_s``: taken that much later). Figures per arm and request: the run-on (that plan time minus the
request's, s; negative for an arm that lagged its reference by more than it ran on) and the
largest joint travel from the cancel to rest (rad or m).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from mj_manipulator_ros.core.execution_watch import MIN_SPEED
from mj_manipulator_ros.core.interpolation import nearest_plan_time, sample
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.sim_config import ArmFaults, SimConfig
from mj_manipulator_ros.sim.trial import positions, start_pose, step_until, submit

#: after the cancel, the time the arm is given to come to rest (simulated), s
SETTLE_S = 0.5
#: the plan time grid the rest pose is located on, s
STEP_S = 0.001
#: poses this close (max-norm, rad or m) to the nearest count as equally near: the one nearest
#: the request in plan time is taken (where the plan barely moves, plan time is ambiguous)
TIE = 1e-4
#: the plan goal starts this long after the trial begins (simulated), s
LEAD_S = 0.05


@dataclass(frozen=True)
class HoldOvershoot:
    """Run-on after a cancel of every arm, per request.

    Attributes:
        kinds: arm -> simulated controller kind.
        request (K,): plan times of the cancels, s.
        run_on: arm -> (K,) plan time past the request where the arm came to rest, s (NaN
            where the arm's plan stood at the request).
        travel: arm -> (K,) largest joint travel from the cancel request to rest.
        residual: arm -> (K,) max-norm distance of the rest pose from the plan's nearest pose
            (how far off the path it stands).
    """

    kinds: Mapping[str, str]
    request: np.ndarray
    run_on: Mapping[str, np.ndarray]
    travel: Mapping[str, np.ndarray]
    residual: Mapping[str, np.ndarray]

    def worst_run_on(self) -> tuple[float, str, float]:
        """(run-on s, arm, request plan time) of the largest run-on (NaN, "", NaN when every
        arm stood at every request)."""
        best = (float("nan"), "", float("nan"))
        for arm, values in self.run_on.items():
            if np.all(np.isnan(values)):
                continue
            k = int(np.nanargmax(values))
            if np.isnan(best[0]) or values[k] > best[0]:
                best = (float(values[k]), arm, float(self.request[k]))
        return best

    def summary(self, bound: float | None = None) -> str:
        run_on, arm, at = self.worst_run_on()
        if np.isnan(run_on):
            return "cancel (hold) measured in the simulator: every arm stood at every request"
        kinds = ", ".join(f"{a} {k}" for a, k in self.kinds.items())
        lines = [f"cancel (hold) measured in the simulator ({kinds}; {self.request.size} "
                 f"request times): the longest run-on {run_on * 1e3:.1f} ms of plan time "
                 f"({arm}, cancel at plan time {at:.2f} s)"
                 + ("" if bound is None else
                    f"; execution.hold_overshoot_s {bound * 1e3:.0f} ms "
                    + ("covers it" if run_on <= bound else "DOES NOT cover it"))]
        for a in self.run_on:
            moving = int(np.count_nonzero(~np.isnan(self.run_on[a])))
            if moving == 0:
                lines.append(f"  {a}: standing at every request")
                continue
            lines.append(f"  {a}: run-on up to {np.nanmax(self.run_on[a]) * 1e3:.1f} ms ("
                         f"{moving} requests while moving), joint travel up to "
                         f"{np.max(self.travel[a]):.4f}, off the path by up to "
                         f"{np.nanmax(self.residual[a]):.4f}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        def listed(v) -> list:   # JSON has no NaN: a standing arm's figure is null
            return [None if np.isnan(x) else float(x) for x in np.asarray(v, dtype=float)]
        return {"kinds": dict(self.kinds), "request": self.request.tolist(),
                "run_on": {a: listed(v) for a, v in self.run_on.items()},
                "travel": {a: listed(v) for a, v in self.travel.items()},
                "residual": {a: listed(v) for a, v in self.residual.items()},
                "worst_run_on": [None if isinstance(x, float) and np.isnan(x) else x
                                 for x in self.worst_run_on()]}


def measure_hold(config: SimConfig, plan: MultiArmPlan, requests: Sequence[float]
                 ) -> HoldOvershoot:
    """Cancel every arm at each plan time of ``requests`` (see the module docstring).

    Args:
        config: the simulation (its scene, controller kinds, faults).
        plan: the plan (validated), over arms of the scene.
        requests: plan times of the cancels, s, within the plan.
    """
    scene = start_pose(config.build_scene(), plan.arms)
    requests = np.asarray(requests, dtype=float)
    run_on = {a: np.empty(requests.size) for a in plan.arm_names}
    travel = {a: np.empty(requests.size) for a in plan.arm_names}
    residual = {a: np.empty(requests.size) for a in plan.arm_names}
    for k, s in enumerate(requests):
        shared = SharedModel(scene, config.sim)
        shared.clock.anchor(0.0)
        stamp = float(shared.data.time) + LEAD_S
        tickets = {a: submit(shared, config, a, plan[a], stamp) for a in plan.arm_names}
        step_until(shared, stamp + s)
        at_cancel = _positions(shared, plan)
        # the action server's cancel faults, as it applies them: refused, or answered late
        delays = sorted((f.cancel_delay_s, arm) for arm, f in
                        ((a, config.sim.faults.get(a) or ArmFaults()) for a in tickets)
                        if not f.ignore_cancel)
        for delay, arm in delays:
            step_until(shared, stamp + s + delay)
            shared.controllers[arm].cancel(tickets[arm])
        step_until(shared, stamp + s + SETTLE_S)
        at_rest = _positions(shared, plan)
        for arm, traj in plan.arms.items():
            travel[arm][k] = float(np.max(np.abs(at_rest[arm] - at_cancel[arm])))
            _, v, _ = sample(traj, [s])
            if np.linalg.norm(v[0]) < MIN_SPEED:
                run_on[arm][k] = residual[arm][k] = np.nan   # standing: nothing runs on
                continue
            rest_time, residual[arm][k] = nearest_plan_time(
                traj, at_rest[arm], max(s - SETTLE_S, 0.0), min(s + SETTLE_S, plan.duration),
                STEP_S, near=s, tie=TIE)
            run_on[arm][k] = rest_time - s
    kinds = {a: config.sim.arm(a).controller for a in plan.arm_names}
    return HoldOvershoot(kinds, requests, run_on, travel, residual)


def _positions(shared: SharedModel, plan: MultiArmPlan) -> dict[str, np.ndarray]:
    """Each arm's measured positions in its plan's joint order."""
    return {arm: positions(shared, arm, traj.joint_names) for arm, traj in plan.arms.items()}
