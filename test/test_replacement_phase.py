"""While a replacement goal (a controlled stop's, a pause's, a speed change's) waits for its
arm's thread or is being sent, the arm says so: the request is pending in its slot, or its
phase is REPLACING, at every moment. A driver that steps physics only while no goal is in
flight (bench/lockstep_sequences.py) relies on it; between the slot emptied and the phase
moved it saw neither and stepped past a pause's ramp start on a loaded machine (seed 21). The
reference here: the arm's phase read at the very moment its thread takes the request."""

from __future__ import annotations

from mj_manipulator_ros.core.arm_phase import ArmPhase
from mj_manipulator_ros.core.arm_requests import ArmRequests
from mj_manipulator_ros.core.report import ExecutionStatus
from mj_manipulator_ros.ros.executor import MultiArmExecutor

from plan_moment import at_plan_time
from test_execution_watch import swing_plan
from tiny_arm import tiny_config


def test_a_taken_replacement_is_already_replacing(tiny_sim, ros, tmp_path, monkeypatch) -> None:
    tiny_sim()
    seen: list[tuple[str, ArmPhase, str]] = []
    original = ArmRequests.take
    executor_box: list[MultiArmExecutor] = []

    def take(self: ArmRequests):
        run = executor_box[0].last_run
        client = next(r for r in run.arms.values() if r.requests is self)
        waiting = self.waiting
        seen.append((self.arm, client.phase, waiting.kind.value if waiting else ""))
        return original(self)
    monkeypatch.setattr(ArmRequests, "take", take)
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    with MultiArmExecutor(config, context=ros.context) as executor:
        executor_box.append(executor)
        thread = at_plan_time(executor, 0.6, lambda: executor.stop("operator (test)"))
        try:
            report = executor.execute(swing_plan())
        finally:
            thread.join(25.0)
    assert report.status is ExecutionStatus.STOPPED, report.summary()
    assert {arm for arm, _, _ in seen} == {"left", "right"}, seen   # each arm's stop goal
    assert all(phase is ArmPhase.REPLACING for _, phase, _ in seen), seen
