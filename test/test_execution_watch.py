"""Watching an execution while it runs: tracking error and arms out of step, on the simulated
pair through real DDS; and the watch's estimator against an exact reference."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.core.execution_watch import ExecutionWatch
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.report import ArmStatus, ExecutionStatus, StopKind
from mj_manipulator_ros.core.sync import FailureReason
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from bag_reader import read_bag
from factories import wait_for_plan_time
from tiny_arm import tiny_config


def swing_plan(duration: float = 2.0, amplitude: float = 0.5) -> MultiArmPlan:
    """Both arms out by ``amplitude`` on both joints and back, starting from rest at 0."""
    t = np.linspace(0.0, duration, 41)
    s = np.sin(np.pi * t / duration) ** 2
    ds = (np.pi / duration) * np.sin(2 * np.pi * t / duration)
    ds[-1] = 0.0
    return MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), t, np.outer(s, [sign * amplitude, amplitude]),
                                          np.outer(ds, [sign * amplitude, amplitude]))
                         for a, sign in (("left", 1.0), ("right", -1.0))})


def test_the_estimator_recovers_a_known_lag() -> None:
    """An arm that follows the plan exactly 0.15 s late: progress skew 0.15 s (to first order),
    no tracking error on the on-time arm; a lag of 20 ms stays under the default 0.1 s."""
    plan = swing_plan()

    def run(lag: float, max_skew: float) -> ExecutionWatch:
        config = tiny_config(__import__("pathlib").Path("/tmp")).executor.with_execution(
            path_tolerance_rad=0.0, max_progress_skew_s=max_skew)
        watch = ExecutionWatch(plan, 100.0, config)
        for t in np.arange(0.0, 2.0, 0.01):
            left = sample(plan["left"], [t])[0][0]
            right = sample(plan["right"], [max(t - lag, 0.0)])[0][0]
            watch.on_joint_state(["left_j1", "left_j2", "right_j1", "right_j2"],
                                 [*left, *right], 100.0 + t)
        return watch
    unwatched = run(0.15, 0.0)  # measure only
    assert unwatched.violation is None
    assert unwatched.max_progress_skew == pytest.approx(0.15, abs=0.03)
    tripped = run(0.15, 0.1)
    assert tripped.violation.reason == "progress_skew" and tripped.violation.arm == "right"
    assert "ms behind arm 'left'" in tripped.violation.text
    assert run(0.02, 0.1).violation is None
    assert tripped.max_tracking_error["left"] < 1e-9


def test_a_lagging_arm_is_caught_and_every_arm_stopped(tiny_sim, ros, tmp_path) -> None:
    """150 ms of command latency on the right arm: caught as progress_skew or tracking_error on
    the message that crosses the threshold (checked against the recorded joint states), every
    arm stopped along the plan and its stop confirmed (regression: the pair ran on, out of
    step)."""
    node = tiny_sim(right={"command_latency_s": 0.15})
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    record = tmp_path / "bag"
    with MultiArmExecutor(config, context=ros.context) as executor:
        report = executor.execute(swing_plan(), record=str(record))
    f = report.first_failure
    assert f is not None and f.reason in (FailureReason.PROGRESS_SKEW,
                                          FailureReason.TRACKING_ERROR), report.summary()
    # the trip stops every arm along the plan (docs/executor.md, "Which stop when"): the
    # failure is the report's, each arm took its stop goal and ended at rest, confirmed
    assert report.status is ExecutionStatus.FAILED and len(report.stops) == 1, report.summary()
    for arm in ("left", "right"):
        r = report.arms[arm]
        assert r.status is ArmStatus.STOPPED and r.stop is StopKind.CONTROLLED, report.summary()
        assert r.stop_confirmed and node.arms[arm].tickets[-1].outcome == "succeeded"
    assert node.arms["left"].tickets[0].outcome == "aborted"   # preempted by the stop goal
    # the same watch replayed over the recorded messages trips on one of the first two messages
    # beyond the threshold (detection within 2 joint-state periods of the crossing)
    lines = [{"t": m.header.stamp.sec + m.header.stamp.nanosec * 1e-9, "name": list(m.name),
              "position": list(m.position)} for m in read_bag(record).decoded("/joint_states")]
    replay = ExecutionWatch(swing_plan(), report.start_stamp, config)
    crossing = next(k for k, m in enumerate(lines)
                    if replay.on_joint_state(m["name"], m["position"], m["t"]) is not None)
    tripped_at = replay.violation.plan_time + report.start_stamp
    assert tripped_at <= lines[crossing]["t"] + 2 * 0.01 + 1e-9
    assert f.error_string and ("ms behind" in f.error_string or "from the plan" in f.error_string)


def test_no_false_trip_and_the_report_carries_the_figures(tiny_sim, ros, tmp_path) -> None:
    tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    with MultiArmExecutor(config, context=ros.context) as executor:
        report = executor.execute(swing_plan())
    assert report.succeeded, report.summary()
    for arm in ("left", "right"):
        r = report.arms[arm]
        assert 0.0 < r.max_tracking_error < 0.1 and 0.0 <= r.max_progress_skew < 0.1
        assert "max tracking error" in report.summary()


def test_one_speed_for_every_arm(tiny_sim, ros, tmp_path) -> None:
    """1.0 -> 0.5 mid-motion: every arm re-timed together from one new shared stamp (each goal
    preempted by the rest of its plan at half speed); the run succeeds, the arms keep one plan
    time, the recording replays clear, and the timeouts follow the slower plan (a 1.0 x duration
    + 0.5 s budget would end a half-speed run early)."""
    import threading

    from mj_manipulator_ros.check.preflight import scene_checker
    from mj_manipulator_ros.check.timeline import load_recording, timeline_from_recording

    node = tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True, "timeout_scaling": 1.0,
                                              "timeout_margin_s": 0.5}).executor
    plan = swing_plan(duration=3.0, amplitude=0.5)
    record = tmp_path / "bag"
    with MultiArmExecutor(config, context=ros.context) as executor:
        changed = {}

        def slow_down() -> None:
            wait_for_plan_time(executor, 0.8)
            changed["ok"] = executor.set_speed(0.5)
        t = threading.Thread(target=slow_down)
        t.start()
        report = executor.execute(plan, record=str(record))
        t.join(30)
        assert executor.set_speed(0.5) is False  # nothing running
        with pytest.raises(ValueError, match=r"expected a number in \[0.01, 1\]"):
            executor.set_speed(1.5)
    assert changed["ok"] and report.succeeded, report.summary()
    goals = {a: [tk.goal for tk in node.arms[a].tickets] for a in ("left", "right")}
    assert all(len(g) == 2 for g in goals.values())
    assert goals["left"][1].start_time == goals["right"][1].start_time  # one new shared stamp
    assert node.arms["left"].tickets[0].error_code == -1  # preempted by the re-timed goal
    duration = max(r.result_at for r in report.arms.values()) - report.start_stamp
    assert duration > 3.0 + 0.8  # the rest of the plan ran slower
    # one plan time between the arms: far inside the 0.1 s threshold (measured 3.8 ms on an
    # idle machine; the figure lives in bench/watch_bench.py, this bound survives a loaded one)
    for r in report.arms.values():
        assert r.max_progress_skew < 0.02, report.summary()
    cfg_full = tiny_config(tmp_path)
    timeline = timeline_from_recording(load_recording(record),
                                       {a.name: a.joint_names for a in cfg_full.executor.arms})
    assert scene_checker(cfg_full.executor).check(timeline=timeline, mode="recorded").collision_free


# ---- merged, fresh, finite and within the limits (issue 29 items 1, 2, 7; issue 26 item 3) ----

JOINTS = ["left_j1", "left_j2", "right_j1", "right_j2"]


def watch_for(plan: MultiArmPlan, **execution) -> ExecutionWatch:
    config = tiny_config(__import__("pathlib").Path("/tmp")).executor.with_execution(**execution)
    watch = ExecutionWatch(plan, 100.0, config)
    watch.set_start(100.0)
    return watch


def on_plan(plan: MultiArmPlan, t: float) -> list[float]:
    """The plan's pose at t, in JOINTS order (what a perfect pair reports)."""
    return [*sample(plan["left"], [t])[0][0], *sample(plan["right"], [t])[0][0]]


