"""Controlled stop, pause and resume on the simulated OpenArm pair (real MuJoCo, real DDS, the
crossing plan at full speed): every arm decelerates along the plan on one plan time, within
its limits, with a reference continuous in position and velocity; the recording replays clear.

The scenario runs in a fresh process (``openarm_stop_driver.py``: why there); the reference the
simulated controllers run is recorded there every control cycle from the physics thread, and
checked here against limits read from the configuration, by finite differences of the
reference positions (an independent reference: not the ramp's own velocities and
accelerations)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.core.report import ArmStatus, ExecutionReport, ExecutionStatus, StopKind
from mj_manipulator_ros.resources import config_file, share_dir
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from mj_manipulator_ros.sim.sim_config import sim_config

PLAN = "config/plans/openarm_crossing.yaml"
DRIVER = Path(__file__).with_name("openarm_stop_driver.py")
sys.path.insert(0, str(DRIVER.parent))

from openarm_stop_driver import _after_stamp  # noqa: E402


def run_scenario(scenario: str, out: Path) -> tuple[ExecutionReport, dict, np.ndarray, dict]:
    done = subprocess.run([sys.executable, str(DRIVER), scenario, str(out)],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    report = ExecutionReport.from_dict(json.loads((out / "report.json").read_text()))
    extra = json.loads((out / "events.json").read_text())
    data = np.load(out / "ref.npz")
    return report, extra, data["t"], {a: data[a] for a in data.files if a != "t"}


def assert_recording_clear(report: ExecutionReport) -> None:
    """The run's recording (its bag) replays collision-free in the scene."""
    from mj_manipulator_ros.check.preflight import scene_checker
    from mj_manipulator_ros.check.timeline import load_recording, timeline_from_recording
    from mj_manipulator_ros.model.limits import load_config_with_model

    config = load_config_with_model(config_file("sim_openarm.yaml"))
    timeline = timeline_from_recording(load_recording(Path(report.record_path)),
                                       {a.name: a.joint_names for a in config.arms})
    replay = scene_checker(config).check(None, mode="recorded", timeline=timeline)
    assert replay.collision_free, replay.summary()


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
    per arm."""
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
def test_a_controlled_stop_from_full_speed_ends_both_arms_on_one_plan_time(tmp_path) -> None:
    cfg = sim_config(load_config(config_file("sim_openarm.yaml")))
    plan = load_plan(share_dir() / PLAN)
    report, extra, t_ref, ref = run_scenario("stop", tmp_path)
    asked = extra["events"]
    assert asked and asked[0][2], ("stop() refused", report.first_failure)
    stop_at = 8.0
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
        picked = extra["tickets"][arm][-1]["picked_up"]
        assert picked < record.stamp, (
            f"{arm}: stop goal taken {(picked - record.stamp) * 1e3:.1f} ms after the ramp "
            f"began (ramp computed in {record.computed_s * 1e3:.0f} ms)")
        # ... and after the goal's first point: taken before it, the controller moves from its
        # measured state to that point (its clock lagged more than the lead-in)
        assert picked >= record.goal_from, (
            f"{arm}: stop goal taken {(record.goal_from - picked) * 1e3:.1f} ms before its first "
            f"point (lead-in {(record.requested_at - record.goal_from) * 1e3:.0f} ms)")
    # 1. one plan time: each arm's reference comes to rest at its plan pose at plan_time_end,
    #    and both arrive in the same control cycle
    rest_cycle = {}
    for arm, q in ref.items():
        final, _, _ = sample(plan[arm], [record.plan_time_end])
        assert np.abs(q[-1] - final[0]).max() < 1e-9, (arm, q[-1] - final[0])
        moving = np.flatnonzero(np.abs(q - q[-1]).max(axis=1) > 1e-9)
        rest_cycle[arm] = t_ref[moving[-1] + 1]
    skew = abs(rest_cycle["left"] - rest_cycle["right"])
    period = extra["control_period"]
    assert skew <= period + 1e-6, f"arms came to rest {skew * 1e3:.2f} ms apart"
    # ... and the rest came when the ramp said (stamp + ramp), within a cycle
    assert abs(max(rest_cycle.values()) - (record.stamp + record.ramp_s)) <= period + 1e-6
    # 2. within the limits, no jump: every sample of the reference from a second before on
    use = _check_reference(t_ref, ref, _limits(cfg, plan), "controlled stop")
    for arm, (v_use, a_use) in use.items():
        assert v_use <= 1.0 + 1e-6 and a_use <= 1.0 + 1e-3, (arm, v_use, a_use)
    # 3. the travel the report states is the plan's between request and rest
    for arm, travel in record.travel.items():
        ts = np.linspace(record.plan_time_requested, record.plan_time_end, 2000)
        p, _, _ = sample(plan[arm], ts)
        assert abs(travel - np.abs(np.diff(p, axis=0)).sum(axis=0).max()) < 1e-3
    # 4. the recording replays collision-free in the scene
    assert_recording_clear(report)
    print(f"controlled stop at plan time {record.plan_time_requested:.3f} s: rest at "
          f"{record.plan_time_end:.3f} s, {record.stop_time_s:.3f} s after the request "
          f"(ramp {record.ramp_s:.3f} s, computed in {record.computed_s * 1e3:.0f} ms); rest skew "
          f"{skew * 1e3:.2f} ms; peak use {use}")


@pytest.mark.slow
def test_pause_three_seconds_and_resume_mid_plan(tmp_path) -> None:
    cfg = sim_config(load_config(config_file("sim_openarm.yaml")))
    plan = load_plan(share_dir() / PLAN)
    report, extra, t_ref, ref = run_scenario("pause", tmp_path)
    events = extra["events"]
    assert [e[2] for e in events] == [True, True], (events, report.first_failure)
    assert report.succeeded, report.summary()
    for arm in ("left", "right"):
        assert report.arms[arm].status is ArmStatus.SUCCEEDED
        # the watch ran through the pause at its defaults: a standing arm is on the plan
        assert report.arms[arm].max_tracking_error < cfg.executor.execution.path_tolerance_rad
        assert report.arms[arm].max_progress_skew < cfg.executor.execution.max_progress_skew_s
    # one shared stamp for the resume goals (the third goal of each arm: plan, pause, resume)
    stamps = {extra["tickets"][a][2]["start"] for a in ("left", "right")}
    assert len(stamps) == 1, stamps
    pause = report.stops[0]
    # standing for the pause: the reference held the pause pose from rest until the resume
    resume_stamp = stamps.pop()
    window = (pause.stamp + pause.ramp_s + 0.01, resume_stamp - 0.01)
    held = (t_ref > window[0]) & (t_ref < window[1])
    assert window[1] - window[0] > 2.0, (window, pause)
    # every control cycle of the window is there, but for the physics time the simulator
    # dropped (idle with the arms standing, a deficit to real time is dropped at once: its
    # stamps jump forward): what is missing from the recorded cycles is what it reports dropped
    period = extra["control_period"]
    dropped = events[1][3] - events[0][3]
    steps = np.diff(np.concatenate([[window[0]], t_ref[held], [window[1]]])) - period
    assert steps[1:-1].min() > -1e-6, "cycles out of order or repeated"
    missing = float(steps[steps > 1e-6].sum())
    # both sides are sums of differences of epoch-scale stamps (1.8e9 s: a float64 holds them
    # to 0.24 us): each term rounds by up to one unit there (a run beside a busy loop: 404.50661
    # ms missing against 404.50549 ms dropped, 1.1 us apart)
    rounding = (2 * int((steps > 1e-6).sum()) + 4) * float(np.spacing(window[1]))
    assert missing <= dropped + rounding, (
        f"{missing * 1e3:.1f} ms of the pause without a control cycle; the simulator dropped "
        f"{dropped * 1e3:.1f} ms")
    assert held.sum() >= 0.5 * (window[1] - window[0]) / period, (held.sum(), dropped)
    for arm, q in ref.items():
        final, _, _ = sample(plan[arm], [pause.plan_time_end])
        assert np.abs(q[held] - final[0]).max() < 1e-9
    use = _check_reference(t_ref, ref, _limits(cfg, plan), "pause and resume")
    for arm, (v_use, a_use) in use.items():
        assert v_use <= 1.0 + 1e-6 and a_use <= 1.0 + 1e-3, (arm, v_use, a_use)


@pytest.mark.slow
def test_an_aborted_arm_holds_while_its_peer_stops_along_the_plan(tmp_path) -> None:
    """The left controller aborts its goal at plan time 8 s (the fastest stretch) and holds;
    the right arm takes the controlled stop (not a cancel), within its limits, and comes to
    rest no further along the plan than the pre-flight gate's computed band allowed for; the
    recording of both arms replays collision-free."""
    from mj_manipulator_ros.check.failure_band import failure_band
    from openarm_stop_driver import ABORT_AT_S, START_LEAD_S

    cfg = sim_config(load_config(config_file("sim_openarm.yaml")))
    plan = load_plan(share_dir() / PLAN)
    report, extra, t_ref, ref = run_scenario("abort", tmp_path)
    assert report.status is ExecutionStatus.FAILED, report.summary()
    assert report.first_failure.arm == "left" and report.first_failure.reason.value == "aborted"
    assert report.arms["left"].status is ArmStatus.ABORTED
    right = report.arms["right"]
    assert right.status is ArmStatus.STOPPED and right.stop is StopKind.CONTROLLED, \
        report.summary()
    assert len(report.stops) == 1 and report.stops[0].held == ("left",)
    record = report.stops[0]
    assert set(record.travel) == {"right"}
    # measured on the joint states against computed from the ramp: the right arm's travel;
    # the left, held by its controller from its result, runs on no further than the gate's
    # stop band assumes (execution.hold_overshoot_s of plan time at the plan's speed there)
    assert abs(right.stop_travel - record.travel["right"]) <= 0.02, (right, record.travel)
    left = report.arms["left"]
    _, v, _ = sample(plan["left"], [ABORT_AT_S])
    bound = cfg.executor.execution.hold_overshoot_s * np.abs(v[0]).max()
    assert left.stop_travel is not None and left.stop_travel <= bound, (left, bound)
    # the left arm was sent nothing more: its plan goal (aborted) only
    assert [tk["outcome"] for tk in extra["tickets"]["left"]] == ["aborted"]
    # the right reference within its limits, continuous at the switch
    use = _check_reference(t_ref, {"right": ref["right"]}, _limits(cfg, plan), "peer stop")
    assert use["right"][0] <= 1.0 + 1e-6 and use["right"][1] <= 1.0 + 1e-3, use
    # the gate's band covers what happened: the peer rests within it of the failed arm's
    # plan time (the left goal ran ABORT_AT_S of the plan)
    band = failure_band(plan, cfg.executor.with_execution(start_lead_s=START_LEAD_S))
    assert record.plan_time_end - ABORT_AT_S <= band.controlled_s, (record, band)
    assert_recording_clear(report)
    print(f"left aborted at plan time {ABORT_AT_S:.3f} s; right at rest at plan time "
          f"{record.plan_time_end:.3f} s ({(record.plan_time_end - ABORT_AT_S) * 1e3:.0f} ms "
          f"further; the gate's band allows {band.controlled_s * 1e3:.0f} ms), "
          f"{record.stop_time_s:.3f} s after the request; right peak use {use['right']}; "
          f"measured travel right {right.stop_travel:.4f} (computed {record.travel['right']:.4f}),"
          f" left {left.stop_travel:.4f} in {left.stop_time_s:.3f} s (bound {bound:.4f})")


def test_resume_refuses_an_arm_moved_while_paused_and_stays_paused(tiny_sim, ros, tmp_path
                                                                   ) -> None:
    """While paused, the right arm is moved by something else (a goal straight to its
    controller) by 0.04 rad, beyond the start tolerance (0.01) and within the watch's path
    tolerance (0.1): resume refuses naming the arm and joint, nothing is sent, the execution
    stays paused; stop() then ends it stopped."""
    from mj_manipulator_ros.core.errors import StartStateError
    from mj_manipulator_ros.sim.goal import GoalRequest, check_goal
    from test_execution_watch import swing_plan
    from tiny_arm import tiny_config

    node = tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    plan = swing_plan(duration=4.0, amplitude=0.8)
    outcome = {}
    with MultiArmExecutor(config, context=ros.context) as executor:
        def operator() -> None:
            _after_stamp(executor, 1.0)
            outcome["paused"] = executor.pause("test")
            deadline = time.monotonic() + 10
            while not all(r.paused for r in executor.last_run.arms.values()) and \
                    time.monotonic() < deadline:
                time.sleep(0.01)
            right = node.arms["right"]
            q = node.shared.snapshot().arms["right"].positions
            req = GoalRequest(right.controller.joint_names, [0.0, 0.5], [q, q + 0.04],
                              [[0.0] * q.size] * 2, [[], []], 0.0)
            _, goal = check_goal(req, right.controller.joint_names, None,
                                 node.shared.settings.tolerances)
            ticket = right.controller.submit(goal)
            ticket.done.wait(10)
            goals_before = {a: len(node.arms[a].tickets) for a in ("left", "right")}
            try:
                executor.resume()
            except StartStateError as exc:
                outcome["refused"] = str(exc)
            outcome["still"] = executor.speed.state
            outcome["sent"] = {a: len(node.arms[a].tickets) - goals_before[a]
                               for a in ("left", "right")}
            outcome["stopped"] = executor.stop("operator gave up")
        t = threading.Thread(target=operator)
        t.start()
        report = executor.execute(plan)
        t.join(30)
    assert outcome["paused"] and outcome.get("refused"), outcome
    assert "arm 'right'" in outcome["refused"] and "joint 'right_j" in outcome["refused"]
    assert outcome["still"] == "paused" and outcome["sent"] == {"left": 0, "right": 0}
    assert outcome["stopped"] and report.status is ExecutionStatus.STOPPED, report.summary()
