"""The stop meter: an arm's stop measured on joint states split across messages."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mj_manipulator_ros.core.stop_meter import STILL_SPEED, StopMeter


def feed(meter: StopMeter, t: np.ndarray, q: np.ndarray, split: bool) -> None:
    """Joint states of arm "a" (joints j1, j2) at stamps t, positions q (M, 2); split: each
    joint in its own message (j2 first), as some drivers publish."""
    for stamp, row in zip(t, q):
        if split:
            meter.on_joint_state(["a_j2"], [row[1]], stamp)
            meter.on_joint_state(["a_j1", "other"], [row[0], 9.0], stamp)
        else:
            meter.on_joint_state(["a_j1", "a_j2", "other"], [row[0], row[1], 9.0], stamp)


@pytest.mark.parametrize("split", [False, True])
def test_travel_and_time_from_the_request(split) -> None:
    # j1 decelerates from 0.5 rad/s to rest over 0.2 s after a request at t = 1.0; j2 stands
    t = np.arange(0.0, 1.6, 0.002)
    v = np.clip(0.5 * (1.2 - t) / 0.2, 0.0, 0.5)
    q1 = np.concatenate([[0.0], np.cumsum(v[:-1] * np.diff(t))])
    q = np.column_stack([q1, np.full(t.size, 0.3)])
    meter = StopMeter({"a": ("a_j1", "a_j2")})
    feed(meter, t[t < 1.0], q[t < 1.0], split)
    meter.start(1.0)
    feed(meter, t[t >= 1.0], q[t >= 1.0], split)
    f = meter.figures("a", 1.0)
    # independent reference: the area under the velocity ramp, and where it falls below the
    # meter's threshold
    assert f.travel == pytest.approx(0.5 * 0.5 * 0.2, abs=2e-3)
    expected_time = 0.2 * (1.0 - STILL_SPEED / 0.5)
    assert f.time_s == pytest.approx(expected_time, abs=0.006)
    assert f.observed_s == pytest.approx(t[-1] - 1.0)
    assert meter.figures("a", None) is None


def test_nothing_recorded_before_a_stop_and_an_unreported_arm_has_no_figures() -> None:
    meter = StopMeter({"a": ("a_j1", "a_j2"), "b": ("b_j1",)})
    feed(meter, np.array([0.0, 0.1]), np.array([[0.0, 0.0], [0.1, 0.0]]), False)
    assert meter.figures("a", 0.0) is None           # not started: nothing kept
    meter.start(0.15)
    meter.start(5.0)                                  # the first request counts
    feed(meter, np.array([0.2, 0.3]), np.array([[0.1, 0.0], [0.1, 0.0]]), False)
    f = meter.figures("a", 0.15)
    assert f.travel == 0.0 and f.time_s == 0.0
    assert meter.figures("b", 0.15) is None


def frozen_interleaved(plan, start: float, freeze_at: float, until: float, period: float = 0.01):
    """The tiny pair's joint states as a position-only driver publishes them (no velocities,
    every ``period`` s from ``start``), following the plan exactly, except that from
    ``freeze_at`` every other message reports left_j1 still at its value then: a stale value
    interleaved with the true stream. Yields (names, positions, stamp)."""
    from mj_manipulator_ros.core.interpolation import sample

    names = [*plan["left"].joint_names, *plan["right"].joint_names]
    frozen = float(sample(plan["left"], [freeze_at])[0][0][0])
    for k, t in enumerate(np.arange(0.0, until, period)):
        q = [*sample(plan["left"], [t])[0][0], *sample(plan["right"], [t])[0][0]]
        if t >= freeze_at and k % 2:
            q[0] = frozen
        yield names, q, start + t


def test_a_stop_on_the_stream_that_failed_is_not_measured(tmp_path) -> None:
    """Regression: with left_j1's reported value frozen every other message, the watch stopped
    the run (velocity_limit), but the report's measured stop was computed from the same stream
    ("travel 1.8112 in 0.523 s"). Real watch and meter on plain values: the corrupted arm's
    stop says not measured, and why; the other arm's, on true values, is measured."""
    from mj_manipulator_ros.core.execution_watch import ExecutionWatch
    from mj_manipulator_ros.core.report import (
        ArmReport, ArmStatus, ExecutionReport, ExecutionStatus, StopKind)
    from mj_manipulator_ros.core.sync import Failure, FailureReason
    from mj_manipulator_ros.core.run_outcome import with_stop_figures
    from tiny_arm import swing, tiny_config

    plan, start = swing(), 100.0
    config = tiny_config(tmp_path).executor.with_execution(path_tolerance_rad=0.0)
    watch = ExecutionWatch(plan, start, config)
    meter = StopMeter({a: plan[a].joint_names for a in plan.arm_names})
    stream = list(frozen_interleaved(plan, start, freeze_at=0.5, until=2.0))
    tripped_at = None
    for names, q, stamp in stream:
        meter.on_joint_state(names, q, stamp)
        if tripped_at is None and watch.on_joint_state(names, q, stamp) is not None:
            tripped_at = stamp
            meter.start(stamp)   # the cancel, asked on the message that tripped
    v = watch.violation
    assert v is not None and (v.reason, v.arm) == ("velocity_limit", "left"), v
    # what the meter computes on the corrupted arm is no measurement: its travel is many times
    # the plan's own motion over the same span
    corrupted = meter.figures("left", tripped_at)
    from mj_manipulator_ros.core.interpolation import sample
    true_left = sample(plan["left"], np.arange(tripped_at - start, 2.0, 0.001))[0]
    planned = float(np.max(np.abs(np.diff(true_left, axis=0)).sum(axis=0)))
    assert corrupted.travel > 3 * planned, (corrupted, planned)

    failed = {a: ArmReport(ArmStatus.CANCELED, stop=StopKind.CANCEL, cancel_requested_at=tripped_at)
              for a in plan.arm_names}
    reports = with_stop_figures(failed, meter, (), v.stream_failed())
    left, right = reports["left"], reports["right"]
    assert (left.stop_travel, left.stop_time_s, left.stop_observed_s) == (None, None, None)
    assert left.stop_not_measured is not None and "velocity_limit" in left.stop_not_measured
    assert "joint-state stream was the failure" in left.stop_not_measured
    assert right.stop_travel is not None and right.stop_not_measured is None
    assert right.stop_travel == pytest.approx(meter.figures("right", tripped_at).travel)

    report = ExecutionReport(ExecutionStatus.FAILED, start, Failure(
        "left", FailureReason.VELOCITY_LIMIT, None, v.text), reports)
    doc = json.loads(report.to_json())
    assert doc["arms"]["left"]["stop_travel"] is None
    assert doc["arms"]["left"]["stop_not_measured"] == left.stop_not_measured
    assert ExecutionReport.from_dict(doc) == report
    line = next(x for x in report.summary().splitlines() if x.strip().startswith("left:"))
    assert "not measured: the joint-state stream was the failure (velocity_limit)" in line, line
    assert "travel" not in line, line


