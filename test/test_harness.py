"""The suite's process harness (``conftest.Processes``): a child that dies in native code is
named, with its Python stacks (seen once: the simulator of a process-safety test died at start-up
with signal 11 under the suite's load, and its test said only that a line never came)."""

from __future__ import annotations

import sys

import pytest


def test_a_child_killed_by_a_signal_is_named_with_its_stacks(processes) -> None:
    proc = processes([sys.executable, "-c",
                      "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    with pytest.raises(AssertionError, match=r"the process ended: killed by signal 11"):
        processes.wait_for_line(proc, "never printed", timeout=10)
    assert any("Fatal Python error: Segmentation fault" in line
               for line in proc.stderr_seen), proc.stderr_seen
