"""The pre-flight gate: refuse, before any goal is sent, a plan that collides when replayed
synchronized through the configuration's MuJoCo scene (``execution.preflight_check: true``).

The executor only takes a ``plan -> None`` callable; program entry points build this one with
:func:`preflight_for` (the ROS layer never imports the check).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from types import SimpleNamespace
from typing import Callable, Mapping, Optional

import numpy as np

from mj_manipulator_ros.check.failure_band import FailureBand, failure_band
from mj_manipulator_ros.check.replay_checker import JOIN_S, PlanReplayChecker
from mj_manipulator_ros.check.report import ReplayReport
from mj_manipulator_ros.check.stop_envelope import has_limits
from mj_manipulator_ros.check.stop_fit import StopFit, fit_stop_limits
from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.errors import ConfigError, ExecutionRefusedError
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.model.arm_binding import ArmBinding
from mj_manipulator_ros.model.scene import scene_for


def scene_checker(config: ExecutorConfig, **kwargs) -> PlanReplayChecker:
    """A replay checker on the scene described by the config's ``scene`` section (required)."""
    return PlanReplayChecker.from_scene(scene_for(config), **kwargs)


class PlanRefused(ExecutionRefusedError):
    """The pre-flight replay found a collision; ``report`` has the details."""

    def __init__(self, report: ReplayReport, band: Optional[FailureBand] = None) -> None:
        how = (f"with the arms up to {report.skew * 1e3:.0f} ms apart in plan time (a stop "
               "band" + (f", set by {band.set_by}" if band else "") + ")"
               if report.mode == "band" else "synchronized")
        super().__init__(f"pre-flight check refused the plan (nothing was sent): it collides "
                         f"when replayed {how}\n" + report.summary())
        self.report = report
        self.band = band


