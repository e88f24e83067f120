"""Controlled stop, pause and resume on the simulated OpenArm pair (real MuJoCo, real DDS, the
crossing plan at full speed): every arm decelerates along the plan on one plan time, within
its limits, with a reference continuous in position and velocity; the recording replays clear.

The reference the simulated controllers run is recorded every control cycle from the physics
thread (an observer), and checked here against limits the test reads from the configuration,
by finite differences of the reference positions (an independent reference: not the ramp's own
velocities and accelerations)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.core.report import ArmStatus, ExecutionStatus, StopKind
from mj_manipulator_ros.resources import config_file, share_dir
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from mj_manipulator_ros.sim.sim_config import sim_config

PLAN = "config/plans/openarm_crossing.yaml"


class ReferenceLog:
    """Every control cycle: the controllers' time and each arm's position reference (J,)."""

    def __init__(self, sim) -> None:
        self.rows: list[tuple[float, dict]] = []
        self._controllers = sim.shared.controllers
        self._period = sim.shared.control_period
        sim.shared.add_observer(sim.shared.settings.control_rate_hz, self._on_cycle)

    def _on_cycle(self, snap) -> None:
        # the physics thread, after the cycle's physics: the controllers evaluated their
        # references one control period earlier on their clock, at the cycle's start
        self.rows.append((snap.controller_time - self._period, {
            a: np.array(c.follower.position, dtype=float) for a, c in self._controllers.items()}))

    def arrays(self) -> tuple[np.ndarray, dict]:
        rows = list(self.rows)
        t = np.array([r[0] for r in rows])
        return t, {a: np.array([r[1][a] for r in rows]) for a in rows[0][1]}


@pytest.fixture
def openarm(ros, tmp_path):
    from mj_manipulator_ros.sim.sim_node import SimNode

    cfg = sim_config(load_config(config_file("sim_openarm.yaml")))
    sim = SimNode(cfg, context=ros.context).start()
    executor = MultiArmExecutor(cfg.executor, context=ros.context)
    try:
        yield sim, executor, cfg
    finally:
        executor.close()
        sim.close()


def _after_stamp(executor: MultiArmExecutor, plan_time: float, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while (executor.current_stamp is None or
           executor.now() < executor.current_stamp.seconds + plan_time) and \
            time.monotonic() < deadline:
        time.sleep(0.002)


def _limits(cfg, plan) -> dict:
    """Per arm (plan joint order): velocity limit and the acceleration bound (config's
    acceleration limit, else execution.stop_acceleration)."""
    out = {}
    for arm in plan.arm_names:
        lim = cfg.executor.arm(arm).joint_limits
        v = np.array([lim[j].velocity for j in plan[arm].joint_names])
        a = np.array([lim[j].acceleration or cfg.executor.execution.stop_acceleration
                      for j in plan[arm].joint_names])
        out[arm] = (v, a)
    return out


def _check_reference(t, ref, limits, what: str) -> dict:
    """Finite differences of the recorded position reference: peak |v| / v_max and |a| / a_max
    per arm, and the largest one-cycle position step over v_max dt (a jump shows as >> 1)."""
    dt = np.diff(t)
    assert dt.min() > 0, f"{what}: cycles out of order"
    out = {}
    for arm, q in ref.items():
        v_max, a_max = limits[arm]
        v = np.diff(q, axis=0) / dt[:, None]
        a = np.diff(v, axis=0) / dt[1:, None]
        out[arm] = (float((np.abs(v) / v_max).max()), float((np.abs(a) / a_max).max()))
    return out


@pytest.mark.slow
def test_a_controlled_stop_from_full_speed_ends_both_arms_on_one_plan_time(openarm, tmp_path
                                                                            ) -> None:
    sim, executor, cfg = openarm
    plan = load_plan(share_dir() / PLAN)
    log = ReferenceLog(sim)
    stop_at = 8.0       # the plan's fastest stretch (left joint 2 at 1.26 rad/s)
    asked = []

    def operator() -> None:
        _after_stamp(executor, stop_at)
        asked.append((executor.now(), executor.stop("operator stop (test)")))
    t = threading.Thread(target=operator)
    t.start()
    bag = tmp_path / "stop_bag"
    report = executor.execute(plan, record=str(bag))
    t.join(30)
    assert asked and asked[0][1], "stop() refused"
    assert report.status is ExecutionStatus.STOPPED, report.summary()
    assert len(report.stops) == 1
    record = report.stops[0]
    for arm in ("left", "right"):
        r = report.arms[arm]
        assert r.status is ArmStatus.STOPPED and r.stop is StopKind.CONTROLLED, report.summary()
        assert r.stop_confirmed
    assert stop_at <= record.plan_time_requested < record.plan_time_stamp < record.plan_time_end
    assert record.plan_time_end < plan.duration - 1.0

    # 0. every controller took its stop goal before the ramp began (else it joins mid-ramp)
    for arm in ("left", "right"):
        picked = sim.arms[arm].tickets[-1].picked_up_at
        assert picked < record.stamp, (
            f"{arm}: stop goal taken {(picked - record.stamp) * 1e3:.1f} ms after the ramp "
            f"began (ramp computed in {record.computed_s * 1e3:.0f} ms)")
    t_ref, ref = log.arrays()
    # 1. one plan time: each arm's reference comes to rest at its plan pose at plan_time_end,
    #    and both arrive in the same control cycle
    rest_cycle = {}
    for arm, q in ref.items():
        final, _, _ = sample(plan[arm], [record.plan_time_end])
        assert np.abs(q[-1] - final[0]).max() < 1e-9, (arm, q[-1] - final[0])
        moving = np.flatnonzero(np.abs(q - q[-1]).max(axis=1) > 1e-9)
        rest_cycle[arm] = t_ref[moving[-1] + 1]
    skew = abs(rest_cycle["left"] - rest_cycle["right"])
    period = 1.0 / cfg.sim.control_rate_hz
    assert skew <= period + 1e-6, f"arms came to rest {skew * 1e3:.2f} ms apart"
    # ... and the rest came when the ramp said (stamp + ramp), within a cycle
    assert abs(max(rest_cycle.values()) - (record.stamp + record.ramp_s)) <= period + 1e-6
    # 2. within the limits, no jump: every sample of the reference from the start on
    use = _check_reference(t_ref, ref, _limits(cfg, plan), "controlled stop")
    for arm, (v_use, a_use) in use.items():
        assert v_use <= 1.0 + 1e-6 and a_use <= 1.0 + 1e-3, (arm, v_use, a_use)
    # 3. the travel the report states is the plan's between request and rest
    for arm, travel in record.travel.items():
        ts = np.linspace(record.plan_time_requested, record.plan_time_end, 2000)
        p, _, _ = sample(plan[arm], ts)
        assert abs(travel - np.abs(np.diff(p, axis=0)).sum(axis=0).max()) < 1e-3
    # 4. the recording replays collision-free in the scene
    from mj_manipulator_ros.check.preflight import scene_checker
    from mj_manipulator_ros.check.timeline import load_recording, timeline_from_recording
    from mj_manipulator_ros.model.limits import load_config_with_model

    config = load_config_with_model(config_file("sim_openarm.yaml"))
    timeline = timeline_from_recording(load_recording(Path(report.record_path)),
                                       {a.name: a.joint_names for a in config.arms})
    replay = scene_checker(config).check(None, mode="recorded", timeline=timeline)
    assert replay.collision_free, replay.summary()
    print(f"controlled stop at plan time {record.plan_time_requested:.3f} s: rest at "
          f"{record.plan_time_end:.3f} s, {record.stop_time_s:.3f} s after the request "
          f"(ramp {record.ramp_s:.3f} s, computed in {record.computed_s * 1e3:.0f} ms); rest skew "
          f"{skew * 1e3:.2f} ms; peak use {use}")


@pytest.mark.slow
def test_pause_three_seconds_and_resume_mid_plan(openarm) -> None:
    sim, executor, cfg = openarm
    plan = load_plan(share_dir() / PLAN)
    log = ReferenceLog(sim)
    events = []

    def operator() -> None:
        _after_stamp(executor, 4.0)
        events.append(("pause", executor.now(), executor.pause("test pause")))
        time.sleep(3.0)
        events.append(("resume", executor.now(), executor.resume()))
    t = threading.Thread(target=operator)
    t.start()
    report = executor.execute(plan)
    t.join(30)
    assert [e[2] for e in events] == [True, True], events
    assert report.succeeded, report.summary()
    for arm in ("left", "right"):
        assert report.arms[arm].status is ArmStatus.SUCCEEDED
        # the watch ran through the pause at its defaults: a standing arm is on the plan
        assert report.arms[arm].max_tracking_error < cfg.executor.execution.path_tolerance_rad
        assert report.arms[arm].max_progress_skew < cfg.executor.execution.max_progress_skew_s
    # one shared stamp for the resume goals (the third goal of each arm: plan, pause, resume)
    stamps = {sim.arms[a].tickets[2].goal.start_time for a in ("left", "right")}
    assert len(stamps) == 1, stamps
    pause = report.stops[0]
    t_ref, ref = log.arrays()
    # standing for the pause: the reference held the pause pose from rest until the resume
    resume_stamp = stamps.pop()
    window = (pause.stamp + pause.ramp_s + 0.01, resume_stamp - 0.01)
    held = (t_ref > window[0]) & (t_ref < window[1])
    assert window[1] - window[0] > 2.0 and \
        held.sum() >= 0.99 * (window[1] - window[0]) * cfg.sim.control_rate_hz
    for arm, q in ref.items():
        final, _, _ = sample(plan[arm], [pause.plan_time_end])
        assert np.abs(q[held] - final[0]).max() < 1e-9
    use = _check_reference(t_ref, ref, _limits(cfg, plan), "pause and resume")
    for arm, (v_use, a_use) in use.items():
        assert v_use <= 1.0 + 1e-6 and a_use <= 1.0 + 1e-3, (arm, v_use, a_use)
