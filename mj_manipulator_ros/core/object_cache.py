"""Values computed once per object and kept while the object lives.

Trajectories and plans are immutable (their arrays read-only): what is computed from one (its
spline coefficients, its spline extremes, its speed bounds, its message's points) cannot go
stale, and is asked for several times per goal (validation, the pre-flight replays, the goal).
"""

from __future__ import annotations

import weakref
from typing import Callable, TypeVar

T = TypeVar("T")


def kept(cache: dict, obj: object, make: Callable[[object], T]) -> T:
    """``make(obj)``, computed the first time and kept in ``cache`` (by ``id(obj)``) until
    ``obj`` is collected (then its entry is removed: a new object with the same id never sees
    it)."""
    key = id(obj)
    value = cache.get(key)
    if value is None:
        value = cache[key] = make(obj)
        weakref.finalize(obj, cache.pop, key, None)
    return value