def test_only_the_streams_own_failures_withhold_the_figures(tmp_path) -> None:
    """Stale, invalid, beyond the velocity limit: the stream's own failures; a tracking error
    or arms out of step are the arms' (measured on a stream that was not the failure). A
    stale stream withholds every stale arm's figures."""
    from mj_manipulator_ros.core.execution_watch import ExecutionWatch, Violation
    from mj_manipulator_ros.core.sync import FailureReason
    from tiny_arm import swing, tiny_config

    stream_own = {"joint_states_stale", "joint_states_invalid", "velocity_limit"}
    for reason in FailureReason:
        v = Violation(reason.value, "left", "", 0.0, ("left",))
        assert bool(v.stream_failed()) == (reason.value in stream_own), reason
    plan = swing()
    watch = ExecutionWatch(plan, 100.0, tiny_config(tmp_path).executor.with_execution(
        joint_state_timeout_s=0.1))
    watch.on_joint_state(["left_j1", "left_j2", "right_j1", "right_j2"], [0.0] * 4, 100.0,
                         received=100.0)
    v = watch.check_fresh(100.5)
    assert v is not None and v.reason == "joint_states_stale"
    assert set(v.stream_failed()) == {"left", "right"}


@pytest.mark.parametrize("split", [False, True])
def test_a_request_whose_recording_begins_late_is_measured_from_the_request(split) -> None:
    """The caller read its clock (the request at t = 1.0), then joint states came on for 20 ms
    before it called start(): the travel is still measured from the pose at 1.0, not from the
    latest one when recording began (regression: under load the measured travel came out
    short by the arm's speed x the delay, 0.5 rad/s x 20 ms here)."""
    t = np.arange(0.0, 1.6, 0.002)
    v = np.clip(0.5 * (1.2 - t) / 0.2, 0.0, 0.5)
    q1 = np.concatenate([[0.0], np.cumsum(v[:-1] * np.diff(t))])
    q = np.column_stack([q1, np.full(t.size, 0.3)])
    meter = StopMeter({"a": ("a_j1", "a_j2")})
    late = t < 1.02
    feed(meter, t[late], q[late], split)
    meter.start(1.0)
    feed(meter, t[~late], q[~late], split)
    f = meter.figures("a", 1.0)
    # independent reference: the area under the velocity ramp from the request
    assert f.travel == pytest.approx(0.5 * 0.5 * 0.2, abs=2e-3)
    assert f.observed_s == pytest.approx(t[-1] - 1.0)


def test_only_the_last_second_before_a_request_is_kept() -> None:
    """Before any request the meter keeps each arm's last HISTORY_S of poses, no more."""
    from mj_manipulator_ros.core.stop_meter import HISTORY_S

    meter = StopMeter({"a": ("a_j1", "a_j2")})
    t = np.arange(0.0, 10.0, 0.01)
    feed(meter, t, np.column_stack([t, t]), False)
    meter.start(9.995)
    rows = meter._rows["a"]
    assert rows[0][0] == pytest.approx(9.99) and len(rows) == 1
    assert len(meter._history["a"]) == 0
    meter2 = StopMeter({"a": ("a_j1", "a_j2")})
    feed(meter2, t, np.column_stack([t, t]), False)
    kept = [r[0] for r in meter2._history["a"]]
    assert kept[-1] - kept[0] <= HISTORY_S + 1e-9 and kept[-1] - kept[0] >= HISTORY_S - 0.011
