"""core/clock_map.py: the controllers' clock mapped onto receipt times through a stream's own
(stamp, receipt) pairs, against the arithmetic of a stream made here with a known delay and
pace."""

import numpy as np
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from mj_manipulator_ros.core.clock_map import ClockMap, header_stamp

NS = 1_000_000_000


def _stream(cmap: ClockMap, pace: float, delay_s, t0_ns: int = 5 * NS, n: int = 200,
            period_s: float = 0.01) -> None:
    """Messages stamped every ``period_s`` of sim time from 10 s on, produced at ``pace`` sim s
    per wall s, received ``delay_s(k)`` after production."""
    for k in range(n):
        stamp = 10.0 + k * period_s
        produced = t0_ns + k * period_s / pace * NS
        cmap.add(stamp, int(produced + delay_s(k) * NS))


def test_a_moment_lands_at_the_receipt_of_the_state_stamped_then_whatever_the_backlog() -> None:
    cmap = ClockMap(60 * NS)
    # 2x pace; a backlog that grows to 170 ms (a loaded machine reading late)
    _stream(cmap, 2.0, lambda k: 0.002 + 0.17 * k / 199)
    to_receipt = cmap.mapper(now_s=10.5, wall_ns=0, rate=2.0)
    for k in (0, 37, 120, 199):
        stamp = 10.0 + k * 0.01
        expected = 5 * NS + k * 0.005 * NS + (0.002 + 0.17 * k / 199) * NS
        assert abs(to_receipt(stamp) - expected) < 1000, (k, to_receipt(stamp) - expected)
    # between two states: between their receipts
    mid = to_receipt(10.505)
    assert to_receipt(10.50) < mid < to_receipt(10.51)


def test_beyond_the_pairs_it_continues_at_the_clocks_rate() -> None:
    cmap = ClockMap(60 * NS)
    _stream(cmap, 2.0, lambda k: 0.05)
    to_receipt = cmap.mapper(now_s=20.0, wall_ns=0, rate=2.0)
    last = 5 * NS + 199 * 0.005 * NS + 0.05 * NS
    # one sim second after the last stamp: half a second of this machine's clock later
    assert abs(to_receipt(10.0 + 1.99 + 1.0) - (last + 0.5 * NS)) < 1000
    first = 5 * NS + 0.05 * NS
    assert abs(to_receipt(9.0) - (first - 0.5 * NS)) < 1000


def test_without_pairs_it_maps_by_now_and_the_rate() -> None:
    to_receipt = ClockMap(NS).mapper(now_s=100.0, wall_ns=50 * NS, rate=2.0)
    assert to_receipt(98.0) == 49 * NS


def test_a_reset_simulator_maps_through_its_latest_timeline_only() -> None:
    cmap = ClockMap(60 * NS)
    for k in range(100):               # first timeline: stamps 50..51 s
        cmap.add(50.0 + k * 0.01, 1 * NS + k * 10_000_000)
    for k in range(100):               # reset: stamps 0..1 s again, received from 3 s on
        cmap.add(k * 0.01, 3 * NS + k * 10_000_000)
    to_receipt = cmap.mapper(now_s=1.0, wall_ns=4 * NS, rate=1.0)
    assert abs(to_receipt(0.5) - (3 * NS + 50 * 10_000_000)) < 1000


def test_pairs_older_than_the_span_are_dropped() -> None:
    cmap = ClockMap(NS)
    for k in range(300):
        cmap.add(k * 0.01, k * 10_000_000)
    assert len(cmap) == 101   # receipts within 1 s of the newest (2.99 s): 1.99 .. 2.99


def test_the_header_stamp_is_read_from_the_bytes_as_rclpy_serializes_them() -> None:
    for sec, nanosec in ((0, 0), (12, 345_678_901), (1_796_605_486, 999_999_999)):
        msg = JointState()
        msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
        msg.name, msg.position = ["a/b", "c"], [0.1, 0.2]
        assert header_stamp(serialize_message(msg)) == sec + nanosec * 1e-9
    assert np.isfinite(header_stamp(serialize_message(JointState())))
