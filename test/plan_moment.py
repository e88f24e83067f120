"""Acting at a moment of a running execution: once its goals are stamped, ``at`` seconds of
the controllers' clock after the stamp (tests and benches that stop, pause or fault an
execution mid-plan)."""

from __future__ import annotations

import threading
import time
from typing import Callable


def at_plan_time(executor, at: float, act: Callable[[], object],
                 timeout: float = 20.0) -> threading.Thread:
    """A started thread that waits (wall clock, at most ``timeout``) for ``executor``'s next
    stamp, then until ``at`` s past it on the executor's clock, then calls ``act`` (not at all
    when no stamp came in time). Join it after the execution."""
    def wait_then_act() -> None:
        deadline = time.monotonic() + timeout
        while executor.current_stamp is None and time.monotonic() < deadline:
            time.sleep(0.002)
        stamp = executor.current_stamp
        if stamp is None:
            return
        while executor.now() < stamp.seconds + at and time.monotonic() < deadline:
            time.sleep(0.002)
        act()
    thread = threading.Thread(target=wait_then_act, name="plan-moment", daemon=True)
    thread.start()
    return thread
