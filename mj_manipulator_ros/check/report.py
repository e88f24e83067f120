"""What a replay check found (frozen values, JSON form)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import numpy as np

from mj_manipulator_ros.core.report import not_checked_lines


@dataclass(frozen=True)
class PairHit:
    """One geom pair that came closer than the margin.

    Attributes:
        arms: owning arm of each geom ("environment" for the world).
        bodies, geoms: names.
        max_penetration: deepest interpenetration, m (0 if it only came within the margin).
        min_distance: smallest signed distance, m (negative = penetration).
        first_time: s into the replay.
        count: states (and between-state samples) in which it was found.
    """

    arms: tuple[str, str]
    bodies: tuple[str, str]
    geoms: tuple[str, str]
    max_penetration: float
    min_distance: float
    first_time: float
    count: int

    def to_dict(self) -> dict:
        return {"arms": list(self.arms), "bodies": list(self.bodies), "geoms": list(self.geoms),
                "max_penetration": self.max_penetration, "min_distance": self.min_distance,
                "first_time": self.first_time, "count": self.count}


def not_collidable_lines(groups: Mapping[str, Sequence[str]]) -> list[str]:
    """One line per arm (or the environment) with bodies whose geoms can touch nothing
    (contype/conaffinity): no check can see them (``model/collidable.py``)."""
    return [f"  NOT COLLIDABLE ({group}: contype/conaffinity let no geom touch anything; no "
            f"check sees them): {', '.join(bodies)}" for group, bodies in groups.items()]


@dataclass(frozen=True)
class ReplayReport:
    mode: str
    states_checked: int
    colliding_states: int
    first_collision_time: Optional[float]
    pairs: tuple[PairHit, ...]
    min_clearance: Mapping[str, dict]   # "left-right" -> {distance, time, at_least}
    continuous: bool
    between_state_collisions: int = 0
    uncertified_intervals: int = 0
    extra_states_checked: int = 0
    contact_overflow_states: int = 0   # states whose contact buffer filled: not certifiable
    margin: float = 0.005
    horizon: float = 0.10
    worst_time: Optional[float] = None
    skew: Optional[float] = None            # band mode: the widest |t1 - t2| covered, s
    band_collision: Optional[Mapping] = None  # band mode: {"arms": [a, b], "t1", "t2"} first found
    scope: Optional[Mapping] = None   # what was checked (PlanReplayChecker.scope)
    #: where each arm's gripper joints stood (joint -> rad or m): measured, or the reference
    grippers: Mapping[str, float] = field(default_factory=dict)
    times: np.ndarray = field(default=None, repr=False, compare=False)
    clearance_traces: Mapping[str, np.ndarray] = field(default=None, repr=False, compare=False)

    @property
    def collision_free(self) -> bool:
        return self.colliding_states == 0 and self.between_state_collisions == 0 \
            and self.uncertified_intervals == 0 and self.contact_overflow_states == 0

    def to_dict(self) -> dict:
        return {"mode": self.mode, "states_checked": self.states_checked,
                "colliding_states": self.colliding_states,
                "first_collision_time": self.first_collision_time,
                "pairs": [p.to_dict() for p in self.pairs],
                "min_clearance": dict(self.min_clearance), "continuous": self.continuous,
                "between_state_collisions": self.between_state_collisions,
                "uncertified_intervals": self.uncertified_intervals,
                "extra_states_checked": self.extra_states_checked,
                "contact_overflow_states": self.contact_overflow_states,
                "margin": self.margin, "horizon": self.horizon, "worst_time": self.worst_time,
                "skew": self.skew, "band_collision": self.band_collision, "scope": self.scope,
                "grippers": dict(self.grippers)}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def summary(self) -> str:
        head = (f"{self.mode} replay: {self.colliding_states} of {self.states_checked} states "
                f"colliding (margin {self.margin * 1e3:.0f} mm)")
        if self.continuous:
            head += (f"; between states: {self.between_state_collisions} collisions, "
                     f"{self.uncertified_intervals} uncertified intervals, "
                     f"{self.extra_states_checked} extra states checked")
        if self.skew is not None:
            head += f"; band |t1 - t2| <= {self.skew * 1e3:.0f} ms"
        lines = [head]
        if self.scope is not None:
            allowed = ", ".join(f"{n} {r}" for r, n in self.scope["allowed"].items() if n)
            lines.append(f"  checked: {', '.join(self.scope['checked'])}; not counted: "
                         f"{allowed or 'no pairs'} (allowed-collision matrix)")
            lines.extend(not_checked_lines(self.scope["configured"]))
            lines.extend(not_collidable_lines(self.scope.get("not_collidable", {})))
        if self.grippers:
            lines.append("  gripper joints held at: " + ", ".join(
                f"{j} {v:.4f}" for j, v in self.grippers.items()))
        if self.band_collision is not None:
            b = self.band_collision
            lines.append(f"  {b['arms'][0]} at plan time {b['t1']:.3f} s and {b['arms'][1]} at "
                         f"{b['t2']:.3f} s collide")
        if self.contact_overflow_states:
            lines.append(f"  WARNING: the contact buffer filled up in {self.contact_overflow_states} "
                         "checked states (contacts dropped; raise <size memory>): not certified")
        if self.first_collision_time is not None:
            lines.append(f"  first collision at {self.first_collision_time:.3f} s")
        for p in self.pairs[:5]:
            depth = (f"max penetration {p.max_penetration * 1e3:.1f} mm" if p.max_penetration > 0
                     else f"closest {p.min_distance * 1e3:.1f} mm (inside the margin)")
            lines.append(f"  {p.arms[0]}/{p.bodies[0]} x {p.arms[1]}/{p.bodies[1]}: {depth}, "
                         f"first at {p.first_time:.3f} s")
        for label, c in self.min_clearance.items():
            d = f">= {c['distance'] * 1e3:.0f}" if c["at_least"] else f"{c['distance'] * 1e3:.1f}"
            lines.append(f"  min clearance {label}: {d} mm at {c['time']:.3f} s")
        return "\n".join(lines)