def test_a_nan_position_fails_the_watch_by_name() -> None:
    """Regression: NaN > tolerance is False, so a NaN joint passed as 'within tolerance'."""
    plan = swing_plan()
    watch = watch_for(plan)
    q = on_plan(plan, 0.5)
    q[2] = float("nan")
    v = watch.on_joint_state(JOINTS, q, 100.5, 100.5)
    assert v is not None and v.reason == "joint_states_invalid" and v.arm == "right"
    assert "'right_j1'" in v.text and "nan" in v.text
    assert FailureReason(v.reason) is FailureReason.JOINT_STATES_INVALID


def test_one_message_per_joint_is_merged_and_checked() -> None:
    """Every joint in its own message, each 5 rad off the plan: a tracking error (regression: a
    message without all of an arm's joints was skipped, and the arm reported 0.0)."""
    plan = swing_plan()
    watch = watch_for(plan)
    found = None
    for k, name in enumerate(JOINTS):
        found = found or watch.on_joint_state([name], [on_plan(plan, 0.5)[k] + 5.0], 100.5, 100.5)
    assert found is not None and found.reason == "tracking_error", found
    assert "+5.0000 from the plan" in found.text


def test_a_withdrawn_verdict_takes_its_readings_with_it() -> None:
    """The executor withdraws a verdict read on states that came after an arm's goal ended:
    that message's figures go with it, the ended arm is no longer judged, the others are."""
    plan = swing_plan()
    watch = watch_for(plan)
    for t in np.arange(0.0, 0.5, 0.01):
        assert watch.on_joint_state(JOINTS, on_plan(plan, t), 100 + t, 100 + t) is None
    before = dict(watch.max_tracking_error)
    q = on_plan(plan, 0.6)
    q[0] += 0.15                             # the left arm held by its controller, say
    v = watch.on_joint_state(JOINTS, q, 100.6, 100.6)
    assert v is not None and v.arm == "left" and watch.max_tracking_error["left"] > 0.14, v
    watch.done.add("left")
    watch.withdraw()
    assert watch.violation is None and watch.max_tracking_error == before
    q = on_plan(plan, 0.7)
    q[0] += 0.15
    assert watch.on_joint_state(JOINTS, q, 100.7, 100.7) is None   # left: no longer judged
    q = on_plan(plan, 0.8)
    q[2] += 0.15
    v = watch.on_joint_state(JOINTS, q, 100.8, 100.8)
    assert v is not None and v.arm == "right" and v.reason == "tracking_error"


