"""Stage 1: every controller answers, joint states stream, clocks agree, the arms' weight is
what the model says. Nothing moves."""

from __future__ import annotations

import numpy as np

from mj_manipulator_ros.hil import analysis as A
from mj_manipulator_ros.hil.check_result import CheckResult, check, not_applicable
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
    session.sleep(stage.params["listen_s"])
    samples = session.joint_states.samples()
    for arm in session.config.arms:
        s = samples.arm(arm.joint_names)
        lo, hi = session.limits(arm.name)
        out.append(check(stage, "joint_states_rate", arm.name, A.rate_hz(s),
                         f"{len(s)} messages carrying all of {list(arm.joint_names)}"))
        out.append(check(stage, "positions_in_limits", arm.name,
                         A.limit_excess(s.positions[-1:], lo, hi) if len(s) else float("nan")))
        out.append(check(stage, "clock_offset", arm.name, abs(A.clock_offset(s))))
    out.extend(_gravity_consistency(session, stage, samples))
    return out


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
            if crossed:
                detail = (f"; explained by: arms crossed: {arm.name}'s joint states and "
                          f"efforts are those of {crossed[0]}'s joints (its controller drives "
                          f"arm {crossed[0]})")
            else:
                result = gravity.diagnose(q, effort)
        out.append(check(stage, "gravity_consistency", arm.name, result.worst,
                         describe(arm.name, result, threshold, arm.joint_names) + detail))
    return out
