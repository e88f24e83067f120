"""Stage 2, after the pose set: each arm's real load, measured from what the stage already did.

Every pose the stage weighed the arm at (its start pose between the jogs, each jogged pose, each
pose of the pose set: ``HilSession.rest_samples``) gave its pose and efforts at rest. From them
``hil/load_fit.py`` fits the gravity parameters the model may get wrong: a mass factor per link
(with a prior of 1 +- ``MASS_PRIOR``: what the poses cannot tell apart stays near the model, and
its standard error says so) and a payload at the last link (mass and first moment). Nothing
moves for it. The check (``load_fit``) is recorded, never blocking: every pose already passed
its gravity check; its figure is what the fitted load leaves unexplained (RMS, N m), its text
the parameters with their standard errors and which of them the efforts say differ from the
model. The corrected model is written to the run folder as ``mass_overlay.json`` (every arm's
bodies), for ``scene.mass_overlay`` (``model/mass_overlay.py``): the checks, the simulator, the
actuator twin and the gravity feed-forward then carry the load the arm has.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from mj_manipulator_ros.hil.check_result import CheckResult, check, not_applicable
from mj_manipulator_ros.hil.load_fit import MASS_PRIOR, PAYLOAD, LoadRegressor, fit_load
from mj_manipulator_ros.hil.stages import Stage

if TYPE_CHECKING:  # the session imports rclpy
    from mj_manipulator_ros.hil.session import HilSession

#: the overlay's file in the run folder
OVERLAY_FILE = "mass_overlay.json"
#: a parameter is said to differ from the model when it is this many standard errors off it
SIGNIFICANT = 2.0


def measured_load(session: "HilSession", stage: Stage, models: dict) -> list[CheckResult]:
    """Each arm's load fitted from its rests this stage (module docstring); ``models``: arm ->
    GravityModel. Writes the overlay of every arm fitted to the run folder."""
    out: list[CheckResult] = []
    fitted = {}
    for arm in session.config.arm_names:
        model = models.get(arm)
        rests = session.rest_samples.get(arm, [])
        if model is None:
            out.append(not_applicable(stage, "load_fit", arm, 0.0,
                                      "no scene section: no model to weigh the arm with"))
        elif not rests:
            out.append(not_applicable(stage, "load_fit", arm, 0.0,
                                      "the joint states carry no efforts: nothing to fit"))
        else:
            try:
                fit, regressor = fit_arm(model, rests)
            except (np.linalg.LinAlgError, ValueError) as exc:
                out.append(not_applicable(stage, "load_fit", arm, 0.0, f"no fit: {exc}"))
                continue
            if not np.isfinite(fit.rms) or not np.all(np.isfinite(fit.estimate)):
                out.append(not_applicable(stage, "load_fit", arm, 0.0,
                                          "no fit: the rests gave figures that are not finite"))
                continue
            fitted[arm] = (fit, regressor, rests)
    where = ""
    if fitted and session.records_dir is not None:
        path = session.records_dir / OVERLAY_FILE
        path.write_text(json.dumps(overlay_of(fitted), indent=1))
        where = f"; the corrected model: {path} (name it in scene.mass_overlay)"
    for arm, (fit, regressor, rests) in fitted.items():
        out.append(check(stage, "load_fit", arm, fit.rms,
                         said(fit, regressor, rests) + where, passed=True))
    return out


#: rests this close (rad, every joint) are one pose: weighed again, not seen anew
SAME_POSE_RAD = 1e-3


def fit_arm(model, rests: list) -> tuple:
    """(the fit, its regressor) of one arm's ``rests`` ((pose, effort) pairs, each (J,)) on its
    GravityModel ``model``: every link's mass factor and a payload at the last link. The rests
    at one pose (the start pose, between every jog) are averaged into one: they are the same
    equations again, their errors (static friction) the same, not independent samples."""
    poses, efforts = distinct_rests(rests)
    regressor = LoadRegressor(model)
    fit = fit_load(regressor, poses, efforts, effort_floor=_friction(model))
    return fit, regressor


def distinct_rests(rests: list) -> tuple[np.ndarray, np.ndarray]:
    """The rests' distinct poses (P, J) and the mean effort at each (P, J): a rest within
    SAME_POSE_RAD of an earlier pose at every joint joins it."""
    groups: list[list] = []
    for q, e in rests:
        for g in groups:
            if np.max(np.abs(g[0][0] - q)) <= SAME_POSE_RAD:
                g.append((q, e))
                break
        else:
            groups.append([(q, e)])
    return (np.array([np.mean([q for q, _ in g], axis=0) for g in groups]),
            np.array([np.mean([e for _, e in g], axis=0) for g in groups]))


def overlay_of(fitted: dict) -> dict:
    """The corrected model of every fitted arm (arm -> (fit, regressor, ...)) as one overlay:
    every arm's bodies, and per arm its fit."""
    bodies, fits = {}, {}
    for arm, (fit, regressor, *_) in fitted.items():
        overlay = fit.overlay(regressor)
        bodies.update(overlay["bodies"])
        fits[arm] = overlay["fit"]
    return {"bodies": bodies, "fit": fits}


