"""A speed change computed on a starved machine: computing its ramp takes longer than the
start lead. The change must still reach every controller before its ramp begins (a goal taken
after it fails the execution, ``late_acceptance``: seen in a loaded suite, the replacement
goals sent 120-126 ms after their ramp's start).

The machine's slowness is made exactly, synchronously: while ``PlanSpeed`` computes the ramp
(its real computation, on the crossing plan), physics runs on for ``COMPUTE_S``, as the
controllers' clock does while a starved executor computes. Each goal's sending time is the
controllers' clock at the moment it was handed to the arm; its ramp's start is what
``PlanSpeed`` said (``departs_s``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from transitions import DirectRun, Rehearsal  # noqa: E402

from mj_manipulator_ros.core.plan_speed import PREPARE_TRIES, PlanSpeed  # noqa: E402
from mj_manipulator_ros.core.sync import CancelScope, PlanClock  # noqa: E402


class TimedRun(DirectRun):
    """Records, per goal handed over: (the controllers' clock then, where its ramp begins)."""

    def __init__(self, rehearsal: Rehearsal, arm: str) -> None:
        super().__init__(rehearsal, arm)
        self.handed: list[tuple[float, float]] = []

    def request_retime(self, trajectory, stamp, kind, departs_s=None) -> None:
        self.handed.append((self.rehearsal.now(),
                            stamp.seconds if departs_s is None else departs_s))
        super().request_retime(trajectory, stamp, kind, departs_s)


def _slow_change(compute_s: float):
    r = Rehearsal("position", seed=1)
    r.speed = PlanSpeed(r.config, lambda: int(round(r.now() * 1e9)), lambda pose: None)
    lead = r.config.execution.start_lead_s
    plan = r.plan
    runs = {a: TimedRun(r, a) for a in plan.arm_names}
    stamp = r.now() + lead
    for arm, run in runs.items():
        run.tickets.append(("plan", r.submit(arm, plan[arm], stamp)))
    clock = PlanClock(stamp)
    r.speed.begin(plan, runs, clock, CancelScope(), stamp)
    while clock.plan_time(r.now()) < 2.0:
        r.step()
    real_plan = r.speed._plan
    computed = []

    def slow_plan(*args, **kwargs):   # the real computation, on a machine this slow
        ramp = real_plan(*args, **kwargs)
        r.step(int(round(compute_s / r.period)))
        computed.append(compute_s)
        return ramp
    r.speed._plan = slow_plan
    answer = r.speed.set_speed(0.5)
    r.speed.end()
    return answer, runs, lead, computed


def test_a_ramp_computed_slower_than_the_lead_still_reaches_the_arms_before_it_begins() -> None:
    lead = Rehearsal("position", seed=1).config.execution.start_lead_s
    compute_s = 1.2 * lead
    answer, runs, lead, computed = _slow_change(compute_s)
    assert answer, answer
    assert len(computed) <= PREPARE_TRIES
    for arm, run in runs.items():
        assert run.handed, f"{arm}: no goal handed over"
        handed, departs = run.handed[-1]
        # handed over with at least half the lead left, as when computing is quick
        assert departs - handed >= 0.5 * lead - 1e-9, (
            f"{arm}: handed over {(handed - departs) * 1e3:+.1f} ms from its ramp's start "
            f"(lead {lead * 1e3:.0f} ms, each computing {compute_s * 1e3:.0f} ms, "
            f"{len(computed)} computed)")


def test_a_quick_ramp_begins_one_lead_after_it_was_asked() -> None:
    """Computing as quick as idle (one control period): the first computation is sent, its
    ramp one lead after the request (the extra lead only after a slow one)."""
    r = Rehearsal("position", seed=1)
    answer, runs, lead, computed = _slow_change(r.period)
    assert answer and len(computed) == 1, (answer, computed)
    for arm, run in runs.items():
        handed, departs = run.handed[-1]
        assert abs((departs - handed) - (lead - r.period)) < 2 * r.period, (arm, handed, departs)