def test_an_arm_never_reported_is_not_watched_not_perfect() -> None:
    plan = swing_plan()
    watch = watch_for(plan)
    for t in np.arange(0.0, 0.5, 0.01):
        assert watch.on_joint_state(JOINTS[:2], on_plan(plan, t)[:2], 100 + t, 100 + t) is None
    assert watch.max_tracking_error["left"] is not None and watch.max_tracking_error["left"] < 1e-3
    assert watch.max_tracking_error["right"] is None   # never measured: not 0.0
    assert watch.check_fresh(100.52) is None           # right never reported: nothing to go stale


@pytest.mark.parametrize("dropped", [["right_j1", "right_j2"], ["right_j2"]])
def test_joint_states_that_stop_while_moving_fail_as_stale(dropped) -> None:
    """Regression: a relay that stops forwarding the right arm's joints (or only one joint the
    plan does not need) once motion starts left the watch blind: 'succeeded, skew 0.0 ms'."""
    plan = swing_plan()
    watch = watch_for(plan, joint_state_timeout_s=0.1)
    violation = None
    for t in np.arange(0.0, 1.0, 0.01):
        names = JOINTS if t < 0.3 else [j for j in JOINTS if j not in dropped]
        q = dict(zip(JOINTS, on_plan(plan, t)))
        violation = watch.on_joint_state(names, [q[n] for n in names], 100 + t, 100 + t) \
            or watch.check_fresh(100 + t)
        if violation:
            break
    assert violation is not None and violation.reason == "joint_states_stale", violation
    assert violation.arm == "right" and all(f"'{j}'" in violation.text for j in dropped)
    assert 0.39 <= violation.plan_time <= 0.42  # the first check after 0.1 s without them
    # the evidence: the moment the stream went stale (its last message, 100.29 s, + 0.1 s),
    # not the check that noticed it
    assert violation.evidence_at == pytest.approx(100.39, abs=1e-9), violation.evidence_at


def test_a_tracking_violation_names_the_receipt_of_the_message_that_crossed() -> None:
    """The evidence of a watch's verdict is the message that crossed the bound, at its
    receipt (what the fault-to-stop benchmark counts from), not its stamp."""
    plan = swing_plan()
    watch = watch_for(plan, path_tolerance_rad=0.05)
    violation = None
    for k, t in enumerate(np.arange(0.0, 1.0, 0.01)):
        q = on_plan(plan, t)
        if t >= 0.5:
            q[0] += 0.06 * (t - 0.49) / 0.05   # the left arm's first joint drifts off
        violation = watch.on_joint_state(JOINTS, list(q), 100 + t, 200 + k)
        if violation:
            break
    assert violation is not None and violation.reason == "tracking_error", violation
    assert violation.evidence_at == 200 + k, (violation.evidence_at, k)
    assert 0.53 <= violation.plan_time <= 0.55, violation.plan_time