#: a mass factor whose standard error is still this share of its prior's learned nothing
UNLEARNED = 0.95


def said(fit, regressor: LoadRegressor, rests: list) -> str:
    """What a fit says: which parameters differ from the model (or that the efforts at rest
    could not tell: every mass factor's standard error still its prior's, static friction as
    large as the load), from how many rests, all of them with their standard errors."""
    poses, _ = distinct_rests(rests)
    k = len(regressor.bodies)
    if k and np.all(fit.std[:k] >= UNLEARNED * MASS_PRIOR):
        friction = float(np.max(_friction(regressor.gravity))) * np.sqrt(3.0)
        load = float(max(np.max(np.abs(regressor.gravity.expected(q))) for q in poses))
        head = (f"not measured: the efforts at rest cannot tell this arm's load (every link's "
                f"mass factor as uncertain as before, +- {MASS_PRIOR:g}; its joints' static "
                f"friction, up to {friction:.3g} N m, against gravity loads up to {load:.3g} "
                "N m at these poses): the model's masses stand unmeasured")
    else:
        head = _differs(fit, regressor)
    return (f"{head}; fitted from {len(rests)} rests at {len(poses)} distinct poses: "
            f"{fit.describe()}")


def visit_load_poses(session: "HilSession", arm: str, model, settings: dict, say):
    """``arm`` through its load poses (``hil/load_run.py``), resting at each, weighed on its
    GravityModel ``model`` (None: no scene): the (pose, effort) pairs at rest (the start pose
    first), or why it stopped (a text; the arm moved back)."""
    from mj_manipulator_ros.hil.load_fit import contact_free, load_poses
    from mj_manipulator_ros.hil.motions import return_to, with_holds
    from mj_manipulator_ros.hil.runners.joint_jog import NEVER_RAN, rest_of
    from mj_manipulator_ros.hil.check_result import report_detail

    if model is None:
        return "no scene section: no model to weigh the arm with"
    names = session.config.arm(arm).joint_names
    window = settings["load_rest_window_s"]
    start = session.pose(arm)
    lower, upper = session.limits(arm)
    if session.sim_node is not None:
        scene = session.sim_node.scene
    else:
        from mj_manipulator_ros.model.scene import scene_for
        scene = scene_for(session.config)
    poses = load_poses(LoadRegressor(model), start, lower, upper, int(settings["load_poses"]),
                       float(settings["load_move_rad"]), free=contact_free(scene, arm))
    rests: list = []
    skipped: list[str] = []
    for k, q in enumerate(poses):
        if k:
            move = session.move_plan({arm: q})
            if "scene" in session.config.extra:
                replay = session.checker.check(timeline=with_holds(session, move),
                                               mode="recorded")
                if not replay.collision_free:
                    skipped.append(f"pose {k + 1} (it would collide)")
                    say(f"  {arm}: load pose {k + 1} would collide, not visited: "
                        + replay.summary().splitlines()[0])
                    continue
            report, _ = session.run(move, settle=settings["load_settle_s"])
            failure = report.first_failure
            if not report.succeeded and failure is not None and failure.reason in NEVER_RAN:
                # refused, unanswered or taken after its stamp (a loaded machine): the arm
                # did not follow it and is held near where it was; the pose is left out and
                # the next move starts from where the arm stands
                skipped.append(f"pose {k + 1} ({failure.reason.value})")
                say(f"  {arm}: load pose {k + 1} not visited: its move never ran: "
                    f"{report_detail(report)}")
                continue
            if not report.succeeded:
                return_to(session, {arm: start})
                return f"the move to load pose {k + 1} failed: {report_detail(report)}"
        q_m, effort = rest_of(session, {arm: names}, window, latest=False)[arm]
        if q_m is None or effort is None or not np.all(np.isfinite(effort)):
            if k:
                return_to(session, {arm: start})
            if q_m is None:
                return f"no joint states of the arm at rest at load pose {k + 1}"
            missing = [] if effort is None else \
                [n for n, e in zip(names, effort) if not np.isfinite(e)]
            return ("the joint states carry no efforts" + (f" of {', '.join(missing)}"
                                                           if missing else "")
                    + ": nothing to fit")
        rests.append((q_m, effort))
        say(f"  {arm}: load pose {k + 1} of {len(poses)} weighed")
    report = return_to(session, {arm: start})
    if not report.succeeded:
        return f"moving back to the start pose failed: {report_detail(report)}"
    if skipped:
        say(f"  {arm}: {len(skipped)} of {len(poses)} load poses not visited ("
            + ", ".join(skipped) + "): the fit's standard errors count what is left")
    if len(rests) < max(2, len(poses) // 2):
        return (f"only {len(rests)} of {len(poses)} load poses weighed (not visited: "
                + ", ".join(skipped) + "): too few to fit the load from")
    return rests


def fit_rests(models: dict, rests_by_arm: dict) -> tuple[dict, dict]:
    """Every arm's rests fitted on its GravityModel (``models``: arm -> model): (the overlay of
    them all, arm -> what its fit says)."""
    fitted = {arm: (*fit_arm(models[arm], rests), rests) for arm, rests in rests_by_arm.items()}
    return overlay_of(fitted), {arm: said(fit, regressor, rests)
                                for arm, (fit, regressor, rests) in fitted.items()}


def _differs(fit, regressor: LoadRegressor) -> str:
    """Which parameters the efforts say differ from the model (SIGNIFICANT standard errors)."""
    nominal = regressor.nominal()
    off = []
    for name, v, s, n in zip(fit.names, fit.estimate, fit.std, nominal):
        if s > 0 and abs(v - n) > SIGNIFICANT * s:
            off.append(f"{name.split(':')[1]}'s link x{v:.2f} +- {s:.2f}"
                       if name.startswith("mass_factor:") else f"{name} {v:+.3f} +- {s:.3f}")
    k = fit.names.index(PAYLOAD[0])
    if not off:
        return (f"no part of the load is {SIGNIFICANT:g} standard errors off the model's "
                f"(payload {fit.estimate[k]:+.3f} +- {fit.std[k]:.3f} kg)")
    return "the arm's load differs from the model: " + ", ".join(off)


def _friction(model) -> np.ndarray:
    """(J,) each joint's error at rest, one sigma (N m): its static friction (``frictionloss``,
    uniform within +-it: / sqrt 3): the model's, or under co-simulation the actuator twin's
    (the twin-owned model has none of its own: ``model/twin_model.py``). A model without
    friction gives 0: the fit's own residual then stands for it, and its standard errors are
    too small where the real joints hold part of the load by friction (model it)."""
    own = np.asarray(model.model.dof_frictionloss[np.asarray(model.dof_adr)], dtype=float)
    twin = getattr(model, "twin_frictionloss", None)
    if twin is not None:
        own = np.maximum(own, np.asarray(twin, dtype=float))
    return own / np.sqrt(3.0)
