"""What the replay found at one state: the value the checker (``replay_checker.py``) and the
stop band (``band.py``) pass around."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CheckedState:
    """What one checked state found.

    Attributes:
        clearance: category code -> the smallest distance of its contacts, m (<= the horizon;
            a category absent has none within it).
        hits: (category, geom 1, geom 2, distance m) of every contact under the margin.
        overflow: the contact buffer was full (contacts were dropped: not certifiable).
    """

    clearance: dict = field(default_factory=dict)
    hits: list = field(default_factory=list)
    overflow: bool = False
