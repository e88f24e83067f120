"""The pose set (hil/identifiability.py) on the simulated OpenArm pair, with real physics and
no ROS: the sign margins it computes are the residuals a reversed joint leaves in the simulator
(an independent reference: the fault is wired in the simulator, the margin from the model), and
at the pose it picks the gravity check names a reversed joint 5 that the start pose and its jog
hide."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.hil.gravity_check import GravityModel
from mj_manipulator_ros.hil.identifiability import pose_set, sign_margin
from mj_manipulator_ros.sim.shared_model import SharedModel

from test_miswiring import THRESHOLD, config, physical, settle

WANT = 1.5 * THRESHOLD   # stage 2's pose_set_margin x pose_set_gravity (hil/stages.yaml)


def _plan(shared: SharedModel, arm: str):
    b = shared.scene.arms[arm]
    model = GravityModel(shared.scene, arm)
    start = physical(shared, arm)
    mid = (b.lower + b.upper) / 2
    direction = np.where(mid >= start, 1.0, -1.0)
    jogs = [start + 0.1 * direction[j] * np.eye(len(start))[j] for j in range(len(start))]
    return model, start, jogs, pose_set(model, start, jogs, b.lower, b.upper, WANT, 0.8)


def _hold(shared: SharedModel, arm: str, q: np.ndarray, seconds: float = 2.0) -> None:
    """Command ``arm`` to ``q`` (controller joints) and let physics settle there."""
    from mj_manipulator_ros.core.interpolation import rest_to_rest
    from mj_manipulator_ros.sim.goal import GoalRequest, check_goal

    names = shared.controllers[arm].joint_names
    q0 = shared.snapshot().arms[arm].positions
    t = np.linspace(0.0, 1.0, 21)
    p, v = rest_to_rest(q0, q, t)
    req = GoalRequest(names, t.tolist(), p.tolist(), v.tolist(), [[] for _ in t], 0.0)
    reason, goal = check_goal(req, names, float(shared.data.time), shared.settings.tolerances)
    assert reason is None, reason
    shared.controllers[arm].submit(goal)
    settle(shared, seconds)


@pytest.mark.parametrize("arm", ["left", "right"])
def test_the_pose_set_loads_joint_5_which_the_start_and_the_jogs_leave_unloaded(arm) -> None:
    shared = SharedModel.from_config(config("position"))
    settle(shared)
    model, start, jogs, plan = _plan(shared, arm)
    names = model.joint_names
    j5 = names.index(f"openarm_{arm}_joint5")
    assert plan.seen[j5] < THRESHOLD, plan.describe(names, WANT)   # hidden so far
    served = {j for p in plan.poses for j, _ in p.serves}
    assert j5 in served and not plan.unseen, plan.describe(names, WANT)
    pose = next(p for p in plan.poses if j5 in dict(p.serves))
    assert abs(pose.move) <= 0.8 and pose.mover != j5
    # the margin is the residual the fault leaves: the simulator with joint 5 reversed, held
    # at the pose, against the model (the flip keeps q5 = 0 where it is: the same pose)
    faulted = SharedModel.from_config(config("position", {arm: {"sign_flip": (names[j5],)}}))
    settle(faulted)
    for q, hidden in ((start, True), (pose.q, False)):
        _hold(faulted, arm, q)
        snap = faulted.snapshot().arms[arm]
        result = model.diagnose(snap.positions, snap.efforts)
        assert result.worst == pytest.approx(sign_margin(model, snap.positions, j5), abs=0.02)
        if hidden:
            assert result.worst < THRESHOLD, result
        else:
            assert result.worst > WANT - 0.02, result
            assert result.diagnosis == f"{names[j5]} sign inverted", result.diagnosis


def test_every_joint_is_seen_somewhere_and_the_margins_say_where() -> None:
    shared = SharedModel.from_config(config("position"))
    settle(shared)
    for arm in ("left", "right"):
        model, start, jogs, plan = _plan(shared, arm)
        reach = plan.seen.copy()
        for p in plan.poses:
            for j, m in p.serves:
                assert m >= WANT and sign_margin(model, p.q, j) == pytest.approx(m)
                reach[j] = max(reach[j], m)
        assert reach.min() >= WANT, plan.describe(model.joint_names, WANT)
        text = plan.describe(model.joint_names, WANT)
        assert "joint5" in text and "pose set: joint7" in text, text


def test_a_joint_no_pose_loads_is_left_to_the_eye() -> None:
    """A margin wanted beyond what any single-joint move reaches: the joints are named as the
    eye's, with the best margin found."""
    shared = SharedModel.from_config(config("position"))
    settle(shared)
    model, start, jogs, _ = _plan(shared, "left")
    b = shared.scene.arms["left"]
    plan = pose_set(model, start, jogs, b.lower, b.upper, 50.0, 0.3)
    assert not plan.poses and len(plan.unseen) == len(start)
    assert "gravity cannot tell the sign of" in plan.describe(model.joint_names, 50.0)


def test_the_gain_pose_takes_every_joint_near_its_zero_far_enough_to_show_a_gear_error() -> None:
    """With gain_reach 0.3: every joint either stands 0.3 rad from its zero in some pose (the
    eye then sees a 17 % gear error) or its load shows a 0.8 / 1.25 gear error by the margin;
    joints 5 and 6 (at their zero in "ready", unloaded) are in the gain pose, each 0.3 from it."""
    from mj_manipulator_ros.hil.identifiability import gain_margin

    shared = SharedModel.from_config(config("position"))
    settle(shared)
    for arm in ("left", "right"):
        model, start, jogs, _ = _plan(shared, arm)
        b = shared.scene.arms[arm]
        plan = pose_set(model, start, jogs, b.lower, b.upper, WANT, 0.8, 0.3)
        assert plan.gain is not None, plan.describe(model.joint_names, WANT)
        poses = [start, *jogs, *(p.q for p in plan.poses), plan.gain.q]
        for j in range(len(start)):
            far = max(abs(q[j]) for q in poses) >= 0.3 - 1e-9
            loaded = max(gain_margin(model, q, j) for q in poses[:-1]) >= WANT
            assert far or loaded, (arm, model.joint_names[j])
        for j in (4, 5):
            assert j in plan.gain.joints and abs(plan.gain.q[j]) == pytest.approx(0.3)
        moved = np.flatnonzero(np.abs(plan.gain.q - start) > 1e-12)
        assert set(moved) == set(plan.gain.joints)
