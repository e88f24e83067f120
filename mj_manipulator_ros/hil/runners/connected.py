"""Stage 1: every controller answers (and, where the bring-up activates it, holds the arm where
it is: ``runners/activation.py``), joint states stream, clocks agree, the arms' weight is what
the model says. Nothing is commanded to move."""

from __future__ import annotations

import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.hil import analysis as A
from mj_manipulator_ros.hil import stream_check as S
from mj_manipulator_ros.hil.check_result import CheckResult, check, not_applicable
from mj_manipulator_ros.hil.runners.activation import activation
from mj_manipulator_ros.hil.pose_picture import picture_check
from mj_manipulator_ros.hil.stages import Protocol, Stage
from mj_manipulator_ros.model.scene import scene_for
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the session imports rclpy
    from mj_manipulator_ros.hil.session import HilSession


def connected(session: "HilSession", stage: Stage, protocol: Protocol) -> list[CheckResult]:
    out = []
    wait = session.config.execution.server_wait_s
    for arm, channel in session.executor.channels.items():
        ok = channel.client.wait_for_server(timeout_sec=wait)
        out.append(check(stage, "action_server", arm, float(ok),
                         f"{channel.arm.action_name} {'answers' if ok else f'not available within {wait} s'}",
                         passed=ok))
    session.wait_for_joint_states(wait)
    out.extend(activation(session, stage))
    listening = session.now()
    session.sleep(stage.params["listen_s"])
    samples = session.joint_states.samples(received_since=listening)
    for arm in session.config.arms:
        s = samples.arm(arm.joint_names)
        lo, hi = session.limits(arm.name)
        out.append(check(stage, "joint_states_rate", arm.name, A.rate_hz(s),
                         f"{len(s)} messages carrying all of {list(arm.joint_names)}"))
        out.append(check(stage, "positions_in_limits", arm.name,
                         A.limit_excess(s.positions[-1:], lo, hi) if len(s) else float("nan"),
                         A.outside_limits(s.positions[-1], lo, hi, arm.joint_names)
                         if len(s) else ""))
        out.append(check(stage, "clock_offset", arm.name, abs(A.clock_offset(s))))
        out.extend(_stream(stage, arm.name, arm.joint_names, s))
    out.extend(_gravity_consistency(session, stage, samples))
    out.extend(_identifiable(session, stage, protocol))
    if "scene" in session.config.extra or session.sim_node is not None:
        out.append(picture_check(session, stage, "every arm", "stage1_pose"))
    return out


def _stream(stage: Stage, arm: str, joints, s) -> list[CheckResult]:
    """The arm's joint-state stream over the window (``hil/stream_check.py``): its largest
    hole, a lasting clock step, and how far a joint drifted while the arm should hold still."""
    rate = stage.params["expected_rate_hz"]
    steps = S.clock_steps(s.stamps, s.received, stage.check("clock_step").threshold,
                          arrival=s.arrival)
    step = S.largest_step(steps)
    hole = S.largest_hole(s.stamps, s.received, rate, steps, s.arrival)   # named, not a hole
    span = (f"over stamps {s.stamps.min():.3f}-{s.stamps.max():.3f} s" if len(s)
            else "no messages")
    hole_detail = (f"largest interval between stamps {hole.length_s * 1e3:.1f} ms after "
                   f"{hole.at:.3f} s: about {hole.missing} message(s) missing at "
                   f"{rate:g} Hz (the controller stalled or messages were lost) {span}")
    step_detail = (f"the controller's clock stepped {step.step_s * 1e3:+.1f} ms at stamp "
                   f"{step.at:.3f} s ({len(steps)} step(s): receive time minus stamp changed "
                   f"and stayed) {span}" if steps else f"no lasting step {span}")
    moved, j = S.drift(s.positions)
    drift_detail = f"{joints[j]} moved {moved:.4f} rad {span}" if j >= 0 else span
    return [check(stage, "joint_states_gap", arm, hole.length_s, hole_detail),
            check(stage, "clock_step", arm, abs(step.step_s), step_detail),
            check(stage, "holding_drift", arm, moved, drift_detail)]


