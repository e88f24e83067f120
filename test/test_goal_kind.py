"""The kinds of an arm's running goal (core/goal_kind.py): which ramp to rest, how they read in
messages and records, and that a stop record keeps its kind through a report file."""

from __future__ import annotations

import json

import pytest

from mj_manipulator_ros.core.goal_kind import GoalKind
from mj_manipulator_ros.core.report import StopRecord


def test_only_stop_and_pause_ramp_to_rest() -> None:
    assert {k for k in GoalKind if k.ramps_to_rest} == {GoalKind.STOP, GoalKind.PAUSE}
    assert all(k.words for k in GoalKind if k.ramps_to_rest)
    assert not any(k.words for k in GoalKind if not k.ramps_to_rest)


def test_a_kind_reads_as_its_word() -> None:
    """Messages and records carry the word ("stop"), never the enum's name."""
    assert f"{GoalKind.STOP} goal taken late" == "stop goal taken late"
    assert "%s" % GoalKind.PAUSE == "pause" and str(GoalKind.RESUME) == "resume"
    assert json.dumps({"kind": GoalKind.SPEED}) == '{"kind": "speed"}'


def test_a_stop_record_keeps_its_kind_through_a_file() -> None:
    record = StopRecord(GoalKind.PAUSE, "operator", 1.0, 1.25, 0.5, 0.75, 1.5, 0.6, 0.85,
                        {"left": 0.1}, ("left", "j1", "velocity"), goal_from=0.95)
    back = StopRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert back == record and back.kind is GoalKind.PAUSE


def test_an_unknown_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'hold' is not a valid GoalKind"):
        GoalKind("hold")
