"""A synchronous simulation trial: goals submitted straight to the simulated controllers and
physics stepped one control cycle at a time (no DDS, no wall clock, reproducible). What the
simulator's own predictions run on (``hold_overshoot.py``, ``stop_settle.py``)."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

import numpy as np

from mj_manipulator_ros.core.plan import ArmTrajectory
from mj_manipulator_ros.model.scene import Scene
from mj_manipulator_ros.sim.goal import GoalRequest, GoalTicket, check_goal
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.sim_config import SimConfig


def start_pose(scene: Scene, trajectories: Mapping[str, ArmTrajectory],
               poses: Optional[Mapping[str, np.ndarray]] = None) -> Scene:
    """``scene`` starting with each arm of ``trajectories`` at its first point, and each arm of
    ``poses`` at its pose (J,), in the arm's configured joint order."""
    start = scene.initial_qpos.copy()
    for arm, traj in trajectories.items():
        binding = scene.arms[arm]
        order = [list(traj.joint_names).index(j) for j in binding.joint_names]
        start[binding.qpos_adr] = np.asarray(traj.positions[0])[order]
    for arm, pose in (poses or {}).items():
        if arm not in trajectories:
            start[scene.arms[arm].qpos_adr] = np.asarray(pose, dtype=float)
    return dataclasses.replace(scene, initial_qpos=start)


def submit(shared: SharedModel, config: SimConfig, arm: str, traj: ArmTrajectory,
           stamp: float) -> GoalTicket:
    """``traj`` as a goal to ``arm``'s simulated controller, starting at ``stamp`` (s, physics
    time: the trial's clock is anchored at 0), checked as the action server checks it."""
    rows = lambda a: a.tolist() if a is not None else [[] for _ in traj.times]  # noqa: E731
    req = GoalRequest(traj.joint_names, traj.times.tolist(), traj.positions.tolist(),
                      rows(traj.velocities), rows(traj.accelerations), stamp)
    controller = shared.controllers[arm]
    reason, goal = check_goal(req, controller.joint_names, float(shared.data.time),
                              config.sim.tolerances)
    if reason is not None:
        raise ValueError(f"arm {arm!r}: the simulated controller rejects the goal: {reason}")
    return controller.submit(goal)


def step_until(shared: SharedModel, t: float) -> None:
    """Step control cycles until physics time reaches ``t`` (s)."""
    while float(shared.data.time) < t - 1e-12:
        shared.step_cycle()


def positions(shared: SharedModel, arm: str, joint_names: Sequence[str]) -> np.ndarray:
    """``arm``'s measured positions (J,), in the order of ``joint_names``."""
    snap = shared.snapshot()
    names = list(shared.scene.arms[arm].joint_names)
    return snap.arms[arm].positions[[names.index(j) for j in joint_names]]
