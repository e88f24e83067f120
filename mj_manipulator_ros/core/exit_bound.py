"""A long-running process's shutdown, bounded: past the bound it says where it hung and exits.

Every join and wait of a shutdown has its own timeout, but their sum is not a bound, and a
wait without one in a library (rclpy's shutdown, a DDS participant's teardown, a C extension
holding the GIL) is not seen at all. Seen once (a loaded test run): a simulator whose peer
had been SIGKILLed was still alive 15 s after its SIGINT, printing nothing; the test's
teardown killed it and nobody learned where it hung.

:func:`bound_shutdown` arms the standard library's ``faulthandler`` watchdog: a C thread that
needs no GIL, so it fires even when Python code cannot run. Past the bound it writes every
thread's stack to stderr, then exits the process with status 1 (``faulthandler``'s own
``_exit``: no further cleanup, which is what hung). :func:`shutdown_done` disarms it. One per
process (``faulthandler`` keeps one pending dump): the last armed wins.
"""

from __future__ import annotations

import faulthandler
import sys
from typing import TextIO

#: the process's whole shutdown, s (a simulator's close is ~0.1-2 s idle, a few s loaded)
SHUTDOWN_BOUND_S = 20.0


def bound_shutdown(what: str, bound_s: float | None = None,
                   stream: TextIO | None = None) -> None:
    """From now, ``what`` (the process, for the message) has ``bound_s`` seconds (> 0, wall
    time; default :data:`SHUTDOWN_BOUND_S`) to exit; past them every thread's stack is written
    to ``stream`` (stderr) and the process exits with status 1.

    Raises:
        ValueError: ``bound_s`` is not > 0.
    """
    bound_s = SHUTDOWN_BOUND_S if bound_s is None else bound_s
    if not bound_s > 0:
        raise ValueError(f"{what}: the shutdown bound must be > 0 s, got {bound_s!r}")
    out = stream or sys.stderr
    try:
        out.fileno()            # faulthandler writes to the file descriptor
    except (AttributeError, OSError, ValueError):   # a captured stream (tests): the real one
        out = sys.__stderr__
    out.write(f"{what}: shutting down (bounded: {bound_s:g} s; past it every thread's stack "
              "is printed below a 'Timeout' line and the process exits with status 1)\n")
    out.flush()
    faulthandler.dump_traceback_later(bound_s, repeat=False, file=out, exit=True)


def shutdown_done() -> None:
    """The shutdown finished in time: disarm :func:`bound_shutdown` (harmless when unarmed)."""
    faulthandler.cancel_dump_traceback_later()
