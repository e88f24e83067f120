"""Random operator sequences against the whole executor with the simulator in synchronous mode
(``bench/lockstep_sequences.py``; the bench runs 1,000): physics stepped by the test between
the requests, each request at an exact physics time, physics waiting while a goal is in flight.
Each sequence ends with one terminal report, every stop confirmed, no thread left, every
request applied or answered with why not; no paused arm moves; and every controlled transition
(speed change, pause, resume, controlled stop, a failed arm's peers' stop) and the plan between
them keep every joint's position reference within its velocity and acceleration limits."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from lockstep_sequences import ASSERTED, Lockstep  # noqa: E402

#: sequences in the suite (seeds 1..COUNT); the bench runs 1,000
COUNT = 24


@pytest.mark.slow
def test_random_sequences_in_lockstep_keep_every_invariant_and_every_limit(tmp_path) -> None:
    bench = Lockstep(tmp_path)
    try:
        seqs = bench.run(range(1, COUNT + 1))
    finally:
        bench.close()
    bad = {s.seed: s.problems for s in seqs if s.problems}
    assert not bad, bad
    said_yes = {r.action for s in seqs for r in s.requests if r.answer is True}
    assert said_yes >= {"pause", "resume", "stop", "speed", "abort", "fault"}, said_yes
    # not vacuous: the limits were checked on controlled transitions of each kind, and the
    # references came near them (a check that saw nothing move would pass at 0)
    checked = {name: peak for s in seqs for name, peak in s.peaks.items() if name in ASSERTED}
    assert {"plan", "pause", "resume", "speed"} <= set(checked), checked
    # the ramps ride their acceleration limit (the time scaling's bound): a reference 20 %
    # over it would have been seen
    assert max(checked[c][1] for c in ("pause", "speed", "stop", "peer_stop")
               if c in checked) > 0.8, checked
    print({s.seed: (s.report.status.value, s.peaks) for s in seqs})
