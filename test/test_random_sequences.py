"""Random operator sequences against the whole executor (``bench/random_sequences.py``; the
bench runs 1,000): pauses, resumes, controlled stops, speed changes, aborts and controller
failures at random moments of one execution each, on the tiny pair's simulator with real DDS
and the executor's own threads. Each sequence ends with one report, terminal, every stop
confirmed and no thread left; every request that said yes shows in the report; no paused arm
moves; every arm reported stopped is at rest."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from random_sequences import Bench  # noqa: E402

#: sequences in the suite (seeds 1..COUNT); the bench runs 1,000
COUNT = 16


@pytest.mark.slow
def test_random_operator_sequences_keep_every_invariant(tmp_path) -> None:
    bench = Bench(tmp_path)
    try:
        seqs = bench.run(range(1, COUNT + 1))
    finally:
        bench.close()
    bad = {s.seed: s.problems for s in seqs if s.problems}
    assert not bad, bad
    said_yes = {r.action for s in seqs for r in s.requests if r.answer is True}
    # not vacuous: every kind of request was made and acted on somewhere in the seeds
    assert said_yes >= {"pause", "resume", "stop", "speed", "abort", "fault"}, said_yes
    statuses = {s.report.status.value for s in seqs}
    assert len(statuses) >= 3, statuses
    print({s.seed: (s.report.status.value, [(r.action, round(r.at, 2), r.answer)
                                            for r in s.requests]) for s in seqs})


#: the seeds run through the execution node in the suite (the bench's 300: 1..300); these
#: draw pauses, resumes, stops, cancels and a failing controller among them
SEEDS_COMBINED = range(9, 17)


@pytest.mark.slow
def test_random_sequences_through_the_combined_action_end_with_one_result_each(tmp_path) -> None:
    """The same sequences made as a ROS user makes them (``bench/random_combined.py``): the
    combined goal, ``~/pause``/``~/resume``/``~/stop``, ``~/speed_scaling``, the goal's cancel.
    Each goal gets one terminal result that says what the node's report says, within 5 s of it,
    on top of the executor's invariants."""
    from random_combined import ActionBench
    bench = ActionBench(tmp_path)
    try:
        seqs = bench.run(SEEDS_COMBINED)
    finally:
        bench.close()
    bad = {s.seed: s.problems for s in seqs if s.problems}
    assert not bad, bad
    said_yes = {r.action for s in seqs for r in s.requests if r.answer is True}
    assert said_yes >= {"pause", "stop", "cancel"}, said_yes   # not vacuous
    print({s.seed: (s.report.status.value, [(r.action, round(r.at, 2), r.answer)
                                            for r in s.requests]) for s in seqs})


def test_the_result_rules_catch_a_result_that_disagrees_with_the_report() -> None:
    """The combined bench's own rules, on results that break them (so they can fail)."""
    from action_msgs.msg import GoalStatus
    from random_combined import _result_problems
    from random_sequences import Request, Sequence
    from mj_manipulator_ros.core.report import ExecutionReport, ExecutionStatus

    def found(status, report_status, cancel_sent=False, late=0.0, requests=()):
        seq = Sequence(0, list(requests), ExecutionReport(report_status, 1.0, None))
        out = {"status": status, "report_at": 10.0, "result_at": 10.0 + late}
        if cancel_sent:
            out["cancel_sent"] = True
        return _result_problems(seq, out)

    assert found(GoalStatus.STATUS_SUCCEEDED, ExecutionStatus.SUCCEEDED) == []
    assert found(GoalStatus.STATUS_ABORTED, ExecutionStatus.FAILED) == []
    assert found(GoalStatus.STATUS_CANCELED, ExecutionStatus.STOPPED, cancel_sent=True) == []
    assert "result succeeded for a report failed" in found(GoalStatus.STATUS_SUCCEEDED,
                                                           ExecutionStatus.FAILED)
    assert "result aborted for a report succeeded" in found(GoalStatus.STATUS_ABORTED,
                                                            ExecutionStatus.SUCCEEDED)
    assert any("not a terminal one" in p for p in found(GoalStatus.STATUS_UNKNOWN,
                                                        ExecutionStatus.FAILED))
    assert any("after the node's report" in p for p in found(
        GoalStatus.STATUS_ABORTED, ExecutionStatus.FAILED, late=28.0))
    assert any("cancel sent: False" in p for p in found(GoalStatus.STATUS_CANCELED,
                                                        ExecutionStatus.CANCELED))
    accepted_cancel = Request("cancel", 0.5, answer=True)
    assert any("the report shows no stop" in p for p in found(
        GoalStatus.STATUS_SUCCEEDED, ExecutionStatus.SUCCEEDED, requests=[accepted_cancel]))