def test_a_joint_faster_than_its_limit_fails_and_the_peak_is_reported() -> None:
    """A step of 0.09 rad within 20 ms (a controller catching up with a late goal): 4.5 rad/s
    against a 3 rad/s limit (+10 %); the plan itself peaks at 0.8 rad/s."""
    plan = swing_plan()
    watch = watch_for(plan, path_tolerance_rad=0.0)
    for t in np.arange(0.0, 0.3, 0.01):
        assert watch.on_joint_state(JOINTS, on_plan(plan, t), 100 + t, 100 + t) is None
    calm = watch.max_velocity["left"]
    assert 0.0 < calm < 1.0
    q = on_plan(plan, 0.32)
    q[0] += 0.09
    v = watch.on_joint_state(JOINTS, q, 100.32, 100.32)
    assert v is not None and v.reason == "velocity_limit" and v.arm == "left", v
    assert "'left_j1'" in v.text and watch.max_velocity["left"] > 3.3
    # the message's own velocity field is used when given
    watch = watch_for(plan)
    v = watch.on_joint_state(JOINTS, on_plan(plan, 0.1), 100.1, 100.1, [0.0, 3.5, 0.0, 0.0])
    assert v is not None and v.reason == "velocity_limit" and "'left_j2'" in v.text


def test_rapid_speed_changes_keep_the_arms_on_the_plans_clock(tiny_sim, ros, tmp_path) -> None:
    """Twenty speed changes 50 ms apart (0.5 / 1.0) mid-motion: the run succeeds with the watch
    on at its defaults, and the last factor asked for is the one the plan ends at (regression:
    each change preempted goals that had not started, every controller restarted its move from
    its measured, lagging state, the arms fell 0.2 s behind the plan clock and the watch failed
    the run with tracking_error 0.10-0.19)."""
    import threading
    import time as _time

    node = tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    plan = swing_plan(duration=3.0, amplitude=0.8)
    asked, answers = [], []
    with MultiArmExecutor(config, context=ros.context) as executor:
        def flap() -> None:
            wait_for_plan_time(executor, 0.5)
            for k in range(20):
                asked.append(executor.set_speed(0.5 if k % 2 == 0 else 1.0))
                answers.append(executor.last_answer())
                _time.sleep(0.05)
        t = threading.Thread(target=flap)
        t.start()
        report = executor.execute(plan)
        t.join(30)
    # the run first: a request refused because the run had ended says why it ended
    assert report.succeeded, report.summary()
    assert all(asked) and len(asked) == 20, [str(a) for a in answers]
    for arm in ("left", "right"):
        assert report.arms[arm].max_tracking_error < 0.1
        goals = [tk.goal for tk in node.arms[arm].tickets]
        # one re-timing in flight at a time: far fewer goals than requests
        assert 2 <= len(goals) < 20, len(goals)
        last = goals[-1].trajectory
        # the last goal ramps to speed 1.0 (the last request), then runs the rest of the plan
        # at it: after the ramp's knots its waypoints are the plan's, 75 ms apart
        assert np.allclose(np.diff(last.times)[-5:], 0.075, atol=1e-9), np.diff(last.times)


def test_the_freshness_check_is_due_when_the_first_joint_would_go_stale() -> None:
    """next_stale_in: the time until the earliest reported joint's last receipt is
    joint_state_timeout_s old (when the run's wait checks instead of at its next tick); None
    before any report and with the check off; at that moment check_fresh trips, not before."""
    plan = swing_plan()
    watch = watch_for(plan, joint_state_timeout_s=0.1)
    assert watch.next_stale_in(100.0) is None
    q = dict(zip(JOINTS, on_plan(plan, 0.2)))
    watch.on_joint_state(JOINTS, [q[n] for n in JOINTS], 100.2, 100.2)
    right = [j for j in JOINTS if j.startswith("right")]
    watch.on_joint_state(right, [q[n] for n in right], 100.25, 100.25)
    # the left arm's joints were last received at 100.2: due at 100.3
    assert watch.next_stale_in(100.26) == pytest.approx(0.04, abs=1e-9)
    assert watch.check_fresh(100.3 - 1e-6) is None
    v = watch.check_fresh(100.3 + 1e-6)
    assert v is not None and v.arm == "left" and v.evidence_at == pytest.approx(100.3)
    assert watch_for(plan, joint_state_timeout_s=0.0).next_stale_in(100.0) is None
