"""A process's shutdown, bounded (``core/exit_bound.py``): past the bound it prints where every
thread stands and exits; in time, nothing happens. Real processes, real hangs."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tiny_arm import sim_then_sigint


def _run(code: str, limit_s: float = 60.0) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=limit_s)
    return out, time.monotonic() - started


def test_a_hung_shutdown_prints_every_threads_stack_and_exits() -> None:
    code = ("import threading\n"
            "from mj_manipulator_ros.core.exit_bound import bound_shutdown\n"
            "def stuck_in_a_worker():\n"
            "    threading.Event().wait()\n"
            "t = threading.Thread(target=stuck_in_a_worker, daemon=False)\n"
            "t.start()\n"
            "bound_shutdown('probe', 0.5)\n"
            "t.join()   # never returns: the shutdown hangs here\n")
    out, took = _run(code)
    assert out.returncode == 1, (out.returncode, out.stderr[-2000:])
    assert "probe: shutting down (bounded: 0.5 s" in out.stderr, out.stderr[-2000:]
    assert "Timeout (0:00:00.5" in out.stderr, out.stderr[-2000:]   # faulthandler's header
    # both threads' stacks: where the shutdown hung and what it waited for
    assert "stuck_in_a_worker" in out.stderr and "join" in out.stderr, out.stderr[-2000:]
    assert took < 30.0, took


def test_a_shutdown_in_time_disarms_the_bound() -> None:
    code = ("import time\n"
            "from mj_manipulator_ros.core.exit_bound import bound_shutdown, shutdown_done\n"
            "bound_shutdown('probe', 0.3)\n"
            "shutdown_done()\n"
            "time.sleep(1.0)   # past the bound: nothing may fire\n"
            "print('LIVED')\n")
    out, _ = _run(code)
    assert out.returncode == 0 and "LIVED" in out.stdout, (out.returncode, out.stderr[-2000:])
    assert "Timeout (" not in out.stderr, out.stderr[-2000:]


def test_a_bound_that_is_not_positive_is_refused() -> None:
    from mj_manipulator_ros.core.exit_bound import bound_shutdown

    with pytest.raises(ValueError, match="probe: the shutdown bound must be > 0 s, got 0"):
        bound_shutdown("probe", 0)


def test_a_simulator_whose_close_hangs_says_where_and_exits(tmp_path) -> None:
    """The real simulator process (run_sim, the tiny pair), stopped by SIGINT once started;
    its close made to hang (the fault injected), the bound set to 2 s."""
    code = sim_then_sigint(tmp_path, prelude=(
        "import threading\n"
        "import mj_manipulator_ros.core.exit_bound as bound\n"
        "bound.SHUTDOWN_BOUND_S = 2.0\n"
        "def close_that_hangs(self):\n"
        "    threading.Event().wait()\n"
        "sim_node.SimNode.close = close_that_hangs\n"))
    out, took = _run(code, limit_s=90.0)
    assert out.returncode == 1, (out.returncode, out.stdout[-1000:], out.stderr[-2000:])
    assert "sim: shutting down (bounded: 2 s" in out.stderr, out.stderr[-2000:]
    assert "close_that_hangs" in out.stderr and "run_sim" in out.stderr, out.stderr[-3000:]
