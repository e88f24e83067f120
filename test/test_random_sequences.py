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