def _gravity_consistency(session: "HilSession", stage: Stage, samples) -> list[CheckResult]:
    """Each arm's efforts at rest against the model's gravity load at its measured pose
    (``hil/gravity_check.py``), with the single-joint fault that explains a residual."""
    from mj_manipulator_ros.hil.gravity_check import GravityModel, at_rest, describe

    threshold = stage.check("gravity_consistency").threshold
    if session.sim_node is not None:
        scene = session.sim_node.scene
    elif "scene" in session.config.extra:
        scene = scene_for(session.config)
    else:
        return [not_applicable(stage, "gravity_consistency", a, 0.0,
                               "no scene section: no model to weigh the arm with")
                for a in session.config.arm_names]
    out, rest = [], {}
    for arm in session.config.arms:
        s = samples.arm(arm.joint_names)
        if len(s) and s.efforts is not None and not np.isnan(s.efforts).all():
            rest[arm.name] = at_rest(s.positions, s.efforts)
    models = {a: GravityModel(scene, a) for a in rest}
    for arm in session.config.arms:
        if arm.name not in rest:
            out.append(not_applicable(stage, "gravity_consistency", arm.name, 0.0,
                                      "the joint states carry no efforts"))
            continue
        q, effort = rest[arm.name]
        gravity = models[arm.name]
        result = gravity.residual(q, effort)
        detail = ""
        if result.worst > threshold:
            # another arm's joints answering to this arm's names (CAN naming crossed)?
            crossed = [b for b, m in models.items() if b != arm.name
                       and len(m.joint_names) == len(gravity.joint_names)
                       and m.residual(q, effort).worst <= threshold]
            if crossed and _copy_of(rest, models, arm.name, crossed[0], threshold):
                b = crossed[0]
                detail = (f"; explained by: {arm.name}'s joint states carry {b}'s readings "
                          f"(the same positions and efforts as {b}'s own, which fit {b}: "
                          f"{arm.name}'s own readings are missing, a driver reading {b}'s "
                          "bus?)")
            elif crossed:
                detail = (f"; explained by: arms crossed: {arm.name}'s joint states and "
                          f"efforts are those of {crossed[0]}'s joints (its controller drives "
                          f"arm {crossed[0]})")
            else:
                result = gravity.diagnose(q, effort)
        # (explained by crossed arms: the residual alone, not "no single joint fault")
        text = describe(arm.name, result, np.inf if detail else threshold, arm.joint_names)
        out.append(check(stage, "gravity_consistency", arm.name, result.worst, text + detail))
    return out


def _identifiable(session: "HilSession", stage: Stage, protocol: Protocol) -> list[CheckResult]:
    """Before anything moves: per arm, each joint's sign margin at the measured pose and the
    jogs to come, the pose set stage 2 adds, what is left to the eye (recorded, never
    blocking: ``hil/identifiability.py``)."""
    from mj_manipulator_ros.hil.runners.gravity_poses import planned_pose_set
    from mj_manipulator_ros.hil.runners.joint_jog import gravity_models

    try:
        jogs = protocol.stage(2)
    except ConfigError:   # a protocol without stage 2: no jogs, no pose set to plan
        return []
    models = gravity_models(session)
    out = []
    for arm in session.config.arms:
        if arm.name not in models:
            out.append(not_applicable(stage, "gravity_identifiable", arm.name, 0.0,
                                      "no scene section: no model to weigh the arm with"))
            continue
        plan = planned_pose_set(session, jogs, arm.name, models[arm.name])
        reach = plan.seen.copy()
        for pose in plan.poses:
            for j, m in pose.serves:
                reach[j] = max(reach[j], m)
        for j, m in plan.unseen:
            reach[j] = max(reach[j], m)
        want = jogs.params["pose_set_margin"] * jogs.check("pose_set_gravity").threshold
        out.append(check(stage, "gravity_identifiable", arm.name, float(reach.min()),
                         plan.describe(arm.joint_names, want), passed=True))
    return out


#: two arms' positions at rest that agree to this (rad), their efforts to the gravity check's
#: threshold, are one arm's read twice (where the first arm's fit the second's model and the
#: second's fit its own: two healthy arms fit their own, two crossed ones each other's)
COPY_AGREEMENT_RAD = 0.005


def _copy_of(rest: dict, models: dict, arm: str, other: str, threshold: float) -> bool:
    """Are ``arm``'s readings at rest ``other``'s, read twice? ``other``'s own fit ``other``'s
    model (it is not crossed back) and both arms' positions (COPY_AGREEMENT_RAD) and efforts
    (``threshold``, N m) agree."""
    (q, e), (q_b, e_b) = rest[arm], rest[other]
    if models[other].residual(q_b, e_b).worst > threshold:
        return False
    return bool(np.max(np.abs(q - q_b)) <= COPY_AGREEMENT_RAD and
                np.max(np.abs(e - e_b)) <= threshold)
