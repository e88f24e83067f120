"""Random transitions on the simulated OpenArm pair, in each controller kind (a bounded count;
``bench/transitions.py`` runs thousands): every controlled transition (speed change, stop,
pause, resume once the plan moves) keeps each arm's reference within its velocity and
acceleration limits with no step; no goal is left without a result and no arm freezes.
Cancels, raw preemptions and fresh starts are measured and printed (the controller starts
those from the measured state: that step is joint_trajectory_controller's)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from transitions import CONTROLLED, Rehearsal  # noqa: E402

#: finite differences of a reference sampled every control period: 1e-3 of the limit covers
#: the difference between a spline's acceleration and its second difference over 2 cycles
FD_SLACK = 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("kind, count, seed", [("position", 150, 11), ("torque", 80, 12),
                                               ("mit", 40, 13)])
def test_random_transitions_keep_every_reference_within_its_limits(kind, count, seed) -> None:
    out = Rehearsal(kind, seed).run(count)
    made = {k: out.transitions.get(k, 0) for k in CONTROLLED}
    assert all(n > 0 for n in made.values()), f"a kind of transition never happened: {made}"
    assert out.goals_without_result == 0 and out.freezes == 0, out
    for cls in ("plan",) + CONTROLLED:
        if cls not in out.peaks:
            continue
        v_use, a_use, _step = out.peaks[cls]
        assert v_use <= 1.0 + FD_SLACK and a_use <= 1.0 + FD_SLACK, (
            f"{kind}, seed {seed}: during {cls!r} a reference reached {v_use:.3f} x its velocity "
            f"limit and {a_use:.3f} x its acceleration limit")
    measured = {c: [round(x, 4) for x in p] for c, p in sorted(out.peaks.items())
                if c not in ("plan",) + CONTROLLED}
    print(f"{kind}: {sum(out.transitions.values())} transitions {out.transitions}, "
          f"{out.goals} goals, {out.cycles} cycles in {out.wall_s} s; uncontrolled "
          f"[v/vmax, a/amax, step rad]: {measured}")
