"""A replacement goal (a pause's, a stop's, a failed peer's stop) carries the executor's path
tolerance, so a controller aborts one its arm is not following instead of dragging the arm onto
it.

The race it closes (seen once in the suite under load): the simulator's own abort ended both
arms' goals at once; the executor read one abort first and sent the other arm a peer stop,
which that arm's controller, holding after its own abort, took as a new goal and followed: the
held arm was pulled 0.12 rad back onto the plan. Two halves, each forced: the executor's
replacement goals carry the tolerance (real executor, real DDS, the simulated controllers'
tickets); a controller holding an arm off a replacement's path aborts it at pick-up rather than
move (the simulated controller, stepped synchronously, as joint_trajectory_controller checks
path tolerances)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from mj_manipulator_ros.sim.goal import GoalRequest, check_goal
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.trial import positions, start_pose, step_until
from mj_manipulator_ros.core.tolerances import JointTolerance
from test_execution_watch import swing_plan
from tiny_arm import tiny_config

pytestmark = pytest.mark.slow


def test_the_stop_goals_carry_the_executors_path_tolerance(tiny_sim, ros, tmp_path) -> None:
    from mj_manipulator_ros.ros.executor import MultiArmExecutor

    sim = tiny_sim()
    cfg = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    plan = swing_plan(duration=2.0, amplitude=0.5)
    with MultiArmExecutor(cfg, context=ros.context) as ex:
        stopper = threading.Timer(1.0, lambda: ex.stop("test: a stop mid-way"))
        stopper.start()
        try:
            report = ex.execute(plan)
        finally:
            stopper.cancel()
    assert report.stops and report.stops[-1].ramp_s > 0, report.summary()
    tolerance = cfg.execution.path_tolerance_rad
    for arm in plan.arm_names:
        tickets = sim.arms[arm].tickets
        assert len(tickets) >= 2, (arm, len(tickets))
        first, stop = tickets[0].goal.tolerances, tickets[-1].goal.tolerances
        # the plan's goal as given (no tolerance asked: the controller's defaults) ...
        assert np.all(np.isinf(first.path_position)), first.path_position
        # ... its stop with the executor's own path tolerance on every joint
        assert np.allclose(stop.path_position, tolerance), stop.path_position


def _follow(tmp_path, path_tolerance: float | None) -> tuple[float, str]:
    """The left arm follows the swing; its goal is canceled (it holds), the plan runs on 0.3 s,
    then the same goal is sent again from its stamp, as a replacement joins its running goal
    mid-way. Returns how far the arm moved after the second goal and how that goal ended."""
    cfg = tiny_config(tmp_path)
    plan = swing_plan(duration=2.0, amplitude=0.5)
    traj = plan["left"]
    scene = start_pose(cfg.build_scene(), plan.arms)
    shared = SharedModel(scene, cfg.sim)
    shared.clock.anchor(0.0)
    stamp = float(shared.data.time) + 0.05
    controller = shared.controllers["left"]

    def goal(tolerance):
        rows = [list(r) for r in traj.positions]
        req = GoalRequest(traj.joint_names, traj.times.tolist(), rows,
                          [list(r) for r in traj.velocities], [], stamp,
                          tuple(JointTolerance(j, position=tolerance) for j in traj.joint_names)
                          if tolerance else ())
        reason, checked = check_goal(req, controller.joint_names, float(shared.data.time),
                                     cfg.sim.tolerances)
        assert reason is None, reason
        return controller.submit(checked)

    first = goal(None)
    step_until(shared, stamp + 0.5)                    # moving fast
    controller.cancel(first)
    step_until(shared, stamp + 0.9)                    # held while the plan ran on, 0.2 rad
    held = positions(shared, "left", traj.joint_names)
    again = goal(path_tolerance)
    step_until(shared, stamp + 1.3)
    moved = float(np.max(np.abs(positions(shared, "left", traj.joint_names) - held)))
    outcome = again.outcome.value if again.outcome is not None else "running"
    return moved, outcome


def test_a_controller_aborts_a_replacement_its_held_arm_is_not_following(tmp_path) -> None:
    dragged, running = _follow(tmp_path, None)
    # the reference: with no path tolerance the held arm is pulled onto the goal's path
    assert dragged > 0.1 and running == "running", (dragged, running)
    moved, outcome = _follow(tmp_path, 0.1)
    assert outcome == "aborted", outcome
    assert moved < 0.02, f"the held arm moved {moved:.4f} rad under a goal it was not following"
