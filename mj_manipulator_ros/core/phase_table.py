"""What the tables of states share (``execution_phase`` with its motion, ``arm_phase``,
``goal_kind``): an enum whose members read as their words, and one rule for a move through a
table of legal transitions."""

from __future__ import annotations

import enum
from typing import Mapping, TypeVar

from mj_manipulator_ros.core.errors import IllegalTransitionError


class WordEnum(str, enum.Enum):
    """A str enum whose members read as their values in messages and records ("stop", never
    "GoalKind.STOP"), compare equal to them, and serialize as them."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


P = TypeVar("P", bound=WordEnum)


def move(table: Mapping[tuple[P, P], str], current: P, wanted: P, cause: str,
         subject: str) -> P:
    """``wanted`` when ``table`` has ``current -> wanted``.

    Raises:
        IllegalTransitionError: it does not; the message names ``subject`` (e.g. "motion
            phase"), the move, ``cause``, and what ``current`` allows.
    """
    if (current, wanted) in table:
        return wanted
    allowed = [f"{b.value} ({why})" for (a, b), why in table.items() if a is current]
    raise IllegalTransitionError(
        f"{subject}: no transition from {current.value} to {wanted.value} (asked for: "
        f"{cause}); from {current.value}: {', '.join(allowed) or 'none'}")
