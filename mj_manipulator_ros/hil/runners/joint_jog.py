"""Stage 2, first: each joint alone, a small jog toward the middle of its range and back at low
speed, the others held; the stage's small motion runs only after every joint passed.

At rest after each move (the mean over the settle window's last ``rest_window_s``) every joint
of every arm is compared with where it started and where it was commanded:

- ``jog_response``: the jogged joint's measured displacement over the commanded one (1 when
  healthy): 0 is a joint that did not follow (a force limit or a brake), -1 a reversed joint
  whose states are not (an inconsistent sign), k a gear ratio seen in joint space;
- ``jog_isolation``: the largest displacement of any other joint, of this arm or another (a
  swap or crossed arms that commands and states do not agree on, a mechanical coupling);
- ``jog_position_error``: how far each joint of the jogged arm rests from its command (a joint
  that cannot carry its load: gravity feed-forward missing, gains too low, a force limit);
- ``jog_observed``: the move was a joint's, not a command's: states that follow the command
  closer than its threshold echo it (fake hardware left on, a driver reporting its command as
  the position); a goal reported succeeded with the joint still and no effort changed more than
  ``still_effort_nm`` is a driver whose commands reach no motor (openarm_ros2#63);
- ``jog_gravity``: the gravity residual (stage 1's check) at each pose the jog reaches: a fault
  consistent in commands and states (a swap, a sign, a zero, a gear) is invisible in joint
  space, and from one pose when the joint carries no load there; more poses show more of them;
- ``pose_matches_picture`` at the jogged pose: the operator's eye (``hil/pose_picture.py``;
  on hardware a typed word per joint, with ``--sim`` the simulator's physical joints).

The first joint that fails ends the jog (after its move back): the bring-up stops there, with
the largest joint motion measured so far in the detail.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Optional

import numpy as np

from mj_manipulator_ros.core.errors import (ExecutionRefusedError, MjManipulatorError,
                                            StartStateError)
from mj_manipulator_ros.core.interpolation import rest_to_rest
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.sync import FailureReason
from mj_manipulator_ros.hil import analysis as A
from mj_manipulator_ros.hil.check_result import CheckResult, check, report_detail
from mj_manipulator_ros.hil.motions import WAYPOINTS, toward_middle
from mj_manipulator_ros.hil.pose_picture import picture_check
from mj_manipulator_ros.hil.stages import Stage

#: a jog whose execution failed for one of these never had the arm follow its goal (refused,
#: unanswered, or taken after its start: the executor then cancels it): the joint is not
#: judged on it, the failure is said as it is (the load, the controller's transport)
NEVER_RAN = (FailureReason.GOAL_REJECTED, FailureReason.SERVER_UNAVAILABLE,
             FailureReason.NO_RESPONSE, FailureReason.LATE_ACCEPTANCE,
             FailureReason.CLOCK_UNAVAILABLE)

#: how long a rest window's states are waited for, s of the controllers' clock
REST_WAIT_S = 1.0

#: a controller that answers a jog it cannot make with one of these (a tolerance violated, an
#: error code) is looking at the joint: its silence about a joint that stayed is what a dead
#: wire looks like, not its complaint
CONTROLLER_COMPLAINED = (FailureReason.ABORTED, FailureReason.ERROR_CODE,
                         FailureReason.GOAL_REJECTED)

if TYPE_CHECKING:  # the session imports rclpy
    from mj_manipulator_ros.hil.session import HilSession


class _Jogger:
    """The poses and figures of one stage's jogs (every arm's pose at the start of each)."""

    def __init__(self, session: "HilSession", stage: Stage) -> None:
        self.session, self.stage = session, stage
        p = stage.params
        self.amplitude, self.duration = p["jog_rad"], p["jog_duration_s"]
        self.settle, self.window = p["jog_settle_s"], p["rest_window_s"]
        self.arms = {a.name: a.joint_names for a in session.config.arms}
        self.home = {a: session.pose(a) for a in self.arms}
        self.largest = 0.0        # the largest displacement of any joint from home, rad
        self.gravity = gravity_models(session)
        self.pictures = "scene" in session.config.extra or session.sim_node is not None
        self.last = None   # the latest move: (its trajectory, the joint states over its run)

    def rest(self) -> dict[str, tuple[np.ndarray, Optional[np.ndarray]]]:
        """Every arm's mean pose and effort (J,) over the last ``rest_window_s``
        (:func:`rest_of`)."""
        out = rest_of(self.session, self.arms, self.window)
        for arm, (q, _) in out.items():
            self.largest = max(self.largest, float(np.max(np.abs(q - self.home[arm]))))
        return out

    def move(self, arm: str, q0: np.ndarray, q1: np.ndarray):
        t = np.linspace(0.0, self.duration, WAYPOINTS)
        q, v = rest_to_rest(q0, q1, t)
        plan = MultiArmPlan({arm: ArmTrajectory(self.arms[arm], t, q, v)})
        report, samples = self.session.run(plan, settle=self.settle)
        self.last = (plan[arm], samples)
        return report

    def joint(self, arm: str, j: int, direction: float) -> list[CheckResult]:
        """Jog joint ``j`` of ``arm`` out and back: the checks of each move, up to the first
        move with a failed one (then the joint is moved back where it started)."""
        st, name = self.stage, self.arms[arm][j]
        subject = f"{arm}/{name}"
        start = {a: self.home[a] for a in self.arms}
        command = start[arm].copy()
        command[j] += direction * self.amplitude
        out: list[CheckResult] = []
        for leg, (q0, q1) in enumerate(((start[arm], command), (command, start[arm]))):
            before = self.rest()
            try:
                report = self.move(arm, q0, q1)
            except StartStateError as exc:   # the arm left the pose the stage found it in
                now = self.session.pose(arm)
                crept = np.abs(now - self.home[arm])
                k = int(np.argmax(crept))
                out.append(check(st, "jog_position_error", subject, float(crept[k]),
                                 f"{arm} {self.arms[arm][k]} crept {now[k] - self.home[arm][k]:+.4f} "
                                 "rad from where stage 2 found it, holding still (a joint that "
                                 "cannot carry its load: a force limit, a brake slipping); the jog "
                                 f"was refused before any motion: {str(exc).splitlines()[0]}"))
                break
            except ExecutionRefusedError as exc:   # the gate, the start check: nothing moved
                out.append(check(st, "jog_response", subject, None,
                                 f"the jog was refused before any motion: "
                                 f"{str(exc).splitlines()[0]}"))
                break
            after = self.rest()
            f = report.first_failure
            if not report.succeeded and f is not None and f.reason in NEVER_RAN:
                # the goal never took the arm: its stay says nothing about the joint
                out.append(check(st, "jog_response", subject, None,
                                 f"the jog's goal never ran ({f.reason.value}): the joint was not "
                                 f"judged, nothing about it is known: {report_detail(report)}"))
                if leg == 0:
                    out.extend(self._move_back(arm, subject, after[arm][0], start[arm]))
                break
            error = np.abs(after[arm][0] - q1)
            k = int(np.argmax(error))
            held = error[k] <= st.check("jog_position_error").threshold
            out.append(check(st, "jog_position_error", subject, float(error[k]),
                             f"{arm} {self.arms[arm][k]} rests {after[arm][0][k] - q1[k]:+.4f} "
                             "rad from its command (a joint that cannot carry its load: "
                             "gravity feed-forward missing, gains too low, a force limit)"))
            # an arm that sags when a goal takes over (the reference starts at the measured
            # pose) moves every loaded joint: read the two below with the one above
            sagged = "" if held else "; the arm did not hold its pose: see jog_position_error"
            commanded = q1[j] - q0[j]
            moved = after[arm][0][j] - before[arm][0][j]
            gain = moved / commanded
            observed = self._observed(arm, j, report, before, after, gain)
            out.append(observed)   # when it fails, the figures below are not the joint's
            what = ("did not follow: see jog_observed" if not observed.passed and abs(gain) < 0.2
                    else "did not follow (a force limit, a brake)" if abs(gain) < 0.2 else
                    "moved the other way (a reversed joint)" if gain < 0 else
                    f"moved {gain:.2f} x its command")
            out.append(check(st, "jog_response", subject, abs(1.0 - gain),
                             f"{arm} {name} moved {moved:+.4f} rad for {commanded:+.4f} "
                             f"commanded: {what}{sagged}"))
            others = [(abs(after[a][0][k] - before[a][0][k]), f"{a} {self.arms[a][k]}")
                      for a in self.arms for k in range(len(self.arms[a]))
                      if not (a == arm and k == j)]
            worst, who = max(others) if others else (0.0, "")
            why = _copied(arm, before, after) or \
                "(a swap or crossed arms the states do not show, a coupling)"
            out.append(check(st, "jog_isolation", subject, worst,
                             f"{who} moved {worst:.4f} rad while {arm} {name} was jogged "
                             f"{why}{sagged}"))
            if observed.passed:   # (not: the states are not the joint's; nothing to weigh)
                out.extend(self._gravity(arm, subject, after))
            if leg == 0 and self.pictures:   # the eye sees what physics may not
                out.append(picture_check(self.session, st, subject, f"stage2_jog_{arm}_{name}",
                                         {a: after[a][0] for a in self.arms}))
            if not report.succeeded and all(r.passed for r in out):
                out.append(check(st, "jog_response", subject, None,
                                 f"the jog's goal failed: {report_detail(report)}"))
            if not all(r.passed for r in out):
                if leg == 0:   # back where it started before the bring-up stops
                    out.extend(self._move_back(arm, subject, after[arm][0], start[arm]))
                break
        return out

    def _observed(self, arm: str, j: int, report, before, after, gain: float) -> CheckResult:
        """``jog_observed`` (module docstring): the jogged joint's lag behind its plan (s), and
        a success with nothing moved nor pushed."""
        st, name, p = self.stage, self.arms[arm][j], self.stage.params
        echo = st.check("jog_observed").threshold
        traj, samples = self.last
        lag = (A.tracking_lag(samples.arm(self.arms[arm]), traj, report.start_stamp, j)
               if report.start_stamp is not None else float("nan"))
        if lag < echo:
            return check(st, "jog_observed", f"{arm}/{name}", lag,
                         f"{arm} {name}'s joint states followed its command {lag * 1e3:.1f} ms "
                         "late, closer than a motor does: they echo the commands, not the joint "
                         "(fake hardware left on? a driver that reports its command as the "
                         "position); whether the joint moved they cannot say: look at the robot")
        e0, e1 = before[arm][1], after[arm][1]
        pushed = float(np.max(np.abs(e1 - e0))) if e0 is not None and e1 is not None \
            else float("nan")
        f = report.first_failure
        complained = f is not None and f.reason in CONTROLLER_COMPLAINED
        if not complained and abs(gain) < 0.2 and pushed <= p["still_effort_nm"]:
            said = ("reported {arm}'s jog succeeded" if report.succeeded else
                    f"reported nothing wrong with {arm}'s jog (the executor stopped it: "
                    f"{f.reason.value})").format(arm=arm)
            return check(st, "jog_observed", f"{arm}/{name}", lag,
                         f"the controller {said}, yet {name} stayed "
                         f"({gain:+.2f} x its command) and no joint of {arm} pushed (efforts "
                         f"changed {pushed:.3f} N m at most, still_effort_nm "
                         f"{p['still_effort_nm']:g}): the commands reach no motor (motors "
                         "disabled or in another control mode, another program on the bus, a "
                         "driver that does not write them; openarm_ros2#63)", passed=False)
        return check(st, "jog_observed", f"{arm}/{name}", lag,
                     f"{arm} {name} followed {lag * 1e3:.1f} ms behind its command; efforts "
                     f"changed up to {pushed:.3f} N m")

    def _move_back(self, arm: str, subject: str, q0: np.ndarray, q1: np.ndarray
                   ) -> list[CheckResult]:
        """After a failed jog, back where the joint started; what went wrong doing so is one
        more failure (the jog's own stay recorded)."""
        try:
            report = self.move(arm, q0, q1)
        except MjManipulatorError as exc:
            return [check(self.stage, "jog_response", subject, None,
                          f"moving back after the failed jog: {type(exc).__name__}: {exc}")]
        if report.succeeded:
            return []
        return [check(self.stage, "jog_response", subject, None,
                      f"moving back after the failed jog: {report_detail(report)}")]

    def _gravity(self, arm: str, subject: str, rest) -> list[CheckResult]:
        from mj_manipulator_ros.hil.gravity_check import describe

        q, effort = rest[arm]
        model = self.gravity.get(arm)
        if model is None or effort is None:
            return []
        threshold = self.stage.check("jog_gravity").threshold
        result = model.residual(q, effort)
        if result.worst > threshold:
            result = model.diagnose(q, effort)
        return [check(self.stage, "jog_gravity", subject, result.worst,
                      describe(arm, result, threshold, self.arms[arm]) + " at the jogged pose")]


#: another arm's states carry the jogged arm's readings when each of its joints moved as the
#: jogged arm's did within this fraction of the jog (a copy is exact; a coupling or a crossed
#: wire moves other joints by other amounts)
COPY_MATCH = 0.01


def _copied(arm: str, before, after) -> str:
    """Another arm whose states moved joint for joint as ``arm``'s did (a real jog: more than
    a hundredth of a radian): its states carry ``arm``'s readings. The words saying so, or ""."""
    moved = after[arm][0] - before[arm][0]
    size = float(np.max(np.abs(moved)))
    if size < 0.01:
        return ""
    for other in after:
        if other == arm or after[other][0].shape != moved.shape:
            continue
        theirs = after[other][0] - before[other][0]
        if float(np.max(np.abs(theirs - moved))) <= COPY_MATCH * size:
            return (f"joint for joint as {arm}'s did: {other}'s joint states carry {arm}'s "
                    f"readings ({other}'s own are missing: a driver reading {arm}'s bus?)")
    return ""


def rest_of(session: "HilSession", arms: dict, window: float, latest: bool = True
            ) -> dict[str, tuple[Optional[np.ndarray], Optional[np.ndarray]]]:
    """Each of ``arms``' (name -> joint names) mean pose and effort (J,) over the last
    ``window`` s, kept for its load fit (``HilSession.note_rest``). States of the window that
    have not arrived yet (a loaded receiver delivers late) are waited for, up to REST_WAIT_S of
    the controllers' clock; an arm with none then reads its latest pose (``latest``; else None)
    and no effort (what needs the effort is then not judged)."""
    since = session.now() - window
    waited = session.now() + REST_WAIT_S
    while True:
        samples = session.joint_states.samples(since=since)
        if all(len(samples.arm(j)) for j in arms.values()) or session.now() >= waited:
            break
        session.sleep(0.01)
    out = {}
    for arm, joints in arms.items():
        s = samples.arm(joints)
        q = s.positions.mean(axis=0) if len(s) else (session.pose(arm) if latest else None)
        e = None if s.efforts is None or not len(s) or np.isnan(s.efforts).all() \
            else np.nanmean(s.efforts, axis=0)
        out[arm] = (q, e)
        if len(s):
            session.note_rest(arm, q, e)
    return out


def gravity_models(session: "HilSession") -> dict:
    from mj_manipulator_ros.hil.gravity_check import GravityModel
    from mj_manipulator_ros.model.scene import scene_for

    if session.sim_node is not None:
        scene = session.sim_node.scene
    elif "scene" in session.config.extra:
        scene = scene_for(session.config)
    else:
        return {}
    return {a: GravityModel(scene, a) for a in session.config.arm_names}


def joint_jog(session: "HilSession", stage: Stage) -> list[CheckResult]:
    """Every joint of every arm jogged alone (module docstring): the first joint's failed
    checks, with the largest joint motion so far; else each check's worst figure over the
    joints."""
    jog = _Jogger(session, stage)
    worst: dict[str, CheckResult] = {}
    for arm, joints in jog.arms.items():
        _, direction = toward_middle(session, arm)
        for j in range(len(joints)):
            results = jog.joint(arm, j, float(direction[j]))
            failed = [r for r in results if not r.passed]
            if failed:
                return [dataclasses.replace(r, detail=f"{r.detail}; largest joint motion so "
                                            f"far {jog.largest:.4f} rad") for r in failed]
            for r in results:   # the worst: the largest, or the smallest of a "min" check
                sign = -1.0 if stage.check(r.name).compare == "min" else 1.0
                if r.name not in worst or sign * (r.measured or 0.0) > \
                        sign * (worst[r.name].measured or 0.0):
                    worst[r.name] = r
    n = sum(len(j) for j in jog.arms.values())
    return [dataclasses.replace(r, subject="every joint", detail=f"worst at {r.subject} of {n} "
                                f"joints jogged {jog.amplitude:g} rad each way: {r.detail}; "
                                f"largest joint motion {jog.largest:.4f} rad")
            for r in worst.values()]
