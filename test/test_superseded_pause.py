"""A pause that a resume (or a speed factor) takes over before its ramp ends: the stop record
must not say every arm came to rest where the ramp would have ended.

Seen in a fresh run of ``test_combined_action.py``: ``~/speed_scaling`` 0 then 0.8 18 ms
apart; the report said "every arm at rest at plan time 1.123 s, 0.559 s after the request"
while the arms never stopped. Here synchronously (the simulated OpenArm pair, real MuJoCo,
its simulated controllers, ``bench/transitions.py``): whether an arm came to rest is read off
the controllers' position references, not the record."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from transitions import DirectRun, Rehearsal  # noqa: E402

from mj_manipulator_ros.core.plan_speed import PlanSpeed  # noqa: E402
from mj_manipulator_ros.core.sync import CancelScope, PlanClock  # noqa: E402

PAUSE_AT_S = 3.0


def _pause_then_resume(wait_for_rest: bool):
    """The crossing plan paused at PAUSE_AT_S of plan time, resumed either at once (before the
    pause's ramp starts) or once the ramp has ended. Returns (rehearsal, pause record, the
    resume's stamp, the slowest reference speed from the pause's ramp start to its end or the
    resume's stamp, whichever is later, rad/s)."""
    r = Rehearsal("position", seed=1)
    r.speed = PlanSpeed(r.config, lambda: int(round(r.now() * 1e9)), lambda pose: None)
    plan = r.plan
    runs = {a: DirectRun(r, a) for a in plan.arm_names}
    stamp = r.now() + r.config.execution.start_lead_s
    r.round_stamp = stamp
    for arm, run in runs.items():
        run.tickets.append(("plan", r.submit(arm, plan[arm], stamp)))
    clock = PlanClock(stamp)
    r.speed.begin(plan, runs, clock, CancelScope(), stamp)
    while clock.plan_time(r.now()) < PAUSE_AT_S:
        r.step()
    assert r.speed.pause("test pause")
    pause = r.speed.stops[-1]
    if wait_for_rest:
        while r.now() < pause.stamp + pause.ramp_s + 0.3:
            r.step()
    assert r.speed.resume(), "resume() refused"
    resumed = r.speed.stops[-1]
    resume_stamp = r.speed._stamp
    while r.now() < resume_stamp + 1.0:
        r.step()
    r.speed.end()
    t = np.array(r.times)
    speeds = []
    for arm in plan.arm_names:
        q = np.array([row[arm] for row in r.refs])
        speeds.append(np.abs(np.diff(q, axis=0) / np.diff(t)[:, None]).max(axis=1))
    fastest = np.max(speeds, axis=0)                 # per cycle: the fastest joint of any arm
    # from the pause's ramp start to its end or the resume's stamp, whichever is later
    window = (t[1:] >= pause.stamp) & \
        (t[1:] <= max(resume_stamp, pause.stamp + pause.ramp_s + 0.1))
    slowest = float(fastest[window].min()) if window.any() else float("nan")
    return r, resumed, resume_stamp, slowest


@pytest.mark.slow
def test_a_pause_taken_over_before_its_rest_says_so() -> None:
    _r, record, resume_stamp, slowest = _pause_then_resume(wait_for_rest=False)
    assert resume_stamp < record.stamp + record.ramp_s, "premise: the resume came first"
    assert slowest > 1e-3, f"premise: the arms came to rest ({slowest:.6f} rad/s)"
    assert record.superseded_at is not None, (
        f"the pause record says every arm was at rest at plan time {record.plan_time_end:.3f} s "
        f"but the slowest reference speed before the resume was {slowest:.3f} rad/s")
    assert record.superseded_at < record.plan_time_end


@pytest.mark.slow
def test_a_pause_that_reached_rest_keeps_its_rest() -> None:
    """The same pause left to its end: at rest (read off the references), and said so."""
    _r, record, _resume_stamp, slowest = _pause_then_resume(wait_for_rest=True)
    assert slowest < 1e-6, f"premise: no rest ({slowest:.4f} rad/s)"
    assert record.superseded_at is None, record
