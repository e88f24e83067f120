"""A joint reading outside its limits is named with its reading and limits; a whole number of
turns from inside them, it is said (hil/analysis.outside_limits: stage 1's
positions_in_limits)."""

from __future__ import annotations

import numpy as np

from mj_manipulator_ros.hil.analysis import limit_excess, outside_limits

NAMES = ("j1", "j2", "j3")
LO, HI = np.array([-1.5, -2.0, 0.0]), np.array([1.5, 2.0, 0.04])


def test_a_reading_a_whole_turn_off_is_named_with_the_turn() -> None:
    """IsaacTeleop#734's figures: a joint at -0.056 rad read as +6.227 after a power cycle."""
    q = np.array([0.3, -0.056 + 2 * np.pi, 0.01])
    text = outside_limits(q, LO, HI, NAMES)
    assert limit_excess(q[None], LO, HI) > 4.0
    assert text.startswith("j2 reads +6.227, outside [-2.000, +2.000]: 1 whole turn above -0.056")
    assert "j1" not in text and "j3" not in text


def test_two_turns_below_and_a_reading_no_turn_explains() -> None:
    q = np.array([0.2 - 4 * np.pi, 2.5, 0.05])
    text = outside_limits(q, LO, HI, NAMES)
    parts = text.split("; ")
    assert len(parts) == 3, text
    assert "j1 reads -12.366" in parts[0] and "2 whole turns below +0.200" in parts[0], text
    assert parts[1] == "j2 reads +2.500, outside [-2.000, +2.000]", text   # 2.5 - 2 pi: outside
    assert parts[2] == "j3 reads +0.050, outside [+0.000, +0.040]", text


def test_inside_says_nothing() -> None:
    assert outside_limits(np.array([1.5, -2.0, 0.0]), LO, HI, NAMES) == ""
