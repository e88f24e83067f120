"""A long-running process's heap kept out of the garbage collector's way.

CPython's cyclic garbage collector stops the whole process (every thread: the GIL is held)
while it scans a generation; a scan of the oldest generation visits every tracked object the
process holds. Measured on the simulated OpenArm pair (2 cores, two busy loops beside it, the
wave plan executed every ~6 s): the simulator's full collections grew from 42 ms to 193 ms in
three minutes, because each finished goal's 601-point request message (about 3,000 Python
objects) stayed alive for the 15 minutes its result is kept; a pause of that size while a goal
is being taken is a ``late_acceptance`` of a healthy controller (``bench/start_lead_bench.py``).

Two remedies, both applied by every long-running process of this package:

- :func:`freeze_startup`: the objects made while starting (modules, the compiled model's
  wrappers, configuration, ROS entities; about 95,000 in the simulator) live as long as the
  process: moved to the permanent generation, no collection scans them again.
- what outlives a goal holds no message object: ``ros/action_results.release_request``.

A library call that freezes (a bring-up run, the demo) may run inside a process that lives on
(a test worker running hundreds of them): what it froze must be handed back when it returns
(:class:`FrozenHeap`), or every reference cycle it left behind (its simulator, its model, its
joint-state buffers) would never be collected: measured, pytest workers grew to 5-6 GB.
"""

from __future__ import annotations

import gc
from typing import Optional


def freeze_startup() -> int:
    """Collect once, then move every object still alive to the permanent generation: no
    collection scans it again. A frozen object is still freed when its last reference goes;
    only a reference cycle among frozen objects is never collected (so call it where what is
    alive will mostly stay: after start-up, before a bring-up stage). Returns how many objects
    are frozen now."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class FrozenHeap:
    """A scope in which :func:`freeze_startup` may be called any number of times; on leaving,
    the permanent generation is handed back to the collector (``gc.unfreeze``: CPython has one
    permanent generation, so a freeze made before the scope is handed back too; the objects
    are then scanned again, never lost).

    Usage: ``heap = FrozenHeap()``, ``heap.freeze()`` where needed, ``heap.release()`` in the
    ``finally`` of the call that made it.
    """

    def __init__(self) -> None:
        self.frozen: Optional[int] = None   # objects frozen by the last freeze() (None: none)

    def freeze(self) -> int:
        """:func:`freeze_startup`; returns how many objects are frozen now."""
        self.frozen = freeze_startup()
        return self.frozen

    def release(self) -> None:
        """Hand the permanent generation back to the collector, if :meth:`freeze` was called
        (idempotent)."""
        if self.frozen is not None:
            gc.unfreeze()
            self.frozen = None
