"""A pause (or stop) asked in the start lead, after the stamp was made and before the plan's
start, with half the lead or more left: nothing has moved, so the arms hold at the plan's start
(the stop's stamp is the plan's own; tiny pair, real rclpy and DDS, the in-process simulator).
Regression: the ramp started one start lead after the request, past the plan's start, and was
computed from the plan's speed there, so the arms began the plan and then stopped; where the
plan's acceleration near its start is above ``stop_acceleration`` (the random sequences' swing:
5.3 against 4 rad/s^2) no ramp fitted and the pause became a cancel of the whole execution."""

from __future__ import annotations

import threading
import time

import numpy as np

from mj_manipulator_ros.core.goal_kind import GoalKind
from mj_manipulator_ros.core.time_scaling import config_bounds, plan_ramp
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from tiny_arm import swing, tiny_config

#: the start lead here, s (sim time, the simulator at real time): room to ask inside it
LEAD_S = 1.0
#: the pause is asked once this fraction of the lead is left, not before: the clock has moved
#: since the stamp was made, so a stop one start lead after the request would start past the
#: plan's start (the rule: half the lead or more left holds at the start; the rest of the
#: margin is the time the asking thread may be late on a loaded machine)
ASK_AT = 0.75


def test_a_stop_from_the_plans_start_is_a_hold_there(tmp_path) -> None:
    """The ramp itself: from plan time 0 (or before) to rest it is the start, held, at once;
    from just after it, a ramp along the plan."""
    config = tiny_config(tmp_path).executor
    plan = swing(3.0)
    bounds = config_bounds(plan, config)
    hold = plan_ramp(plan, 0.0, 1.0, 0.0, bounds)
    assert hold.end_plan_time == 0.0 and hold.duration == 0.0 and not hold.reaches_end
    for arm, traj in hold.trajectories.items():
        assert np.allclose(traj.positions, plan[arm].positions[0])
        assert np.all(traj.velocities == 0.0) and traj.times[-1] > 0.0
    later = plan_ramp(plan, 0.2, 1.0, 0.0, bounds)
    assert later.end_plan_time > 0.2 and later.duration > 0.0


def test_a_pause_in_the_start_lead_holds_at_the_start_and_resumes(tiny_sim, ros,
                                                                    tmp_path) -> None:
    sim = tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True,
                                              "start_lead_s": LEAD_S}).executor
    out: dict = {"moved": 0.0}
    with MultiArmExecutor(config, context=ros.context) as executor:
        def pause_in_the_lead() -> None:
            deadline = time.monotonic() + 20.0
            while time.monotonic() < deadline and not (
                    executor.current_stamp is not None
                    and executor.now() >= executor.current_stamp.seconds - ASK_AT * LEAD_S):
                time.sleep(0.002)
            out["in_lead"] = executor.now() - executor.current_stamp.seconds
            out["paused"] = executor.pause("test: pause in the start lead")
            while time.monotonic() < deadline and not all(
                    r.paused for r in executor.last_run.arms.values()):
                time.sleep(0.01)
            for _ in range(50):   # 0.5 s paused: the arms stand at the start
                snap = sim.shared.snapshot()
                out["moved"] = max(out["moved"], max(float(np.abs(s.positions).max())
                                                     for s in snap.arms.values()))
                time.sleep(0.01)
            out["resumed"] = executor.resume()
        thread = threading.Thread(target=pause_in_the_lead)
        thread.start()
        report = executor.execute(swing(3.0))
        thread.join(30)
    assert out["in_lead"] < 0 and out["paused"] and out["resumed"], out
    assert report.succeeded, report.summary()
    pause = report.stops[0]
    assert pause.kind is GoalKind.PAUSE
    left = report.start_stamp - pause.requested_at
    assert left >= 0.5 * LEAD_S, f"the pause came {left:.3f} s before the start: this machine " \
        f"was too slow to ask it with half the {LEAD_S} s lead left; the rule was not exercised"
    assert pause.stamp == report.start_stamp, pause   # the stop starts where the plan does
    assert pause.plan_time_end == 0.0 and all(v == 0.0 for v in pause.travel.values()), pause
    assert out["moved"] < 1e-3, out   # rad from the start, in physics, while paused
