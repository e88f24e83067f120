"""How the bring-up names what it finds, on plain values: a joint reading outside its limits,
with its reading and limits, and a whole number of turns from inside them said
(hil/analysis.outside_limits: stage 1's positions_in_limits); an arm whose states carry another
arm's readings, seen at a jog (stage 2's jog_isolation)."""

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


def test_a_jog_read_joint_for_joint_in_another_arm_names_the_copy() -> None:
    """Stage 2's jog_isolation (hil/runners/joint_jog._copied): where gravity cannot tell two
    arms apart (arms alike, in alike poses), the jog can: another arm's states that moved
    joint for joint as the jogged arm's carry its readings; a coupling moves others by other
    amounts, and an arm that stood still is not a copy."""
    from mj_manipulator_ros.hil.runners.joint_jog import _copied

    q0 = np.array([0.1, -0.4, 0.7])
    jog = np.array([0.0, 0.1, 0.0])
    before = {"left": (q0, None), "right": (q0.copy(), None), "third": (q0 + 0.2, None)}
    after = {"left": (q0 + jog, None), "right": (q0 + jog, None), "third": (q0 + 0.2, None)}
    text = _copied("left", before, after)
    assert "right's joint states carry left's readings" in text, text
    coupled = dict(after, right=(q0 + 0.6 * jog, None))
    assert _copied("left", before, coupled) == ""
    assert _copied("left", before, dict(after, right=(q0, None))) == ""
    assert _copied("left", before, before) == ""   # no jog: nothing to compare
