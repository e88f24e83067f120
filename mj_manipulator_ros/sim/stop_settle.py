"""How long an arm takes to settle after a controlled stop, predicted on its own model.

HIL stage 3 measures, from a controlled stop's ramp start, the time until every joint of the
arm is and stays within ``settle_rad`` of where it comes to rest. The stop's *reference*
stands when its ramp ends; the arm itself lags its reference while moving and catches up after,
as its servos and inertia allow (0.14-0.2 s on the simulated OpenArm, 0.28 s on the ALOHA's
waist). That catch-up is the robot's own: this module predicts it by running the stop in a
fresh simulation of the robot's model, synchronously (no DDS, no wall clock, reproducible): the
motion from its start, the stop's retimed goal taken at its ramp's start, as
``core/time_scaling.ramp_trajectory`` builds it for the executor, then the arm left to settle.

The simulation is the configuration's (its scene, the arm's controller kind and gains) without
its injected faults: a fault is what the bring-up must find, never part of what it predicts.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional

import numpy as np

from mj_manipulator_ros.core.plan import ArmTrajectory
from mj_manipulator_ros.core.time_scaling import TimeScaling, ramp_trajectory
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.sim_config import SimConfig
from mj_manipulator_ros.sim.trial import positions, start_pose, step_until, submit

#: after the ramp ends, the time the arm is given to come to rest (simulated), s; a settle
#: time this long or longer is reported as infinite (it did not settle)
SETTLE_WINDOW_S = 1.5
#: the motion's goal starts this long after the trial begins (simulated), s
LEAD_S = 0.05


def predict_stop_settle(config: SimConfig, arm: str, traj: ArmTrajectory, plan_time_stamp: float,
                        ramp_s: float, tolerance: float,
                        others: Optional[Mapping[str, np.ndarray]] = None) -> float:
    """Seconds from the stop's ramp start until every joint of ``arm`` is and stays within
    ``tolerance`` (rad or m) of where it came to rest, in the simulation of ``config``.

    Args:
        config: the robot's simulation (faults are left out).
        arm: the arm stopped; ``traj`` its motion (times from its start, validated), stopped
            by a ramp of the plan's speed from 1 to 0 over ``ramp_s`` starting at plan time
            ``plan_time_stamp``.
        others: other arms' poses (J,) in their configured joint order (default: the scene's
            initial pose).
    """
    clean = dataclasses.replace(config, sim=dataclasses.replace(config.sim, faults={},
                                                                crossed_arms=()))
    scene = start_pose(clean.build_scene(), {arm: traj}, others)
    shared = SharedModel(scene, clean.sim)
    shared.clock.anchor(0.0)
    stamp = float(shared.data.time) + LEAD_S
    submit(shared, clean, arm, traj, stamp)
    ramp_at = stamp + plan_time_stamp
    step_until(shared, ramp_at)
    stop = ramp_trajectory(traj, plan_time_stamp, TimeScaling.ramp(1.0, 0.0, ramp_s),
                           then_plan=False)
    submit(shared, clean, arm, stop, float(shared.data.time))
    times, rows = [], []
    end = ramp_at + ramp_s + SETTLE_WINDOW_S
    while float(shared.data.time) < end - 1e-12:
        shared.step_cycle()
        times.append(float(shared.data.time))
        rows.append(positions(shared, arm, traj.joint_names))
    q = np.asarray(rows)
    away = np.flatnonzero(np.max(np.abs(q - q[-1]), axis=1) > tolerance)
    if away.size == 0:
        return 0.0
    if away[-1] + 1 >= len(times):
        return float("inf")
    return max(0.0, times[away[-1] + 1] - ramp_at)