class PreflightCheck:
    """Callable gate for :class:`MultiArmExecutor`: builds the checker once, then certifies each
    plan synchronized and, with more than one arm, in the stop band (every pair of arms up to
    that far apart in plan time: where arms that stop at different times end up), the band
    computed for the plan from its stopping distances (``check/failure_band.py``: one arm
    failed and holding while its peers take the controlled stop; every arm canceled).

    A plan over some of the scene's arms (MoveIt sends single-arm goals routinely) is checked
    against the other arms held still where they are: ``held`` gives their measured positions
    (arm -> (J,), in the configuration's joint order).

    The arms' gripper joints (``arms[].gripper_joints``) stand where ``grippers`` has them
    (measured: joint -> rad or m), the others at the scene's reference pose.

    A plan's verdict is kept by the fingerprint of the plan as checked (the held arms' poses
    and the gripper positions in it): the same plan from the same poses is accepted or refused
    again without a replay."""

    #: the bands and verdicts of this many plans are kept (a cell runs the same plans again and
    #: again; the scene, margin and configuration are this gate's own)
    BANDS_KEPT = 32

    def __init__(self, config: ExecutorConfig, **kwargs) -> None:
        self.checker = scene_checker(config, **kwargs)
        self.config = config
        self.last_band: Optional[FailureBand] = None
        self._bands: "OrderedDict[str, FailureBand]" = OrderedDict()
        #: plan fingerprint -> (synchronized report, band report, band) of a plan checked
        self._verdicts: "OrderedDict[str, tuple]" = OrderedDict()
        #: plan fingerprint -> the plan fitted to the stop limits (or the refusal's error)
        self._fits: "OrderedDict[str, object]" = OrderedDict()

    def fit_stop_limits(self, plan: MultiArmPlan) -> StopFit:
        """``plan`` slowed where a stop from some plan time would pass the configuration's stop
        limits (``check/stop_fit.py``; the plan itself when none is set or all fit), kept
        by the plan's fingerprint as the bands are.

        Raises:
            StopLimitError: no speed fits somewhere (by arm, plan time and figure)."""
        if not has_limits(self.config, plan.arm_names):
            return StopFit(plan, duration_before=plan.duration, duration_after=plan.duration)
        key = plan_fingerprint(plan)
        fit = self._fits.get(key)
        if fit is None:
            try:
                fit = fit_stop_limits(plan, self.config, SimpleNamespace(
                    model=self.checker.model, arms=self.checker.arms))
            except ExecutionRefusedError as exc:
                fit = exc
            self._fits[key] = fit
            while len(self._fits) > self.BANDS_KEPT:
                self._fits.popitem(last=False)
        self._fits.move_to_end(key)
        if isinstance(fit, Exception):
            raise fit
        return fit

    @property
    def not_checked(self) -> tuple[str, ...]:
        """The configuration's ``scene.allowed_collisions`` pairs this gate skips, each with its
        reason (and ``[BETWEEN ARMS]`` / ``[WHOLE FIXED BODY]`` where its entry said so): every
        report of an execution through this gate lists them."""
        return tuple(self.checker.scope()["configured"])

    def __call__(self, plan: MultiArmPlan,
                 held: Optional[Mapping[str, np.ndarray]] = None,
                 grippers: Optional[Mapping[str, float]] = None) -> ReplayReport:
        moving = plan
        plan = with_held_arms(plan, held or {}, self.checker.arms)
        grippers = dict(sorted((grippers or {}).items()))
        # the plan as checked: the held arms' poses and the grippers' positions in it
        key = plan_fingerprint(plan) + repr(grippers)
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._verdicts[key] = self._certify(moving, plan, grippers)
            while len(self._verdicts) > self.BANDS_KEPT:
                self._verdicts.popitem(last=False)
        self._verdicts.move_to_end(key)
        report, band, need = verdict
        if need is not None:
            self.last_band = need
        if not report.collision_free:
            raise PlanRefused(report)
        if band is not None and not band.collision_free:
            raise PlanRefused(band, need)
        return report

    def _certify(self, moving: MultiArmPlan, plan: MultiArmPlan, grippers: Mapping[str, float]
                 ) -> tuple[ReplayReport, Optional[ReplayReport], Optional[FailureBand]]:
        """The synchronized replay of ``plan`` (every arm of the scene) and, when it is clear
        and more than one arm is in it, its band replay and the band's width from ``moving``
        (the arms the plan moves); the grippers where ``grippers`` has them."""
        several = len(plan.arm_names) >= 2
        # the band's width is computed beside the synchronized replay (both mostly C with the
        # GIL released): used only when the replay is clear, as before
        width = _Beside(failure_band, moving, self.config) \
            if several and plan_fingerprint(moving) not in self._bands else None
        try:
            report = self.checker.check(plan, mode="synchronized", continuous=True,
                                        grippers=grippers)
        finally:
            computed = width.result() if width is not None else None
        if not report.collision_free or not several:
            return report, None, None
        if isinstance(computed, Exception):
            raise computed
        need = self.band(moving, computed)
        return report, self.checker.check(plan, mode="band", skew=need.skew_s,
                                          grippers=grippers, diagonal=report), need

    def band(self, plan: MultiArmPlan, computed: Optional[FailureBand] = None) -> FailureBand:
        """The stop band of ``plan`` (``check/failure_band.py``), computed once per plan: kept
        by the plan's fingerprint (every arm's names, times and values; the configuration is
        this gate's own). The arms a plan leaves out stand still (no velocity, no
        acceleration): they never bind a stop's ramp, so the band is the moving arms' own.
        ``computed``: the band of ``plan`` already computed (kept as if computed here)."""
        key = plan_fingerprint(plan)
        band = self._bands.get(key)
        if band is None:
            band = self._bands[key] = computed if computed is not None \
                else failure_band(plan, self.config)
            while len(self._bands) > self.BANDS_KEPT:
                self._bands.popitem(last=False)
        self._bands.move_to_end(key)
        return band


