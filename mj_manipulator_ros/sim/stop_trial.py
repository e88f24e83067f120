"""A stop measured in the simulator: a plan run from its start, a stop asked at one plan time,
each arm's time to rest and travel measured on the simulated joints.

The physics is driven synchronously (``sim/trial.py``: no DDS, no wall clock, reproducible) and
the stop is sent as the executor sends it, computed by the executor's own code:

- ``controlled`` (an operator's stop, a pause not resumed, the peers of a failed arm): every
  arm so stopped keeps the plan for one start lead, then ramps to rest along it
  (``core/time_scaling.stop_after_lead``: one ramp for every arm of the plan, as the executor
  computes it); its goal taken at the ramp's start. Where no ramp within the joints' bounds
  exists the executor cancels instead: so does this.
- ``hold`` (a failed arm, every arm canceled): the arm's goal canceled at the request; its
  controller holds where the cancel finds it.

Measured per arm, from the request (physics time), on the positions every control cycle: the
time until its last motion faster than ``STILL_SPEED`` (finite differences of consecutive
cycles, as ``core/stop_meter.py`` counts it on joint states), the hand's path length (the body
of the arm's last joint, by forward kinematics of the measured positions in a model of its own),
and the largest joint path length. The arm is watched until ``observe_s`` after the request.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Mapping, Optional

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import RampLimitError
from mj_manipulator_ros.core.joint_path import joint_travel
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.stop_meter import STILL_SPEED
from mj_manipulator_ros.core.time_scaling import JointBounds, stop_after_lead
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.sim_config import SimConfig
from mj_manipulator_ros.sim.trial import positions, start_pose, step_until, submit

#: the plan's goals start this long after the trial begins (simulated), s
LEAD_S = 0.05


class ArmStop(str, enum.Enum):
    """How an arm is stopped."""

    CONTROLLED = "controlled"   # one start lead along the plan, then the executor's ramp
    HOLD = "hold"               # its goal canceled: the controller holds


@dataclass(frozen=True)
class MeasuredArmStop:
    """One arm's stop, measured.

    Attributes:
        how: how it was stopped (a controlled stop with no ramp within the bounds is a hold).
        time_s: from the request to its last motion faster than STILL_SPEED, s (0: it stood).
        hand_travel_m: the hand's path length from the request on, m.
        joint_travel: the largest joint path length from the request on, rad or m.
        settled: it was still for the last ``STILL_SPEED`` check of the window (False: still
            moving when the watch ended; its figures are then lower bounds).
    """

    how: ArmStop
    time_s: float
    hand_travel_m: float
    joint_travel: float
    settled: bool


def measure_stop(config: SimConfig, plan: MultiArmPlan, bounds: Mapping[str, JointBounds],
                 request: float, stops: Mapping[str, ArmStop], lead_s: float,
                 observe_s: float = 1.5, payload_kg: float = 0.0,
                 others: Optional[Mapping[str, np.ndarray]] = None) -> dict[str, MeasuredArmStop]:
    """Run ``plan`` from its start in a fresh simulation of ``config`` (its injected faults
    left out), stop each arm of ``stops`` as it says at plan time ``request`` (s), and measure
    every arm of the plan (an arm not in ``stops`` keeps its goal).

    Args:
        bounds: the joints' bounds the executor's ramp keeps (``config_bounds``).
        lead_s: the executor's start lead (``execution.start_lead_s``), s.
        payload_kg: a mass added at each planned arm's hand (the body of its last joint, at
            that body's centre of mass) in the simulated model only: what the arm carries
            and its controllers' own models do not know.
        others: the poses of arms not in the plan, (J,) in their configured joint order
            (default: the scene's initial pose); their controllers hold them.
    """
    clean = dataclasses.replace(config, sim=dataclasses.replace(config.sim, faults={},
                                                                crossed_arms=()))
    scene = start_pose(clean.build_scene(), plan.arms, others)
    if payload_kg:
        for arm, traj in plan.arms.items():
            binding = scene.arms[arm]
            last = list(binding.joint_names).index(traj.joint_names[-1])
            scene.model.body_mass[int(scene.model.jnt_bodyid[binding.joint_ids[last]])] += \
                payload_kg
    shared = SharedModel(scene, clean.sim)
    shared.clock.anchor(0.0)
    stamp = float(shared.data.time) + LEAD_S
    tickets = {a: submit(shared, clean, a, plan[a], stamp) for a in plan.arm_names}
    asked = stamp + request
    step_until(shared, asked)
    how = dict(stops)
    ramp = None
    if any(h is ArmStop.CONTROLLED for h in how.values()):
        try:
            s0, ramp = stop_after_lead(plan, bounds, request, lead_s, 1.0)
        except RampLimitError:   # no controlled stop from here: the executor cancels
            how = {a: ArmStop.HOLD for a in how}
    rows = {a: [positions(shared, a, plan[a].joint_names)] for a in plan.arm_names}
    times = [float(shared.data.time)]
    for arm, h in how.items():
        if h is ArmStop.HOLD:
            shared.controllers[arm].cancel(tickets[arm])
    pending = ramp is not None
    end = asked + observe_s
    while float(shared.data.time) < end - 1e-12:
        if pending and float(shared.data.time) >= stamp + s0 - 1e-12:
            for arm, h in how.items():   # the ramp's goals taken at its start
                if h is ArmStop.CONTROLLED:
                    submit(shared, clean, arm, ramp.trajectories[arm], float(shared.data.time))
            pending = False
        shared.step_cycle()
        times.append(float(shared.data.time))
        for arm in plan.arm_names:
            rows[arm].append(positions(shared, arm, plan[arm].joint_names))
    t = np.asarray(times) - asked
    out = {}
    for arm, traj in plan.arms.items():
        q = np.asarray(rows[arm])
        speed = np.max(np.abs(np.diff(q, axis=0)), axis=1) / np.diff(t)
        fast = np.flatnonzero(speed > STILL_SPEED)
        rest = 0.0 if fast.size == 0 else float(t[fast[-1] + 1])
        out[arm] = MeasuredArmStop(how.get(arm, ArmStop.CONTROLLED), rest,
                                   hand_path(scene, arm, traj.joint_names, q),
                                   joint_travel(q),
                                   fast.size == 0 or fast[-1] + 1 < t.size - 1)
    return out


def hand_path(scene, arm: str, joint_names, q: np.ndarray) -> float:
    """The path length (m) of ``arm``'s hand (the body of the last of ``joint_names``, as
    ``check/stop_distances`` counts it) through the poses ``q`` (M, J; columns in
    ``joint_names``' order), the other joints at the scene's initial pose: forward kinematics in
    an MjData of its own."""
    model = scene.model
    data = mujoco.MjData(model)
    data.qpos[:] = scene.initial_qpos
    binding = scene.arms[arm]
    order = [list(binding.joint_names).index(j) for j in joint_names]
    adr = np.asarray(binding.qpos_adr)[order]
    body = int(model.jnt_bodyid[binding.joint_ids[order[-1]]])
    xyz = np.empty((q.shape[0], 3))
    for i, row in enumerate(q):
        data.qpos[adr] = row
        mujoco.mj_kinematics(model, data)
        xyz[i] = data.xpos[body]
    return float(np.sum(np.linalg.norm(np.diff(xyz, axis=0), axis=1)))
