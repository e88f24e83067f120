"""Spin an executor in a background thread that is always joined (bounded)."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from rclpy.executors import Executor, ExternalShutdownException

log = logging.getLogger(__name__)

#: a spin thread that meets this many callback exceptions within one second stops (a callback
#: that fails on every message would otherwise spin the CPU); each is logged with its traceback
MAX_ERRORS_PER_S = 20


class BackgroundSpinner:
    """Run ``executor.spin()`` in a named thread until :meth:`stop`.

    Meant for servers and publishers (test action servers, the simulator node, the execution
    node). Code that *sends* action requests must not use this: it must spin the executor on the
    thread that makes the requests (see ``mj_manipulator_ros.ros.arm_client``, rclpy#1123).

    A callback that raises is logged with its traceback and the thread spins on: rclpy's
    ``spin()`` ends at the first exception, and a thread that ended silently stopped every
    callback of its nodes at once (on sim time their clock too, with no word). :attr:`error`
    keeps the first exception and :attr:`errors` counts them.

    Args:
        executor: the executor to spin; its nodes are already added.
        name: thread name, shown in thread dumps and leak reports.
    """

    def __init__(self, executor: Executor, name: str) -> None:
        self.executor = executor
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._stopping = threading.Event()
        self.error: BaseException | None = None
        self.errors = 0

    def _run(self) -> None:
        recent: list[float] = []
        while not self._stopping.is_set():
            try:
                self.executor.spin()
                return                      # shut down
            except ExternalShutdownException:
                return
            except Exception as exc:  # noqa: BLE001 - logged; the nodes stay served
                if self._stopping.is_set():
                    return
                self.errors += 1
                if self.error is None:
                    self.error = exc
                now = time.monotonic()
                recent = [t for t in recent if now - t < 1.0] + [now]
                log.error("spin thread %r: a callback raised %s: %s (serving on)",
                          self._thread.name, type(exc).__name__, exc, exc_info=exc)
                if len(recent) >= MAX_ERRORS_PER_S:
                    log.error("spin thread %r: %d callback exceptions within 1 s: stopped",
                              self._thread.name, len(recent))
                    return

    def start(self) -> "BackgroundSpinner":
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Shut the executor down and join the thread.

        Raises:
            TimeoutError: the spin thread did not end within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        self._stopping.set()
        self.executor.shutdown(timeout_sec=timeout)
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            raise TimeoutError(f"spin thread {self._thread.name!r} did not stop within {timeout} s")
        _stop_worker_pool(self.executor, deadline)


    def __enter__(self) -> "BackgroundSpinner":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _stop_worker_pool(executor: Executor, deadline: float) -> None:
    """MultiThreadedExecutor.shutdown() stops its worker pool from Kilted's rclpy on; Humble's
    and Jazzy's leave the pool's threads running. Stop and join them (bounded) either way."""
    pool = getattr(executor, "_executor", None)
    if not isinstance(pool, ThreadPoolExecutor):
        return
    pool.shutdown(wait=False, cancel_futures=True)
    for thread in list(getattr(pool, "_threads", ())):
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            raise TimeoutError(f"executor worker {thread.name!r} did not stop in time")
