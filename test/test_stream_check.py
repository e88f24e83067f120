"""The stage 1 stream measurements against streams built with a known hole, clock step or
drift, and healthy streams received by a stalling machine (numpy only)."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.hil import stream_check as S

RATE = 100.0


def stream(seconds: float = 4.0, seed: int = 0, stalls: int = 0):
    """A healthy 100 Hz stream: stamps on the controller's clock, receive times 1-3 ms later,
    and ``stalls`` receiver stalls of 50-300 ms (every message due then arrives at the end, in
    order, as DDS delivers to a process that was not scheduled)."""
    rng = np.random.default_rng(seed)
    stamps = np.arange(0.0, seconds, 1.0 / RATE) + 100.0
    received = stamps + rng.uniform(0.001, 0.003, stamps.size)
    for _ in range(stalls):
        t0 = rng.uniform(stamps[10], stamps[-60])
        end = t0 + rng.uniform(0.05, 0.3)
        held = (received >= t0) & (received < end)
        received[held] = end + np.arange(held.sum()) * 1e-5
    return stamps, np.maximum.accumulate(received)   # delivered in order


@pytest.mark.parametrize("seed", range(20))
def test_a_healthy_stream_read_by_a_stalling_receiver_has_no_hole_and_no_step(seed) -> None:
    stamps, received = stream(seed=seed, stalls=6)
    steps = S.clock_steps(stamps, received, threshold=0.01)
    assert steps == []
    hole = S.largest_hole(stamps, received, RATE, steps)
    assert hole.length_s == pytest.approx(0.01) and hole.missing == 0


@pytest.mark.parametrize("missing", [5, 20])
def test_a_hole_is_its_length_and_its_missing_messages(missing) -> None:
    stamps, received = stream(stalls=2, seed=3)
    keep = np.ones(stamps.size, bool)
    keep[150:150 + missing] = False          # lost at the source: neither stamped nor received
    hole = S.largest_hole(stamps[keep], received[keep], RATE,
                          S.clock_steps(stamps[keep], received[keep], 0.01))
    assert hole.missing == missing
    assert hole.length_s == pytest.approx((missing + 1) / RATE)
    assert hole.at == pytest.approx(stamps[149])


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("step", [0.05, -0.05, 0.5, -0.5])
def test_a_clock_step_is_named_as_one_and_is_not_a_hole(step, seed) -> None:
    """Found where it is (the least latency on either side is a message delivered 1-3 ms
    late, or later when the receiver stalled about the step) and measured off the stamps."""
    stamps, received = stream(stalls=6, seed=seed)
    stamped = stamps.copy()
    stamped[200:] += step                    # the controller's clock stepped at message 200
    steps = S.clock_steps(stamped, received, 0.01)
    assert len(steps) == 1
    assert steps[0].step_s == pytest.approx(step, abs=1e-9)    # off the stamps: exact
    assert steps[0].index == 200 and steps[0].at == pytest.approx(stamped[200])
    assert S.largest_hole(stamped, received, RATE, steps).length_s < 0.02


def stalled(received: np.ndarray, t0: float, length: float) -> np.ndarray:
    """``received`` with the receiver stalled from ``t0`` for ``length`` s: every message due
    then arrives at the end, in order."""
    out = received.copy()
    held = (out >= t0) & (out < t0 + length)
    out[held] = t0 + length + np.arange(held.sum()) * 1e-5
    return np.maximum.accumulate(out)


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.1])
@pytest.mark.parametrize("step", [0.05, -0.05])
def test_a_step_is_measured_whole_when_the_receiver_stalls_longer_than_a_side_after_it(
        step, delay) -> None:
    """CI, stop 53: the rehearsal's receiver stalled about 0.5 s just after a -50 ms step;
    measured over 50 messages each side the step read -90 ms, and the 40 ms error taken out
    read as 7 more steps and a 110 ms hole. Steps every 2 s, as that rehearsal injected them;
    stalls of 0.6 s (longer than ``SIDE`` messages) starting ``delay`` s after each."""
    stamps, received = stream(seconds=4.0, seed=7)
    stamped = stamps.copy()
    for k in (100, 300):
        stamped[k:] += step
        received = stalled(received, stamps[k] + delay, 0.6)
    assert ((received - stamps)[100:170] > 0.4).any()         # the stall did happen
    steps = S.clock_steps(stamped, received, 0.01)
    assert sorted(c.index for c in steps) == [100, 300], steps
    assert [c.step_s for c in steps] == pytest.approx([step, step], abs=1e-9)
    assert S.largest_hole(stamped, received, RATE, steps).missing == 0


@pytest.mark.parametrize("slower,lost", [(0.002, 0), (0.002, 3), (0.006, 0)])
@pytest.mark.parametrize("step", [0.05, -0.05, 0.023])
def test_a_step_is_read_exactly_off_the_stamps_whatever_the_receive_clock(
        step, slower, lost) -> None:
    """A fresh-clone run read a -50 ms step as -52.0 ms: the HIL rehearsal's receiver reads
    sim time, a /clock every 4 ms, so a receive time is the last tick (0-4 ms behind), and
    which messages find the tick fresh differs across the step. Here the least delay is 0 ms
    before the step and ``slower`` after it (every message after it handled later), and
    ``lost`` messages are lost in the step's own interval: the stamps still say it exactly.
    6 ms slower: a fresh run beside a busy loop read -60.0 ms when lost messages were taken
    whenever the latency was nearer a whole period more."""
    stamps = np.arange(0.0, 4.0, 1.0 / RATE) + 100.0
    handled = stamps + np.where(np.arange(stamps.size) < 200, 0.0, slower) \
        + np.tile([0.0, 0.001, 0.003], stamps.size)[:stamps.size]
    received = np.floor(np.round(handled / 0.004, 9)) * 0.004   # the last /clock tick
    stamped = stamps.copy()
    stamped[200:] += step
    keep = np.ones(stamps.size, bool)
    keep[200 - lost:200] = False
    steps = S.clock_steps(stamped[keep], received[keep], 0.01)
    assert len(steps) == 1 and steps[0].index == 200 - lost, steps
    assert steps[0].step_s == pytest.approx(step, abs=1e-9), steps
    assert S.largest_hole(stamped[keep], received[keep], RATE, steps).missing == lost


def test_a_step_back_is_read_in_the_order_the_messages_arrived_when_receive_times_tie() -> None:
    """Beside two busy loops the rehearsal's sim-time receiver read one /clock value for the
    messages of a stall about a -50 ms step; its window comes in stamp order, so by receive time
    (ties kept in stamp order) messages from after the step came before older ones, and the
    step read -110, +30, +30 and -50 ms. The receiver's own arrival numbers keep the order."""
    stamps = np.arange(0.0, 4.0, 1.0 / RATE) + 100.0
    received = stamps + 0.002
    stamped = stamps.copy()
    stamped[200:] -= 0.05                           # stepped back at message 200
    received[190:215] = received[214]               # one /clock reading for a stall's messages
    arrival = np.arange(stamps.size)                # numbered as they arrived
    by_stamp = np.argsort(stamped, kind="stable")   # how a window hands them over
    s, r, a = stamped[by_stamp], received[by_stamp], arrival[by_stamp]
    steps = S.clock_steps(s, r, 0.01, arrival=a)
    assert [(c.step_s, c.index) for c in steps] == [(pytest.approx(-0.05, abs=1e-9), 200)], steps
    assert S.largest_hole(s, r, RATE, steps, a).missing == 0
    # without the arrival numbers the ties scramble it (what the rehearsal saw)
    assert [c.step_s for c in S.clock_steps(s, r, 0.01)] != [pytest.approx(-0.05, abs=1e-9)]


def test_steps_that_add_up_are_each_found() -> None:
    stamps, received = stream(seconds=6.0, seed=5)
    stamped = stamps.copy()
    for k in (100, 300, 500):
        stamped[k:] += 0.05
    steps = S.clock_steps(stamped, received, 0.01)
    assert sorted(s.index for s in steps) == [100, 300, 500]
    assert S.largest_hole(stamped, received, RATE, steps).missing == 0
    # without the steps taken out, a forward step reads as a hole: the reason they are
    assert S.largest_hole(stamped, received, RATE).missing == 5


def test_drift_is_the_widest_range_of_one_joint() -> None:
    q = np.zeros((400, 7))
    q[:, 3] = np.linspace(0.0, 0.012, 400)    # creeping down its load
    q[:, 5] = 0.004 * np.sin(np.linspace(0, 20, 400))
    moved, j = S.drift(q)
    assert j == 3 and moved == pytest.approx(0.012)


def test_too_few_messages_measure_nothing() -> None:
    assert np.isnan(S.largest_hole(np.array([1.0]), np.array([1.0]), RATE).length_s)
    assert S.clock_steps(np.arange(4.0), np.arange(4.0), 0.01) == []
    assert np.isnan(S.drift(np.zeros((0, 7)))[0])
