"""A long-running process's shutdown, bounded: past the bound it says where it hung and exits.

Every join and wait of a shutdown has its own timeout, but their sum is not a bound, and a
wait without one in a library (rclpy's shutdown, a DDS participant's teardown, a C extension
holding the GIL) is not seen at all. Seen once (a loaded test run): a simulator whose peer
had been SIGKILLed was still alive 15 s after its SIGINT, printing nothing; the test's
teardown killed it and nobody learned where it hung.

:func:`bound_shutdown` starts a watchdog thread: past the bound it writes every thread's stack
to stderr under a ``Timeout (h:mm:ss)!`` line, holding the GIL (the stacks are read while no
other Python code runs), then exits the process with status 1 (``os._exit``: no further
cleanup, which is what hung). Should the GIL itself never come back (a C extension holding
it), the standard library's ``faulthandler`` watchdog, a C thread that needs no GIL, does the
same :data:`BACKSTOP_S` later. (``faulthandler`` alone reads the other threads' frames without
the GIL while they run: a simulator whose physics thread went on publishing crashed with
SIGSEGV in that dump, once, instead of exiting 1.) :func:`shutdown_done` disarms both. One per
process: the last armed wins.
"""

from __future__ import annotations

import datetime
import faulthandler
import os
import sys
import threading
import traceback
from typing import TextIO

#: the process's whole shutdown, s (a simulator's close is ~0.1-2 s idle, a few s loaded)
SHUTDOWN_BOUND_S = 20.0
#: after the bound, how long the watchdog thread has to get the GIL before faulthandler's own
#: watchdog writes the stacks and exits instead, s
BACKSTOP_S = 5.0

_armed: list[threading.Event] = []   # the pending watchdog's disarm (at most one)


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
    shutdown_done()
    disarmed = threading.Event()
    _armed.append(disarmed)
    threading.Thread(target=_watch, args=(bound_s, disarmed, out), name="mjmr-exit-bound",
                     daemon=True).start()
    faulthandler.dump_traceback_later(bound_s + BACKSTOP_S, repeat=False, file=out, exit=True)


def _watch(bound_s: float, disarmed: threading.Event, out: TextIO) -> None:
    if disarmed.wait(bound_s):
        return
    lines = [f"Timeout ({datetime.timedelta(seconds=bound_s)})!\n"]
    for ident, frame in sys._current_frames().items():   # (the GIL held: a consistent view)
        if ident == threading.get_ident():
            continue
        lines.append(f"\nThread 0x{ident:016x} (most recent call first):\n")
        lines.extend(reversed(traceback.format_stack(frame)))
    try:
        out.write("".join(lines))
        out.flush()
    finally:
        os._exit(1)


def shutdown_done() -> None:
    """The shutdown finished in time: disarm :func:`bound_shutdown` (harmless when unarmed)."""
    while _armed:
        _armed.pop().set()
    faulthandler.cancel_dump_traceback_later()
