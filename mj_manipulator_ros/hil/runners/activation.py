"""Stage 1, before anything is commanded: each arm's controller activated by the bring-up
itself, one arm at a time, watched (check ``activation_hold``).

A controller's first command after activation should be where the arm is. ros2_control's
joint_trajectory_controller takes it from the hardware's command interfaces
(``set_last_command_interface_value_as_state_on_activation``): a driver that starts its command
buffer at zero drives every joint toward zero the moment the controller is activated
(openarm_ros2#66), one that kept an old command drives the arm back there. Nothing the bring-up
sends can show it later: the jump happens at activation, before the first goal. So when the
configuration names the arm's ``activate_service`` (std_srvs/Trigger: the simulator offers
one per arm, a driver may), the bring-up activates the arm itself, from rest, and watches its
joint states for ``activation_watch_s``: a joint that leaves the pose measured before by more
than the threshold is a jump; the bring-up then calls ``deactivate_service`` at once (when
named) and names the joint, where it was, where it went and how far it went in all. Arms are
activated one at a time; after a jump no other arm is.

Without ``activate_service`` the controllers were active before the bring-up started: whether
they jumped then is not known here (recorded as not applicable, saying so).
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Optional

import numpy as np

from mj_manipulator_ros.hil.check_result import CheckResult, check, not_applicable
from mj_manipulator_ros.hil.stages import Stage

if TYPE_CHECKING:  # the session imports rclpy
    from mj_manipulator_ros.core.config import ArmConfig
    from mj_manipulator_ros.hil.session import HilSession

#: how often the watch reads the latest joint states (s, wall clock)
POLL_S = 0.001
#: how long (s, wall clock) a Trigger service has to be offered and to answer
SERVICE_WAIT_S = 5.0
#: how long (s, controllers' clock) the arm's rest before activation is averaged over
REST_S = 0.1
#: an effort that varies less than this (N m) while its joint moves is pinned at a limit
SATURATED_NM = 0.05


def activation(session: "HilSession", stage: Stage) -> list[CheckResult]:
    """``activation_hold`` per arm (module docstring)."""
    out: list[CheckResult] = []
    jumped = ""
    for arm in session.config.arms:
        if not arm.activate_service:
            out.append(not_applicable(
                stage, "activation_hold", arm.name, 0.0,
                "no arms[].activate_service: the controller was active before the bring-up "
                "started; a jump at its activation (openarm_ros2#66) came before anything "
                "could watch it"))
        elif jumped:
            out.append(not_applicable(stage, "activation_hold", arm.name, 0.0,
                                      f"not activated: {jumped}"))
        else:
            result = _activate_and_watch(session, stage, arm)
            out.append(result)
            if not result.passed:
                jumped = (f"{arm.name} jumped at its activation" if result.measured is not None
                          else f"{arm.name} could not be activated")
    return out


class _Services:
    """An arm's activate and deactivate std_srvs/Trigger clients on a node of their own, spun
    by the thread that calls them (rclpy#1123: a response read by another thread's spin can
    be taken before its request is registered). Both offered before the activation: the
    deactivation at a jump is one call, not a discovery."""

    def __init__(self, session: "HilSession", arm: "ArmConfig") -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from std_srvs.srv import Trigger

        self.node = rclpy.create_node(f"mjmr_hil_activation_{uuid.uuid4().hex[:6]}",
                                      context=session.ros.context,
                                      start_parameter_services=False)
        self.spin = SingleThreadedExecutor(context=session.ros.context)
        self.spin.add_node(self.node)
        self.request = Trigger.Request()
        self.names = {"activate": arm.activate_service, "deactivate": arm.deactivate_service}
        self.clients = {verb: self.node.create_client(Trigger, name)
                        for verb, name in self.names.items() if name}
        deadline = time.monotonic() + SERVICE_WAIT_S
        self.offered = {verb: c.wait_for_service(max(0.0, deadline - time.monotonic()))
                        for verb, c in self.clients.items()}
        self.futures: dict = {}
        self.sent: dict[str, float] = {}

    def has(self, verb: str) -> bool:
        return verb in self.clients

    def send(self, verb: str) -> None:
        """Send the request (no wait: :meth:`answer` reads the reply)."""
        if self.offered.get(verb):
            self.futures[verb] = self.clients[verb].call_async(self.request)
        self.sent[verb] = time.monotonic()

    def answer(self, verb: str, wait: bool = True) -> Optional[tuple[bool, str]]:
        """(success, message) of the request sent; None while it has not come (``wait``:
        spin until it does, bounded by SERVICE_WAIT_S from the sending)."""
        future = self.futures.get(verb)
        if future is None:
            return False, f"{self.names[verb]} not offered within {SERVICE_WAIT_S} s"
        until = self.sent[verb] + SERVICE_WAIT_S
        self.spin.spin_once(timeout_sec=0.0)
        while wait and not future.done() and time.monotonic() < until:
            self.spin.spin_once(timeout_sec=POLL_S)
        if not future.done():
            if not wait and time.monotonic() < until:
                return None
            future.cancel()
            return False, f"{self.names[verb]} did not answer within {SERVICE_WAIT_S} s"
        answer = future.result()
        return bool(answer.success), answer.message

    def close(self) -> None:
        self.spin.shutdown(timeout_sec=1.0)
        self.node.destroy_node()


def _activate_and_watch(session: "HilSession", stage: Stage, arm: "ArmConfig") -> CheckResult:
    services = _Services(session, arm)
    try:
        return _watch(session, stage, arm, services)
    finally:
        services.close()


def _watch(session: "HilSession", stage: Stage, arm: "ArmConfig",
           services: _Services) -> CheckResult:
    threshold = stage.check("activation_hold").threshold
    watch_s = stage.params["activation_watch_s"]
    joints = arm.joint_names
    for verb in ("activate", "deactivate"):   # never activate an arm it could not stop
        if services.has(verb) and not services.offered[verb]:
            return check(stage, "activation_hold", arm.name, None,
                         f"not activated: {services.names[verb]} not offered within "
                         f"{SERVICE_WAIT_S} s")
    with session.paced(1.0):          # the robot's own time: the reaction is a wall-clock one
        rest = session.joint_states.samples(since=session.now() - REST_S).arm(joints)
        before = rest.positions.mean(axis=0) if len(rest) else session.pose(arm.name)
        asked = session.now()
        services.send("activate")     # watched from now: a jump does not wait for the reply
        worst = np.zeros(len(joints))
        jump_at, stopped, answer = None, "", None
        end = session.now() + watch_s
        while session.now() < end:
            if session.interrupted.is_set():      # Ctrl-C: the arm is not left active
                _stop(services)
                from mj_manipulator_ros.hil.session import Interrupted
                raise Interrupted()
            answer = answer or services.answer("activate", wait=False)
            if answer is not None and not answer[0]:
                return check(stage, "activation_hold", arm.name, None,
                             f"the controller was not activated: {answer[1]}")
            q = session.joint_states.latest(joints)
            if q is not None:
                worst = np.maximum(worst, np.abs(q - before))
            if jump_at is None and worst.max() > threshold:
                jump_at = session.now()
                stopped = _stop(services)
                end = min(end, jump_at + 0.5)     # long enough to see where it comes to rest
            time.sleep(POLL_S)
        after = session.joint_states.samples(since=session.now() - REST_S).arm(joints)
        at_rest = after.positions.mean(axis=0) if len(after) else session.pose(arm.name)
    ok, said = answer or services.answer("activate")
    k = int(np.argmax(worst))
    if jump_at is None and not ok:
        return check(stage, "activation_hold", arm.name, None,
                     f"the controller was not activated: {said}")
    if jump_at is None:
        detail = (f"activated ({said}); over {watch_s:g} s every joint within "
                  f"{worst.max():.4f} rad of where it rested before ({joints[k]} the most)")
        return check(stage, "activation_hold", arm.name, float(worst.max()), detail)
    sag = _sag(session, stage, arm, before, session.joint_states.samples(since=jump_at).arm(
        joints), k)
    if sag:
        detail = (f"{joints[k]} sagged at activation: it moved off {before[k]:+.4f} rad within "
                  f"{jump_at - asked:.3f} s and {worst[k]:.4f} rad in all, to {at_rest[k]:+.4f}; "
                  f"{sag}; {stopped}. Raise the joint's force (current) limit or power its "
                  "motor before anything runs")
        return check(stage, "activation_hold", arm.name, float(worst.max()), detail)
    went = at_rest - before
    # the joints the command moved (the others by reaction only: a fraction of the largest)
    off = np.flatnonzero(worst > max(threshold, 0.25 * worst.max()))
    to_zero = (np.sign(went[off]) == -np.sign(before[off])) & (np.abs(before[off]) > threshold)
    if len(off) >= 2 and to_zero.all():
        toward = (f"{len(off)} joints headed to zero: the controller's first command was 0, "
                  "not the measured position (a command buffer that starts at zero, "
                  "openarm_ros2#66)")
    else:
        toward = ("the controller's first command was not the measured position (a stale "
                  "command kept from before" + (", or a zero" if to_zero.all() else "") + ")")
    detail = (f"activation jump: {joints[k]} moved off {before[k]:+.4f} rad within "
              f"{jump_at - asked:.3f} s of the activation, {toward}; it moved {worst[k]:.4f} "
              "rad in all "
              f"and rests at {at_rest[k]:+.4f}; {stopped}. Fix the driver's command at "
              "activation (initialise its command interfaces from the measured positions) "
              "before anything runs")
    return check(stage, "activation_hold", arm.name, float(worst.max()), detail)


def _sag(session: "HilSession", stage: Stage, arm: "ArmConfig", before: np.ndarray,
         moving, k: int) -> str:
    """Why joint ``k`` moved, when its motor is what gave way: over ``moving`` (the joint
    states from the jump's detection to the watch's end) its effort stood still, pinned
    (within SATURATED_NM) while the joint moved, and short of the model's gravity load at the
    pose it started from by more than stage 1's gravity threshold: a force (current) limit
    holding it back. A motor following a command, a zero or a stale one, changes its effort as
    the joint moves and stops. "" otherwise, or when there is no model or no effort to tell."""
    from mj_manipulator_ros.hil.runners.joint_jog import gravity_models

    efforts = getattr(moving, "efforts", None)
    if efforts is None or len(moving) < 3 or np.isnan(efforts[:, k]).any():
        return ""
    e = efforts[:, k]
    gives = float(np.mean(e))
    if float(np.ptp(e)) > max(SATURATED_NM, 0.02 * abs(gives)):
        return ""
    models = gravity_models(session)
    if arm.name not in models:
        return ""
    need = float(models[arm.name].expected(before)[k])
    if abs(gives) >= abs(need) - stage.check("gravity_consistency").threshold:
        return ""
    return (f"its motor gave {gives:+.2f} N m throughout (pinned: a force or current limit set "
            f"too low, a weak motor) where its load needed {need:+.2f} N m")


def _stop(services: _Services) -> str:
    """Deactivate the arm's controller now, when the configuration says how."""
    if not services.has("deactivate"):
        return ("no arms[].deactivate_service to stop it: use the e-stop; the arm goes on to "
                "the controller's command")
    services.send("deactivate")
    ok, said = services.answer("deactivate")
    return f"deactivated at once ({said})" if ok else f"NOT deactivated ({said}): use the e-stop"
