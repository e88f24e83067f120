"""CancelScope and StartGate: first failure wins, every waiter wakes, nothing polls."""

from __future__ import annotations

import threading

from mj_manipulator_ros.core.sync import (
    CancelScope, Failure, FailureReason, StartGate, StartStamp)


def test_start_stamp_arithmetic() -> None:
    s = StartStamp.after(10_999_999_999, 0.25)
    assert s.nanoseconds == 11_249_999_999
    assert s.sec_nanosec == (11, 249_999_999)
    assert abs(s.seconds - 11.249999999) < 1e-12


def test_first_failure_wins_and_callbacks_run_once() -> None:
    scope = CancelScope()
    calls = []
    scope.on_cancel(lambda: calls.append("a"))
    assert scope.fail(Failure("left", FailureReason.ABORTED, -4, "x"))
    assert not scope.fail(Failure("right", FailureReason.TIMEOUT))
    scope.on_cancel(lambda: calls.append("late"))  # runs at once: already canceled
    assert scope.failure.arm == "left" and calls == ["a", "late"]


def test_cancel_wakes_every_waiter() -> None:
    scope = CancelScope()
    gate = StartGate(["a", "b"], scope)
    woke = []
    threads = [threading.Thread(target=lambda: woke.append(scope.wait(10.0))),
               threading.Thread(target=lambda: woke.append(gate.wait_open(10.0))),
               threading.Thread(target=lambda: woke.append(gate.wait_all_arrived(10.0)))]
    for t in threads:
        t.start()
    scope.fail(Failure(None, FailureReason.EXTERNAL_ABORT))
    for t in threads:
        t.join(5.0)
    assert not any(t.is_alive() for t in threads)
    assert sorted(map(repr, woke)) == sorted(map(repr, [True, None, False]))


def test_gate_opens_for_all_with_one_stamp() -> None:
    scope = CancelScope()
    gate = StartGate(["a", "b", "c"], scope)
    got = {}

    def arm(name):
        gate.arrive(name)
        got[name] = gate.wait_open(10.0)
    threads = [threading.Thread(target=arm, args=(n,)) for n in "abc"]
    for t in threads:
        t.start()
    assert gate.wait_all_arrived(10.0)
    gate.open(StartStamp(123))
    for t in threads:
        t.join(5.0)
    assert got == {n: StartStamp(123) for n in "abc"}
