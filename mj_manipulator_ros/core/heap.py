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
"""

from __future__ import annotations

import gc


def freeze_startup() -> int:
    """Collect once, then move every object still alive to the permanent generation: no
    collection scans it again. A frozen object is still freed when its last reference goes;
    only a reference cycle among frozen objects is never collected (so call it where what is
    alive will mostly stay: after start-up, before a bring-up stage). Returns how many objects
    are frozen now."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