class _Beside:
    """``fn(*args)`` in a thread of its own, started at once; :meth:`result` joins it (bounded)
    and gives its return value or the exception it raised."""

    def __init__(self, fn: Callable, *args) -> None:
        self._out: list = []

        def run() -> None:
            try:
                self._out.append(fn(*args))
            except Exception as exc:   # noqa: BLE001 - handed to the caller's thread
                self._out.append(exc)
        self._thread = threading.Thread(target=run, name="mjmr-preflight-band", daemon=True)
        try:
            self._thread.start()
        except RuntimeError:   # no thread to be had (the process's limit): computed here
            self._thread = None
            run()

    def result(self) -> object:
        if self._thread is not None:
            self._thread.join(JOIN_S)
            if self._thread.is_alive():
                return RuntimeError(f"the stop band's width was not computed within {JOIN_S:g} "
                                    "s (thread mjmr-preflight-band still running)")
        return self._out[0]


def plan_fingerprint(plan: MultiArmPlan) -> str:
    """sha256 over every arm's name, joint names, times and values (positions, velocities,
    accelerations where given): two plans with one fingerprint are the same plan."""
    h = hashlib.sha256()
    for name in plan.arm_names:
        t = plan[name]
        h.update(repr((name, tuple(t.joint_names))).encode())
        for values in (t.times, t.positions, t.velocities, t.accelerations):
            h.update(b"-" if values is None else
                     repr(values.shape).encode() + np.ascontiguousarray(values, float).tobytes())
    return h.hexdigest()


def with_held_arms(plan: MultiArmPlan, held: Mapping[str, np.ndarray],
                   arms: Mapping[str, ArmBinding]) -> MultiArmPlan:
    """The plan with every arm of ``arms`` it leaves out standing still at ``held[arm]`` on the
    plan's time grid (the scene's arms in the scene's order).

    Raises:
        ExecutionRefusedError: an arm left out whose position is not given.
    """
    missing = [a for a in arms if a not in plan.arm_names and a not in held]
    if missing:
        raise ExecutionRefusedError(
            f"the plan moves {list(plan.arm_names)}; the pre-flight check needs the measured "
            f"position of every other arm of the scene to check it against, and has none for "
            f"{missing}")
    if all(a in plan.arm_names for a in arms):
        return plan
    times = plan[plan.arm_names[0]].times
    out = {}
    for name, binding in arms.items():
        if name in plan.arm_names:
            out[name] = plan[name]
            continue
        q = np.asarray(held[name], dtype=float)
        if q.shape != (len(binding.joint_names),):
            raise ExecutionRefusedError(
                f"arm {name!r}: held position has shape {q.shape}; expected "
                f"({len(binding.joint_names)},) for {list(binding.joint_names)}")
        out[name] = ArmTrajectory(binding.joint_names, times, np.tile(q, (times.size, 1)),
                                  np.zeros((times.size, q.size)))
    return MultiArmPlan(out)


def preflight_for(config: ExecutorConfig) -> Optional[Callable[..., ReplayReport]]:
    """The gate the configuration asks for: a :class:`PreflightCheck` with
    ``execution.preflight_check`` (the default), None only when it is turned off explicitly.

    Raises:
        ConfigError: the check is on and the configuration has no ``scene`` to replay in.
    """
    if not config.execution.preflight_check:
        limited = [a for a in config.arm_names if has_limits(config, [a])]
        if limited:
            raise ConfigError(
                f"{config.source or 'the configuration'}: stop limits are set for arm(s) "
                f"{limited} (max_stop_time_s / max_stop_distance_m) and execution."
                "preflight_check is off: the pre-flight gate is what enforces them; turn it on "
                "(it needs a `scene` section) or unset the limits")
        return None
    if "scene" not in config.extra:
        raise ConfigError(
            f"{config.source or 'the configuration'}: execution.preflight_check is on (the "
            "default) and needs a `scene` section describing the robot and its surroundings to "
            "replay plans in; add one, or set `execution: {preflight_check: false}` to run "
            "plans unchecked (every report then says so)")
    return PreflightCheck(config)
