"""The HIL session's joint-state rows (``hil/joint_state_rows.py``) against the buffer they
replaced (``joint_state_reference.py``, the old algorithm kept as the independent reference),
on randomized streams: per-arm and whole messages interleaved, name sets that differ and grow,
stamps out of order, stepping back and tied, efforts and velocities missing; and a recent
window's cost after a long session (issue 40)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from joint_state_reference import ReferenceRows
from mj_manipulator_ros.core.errors import (ConfigError, JointStateHistoryError,
                                            JointStateMessageError)
from mj_manipulator_ros.hil.analysis import JointSamples
from mj_manipulator_ros.hil.joint_state_rows import JointStateRows

LEFT = tuple(f"left_j{k}" for k in range(1, 8))
RIGHT = tuple(f"right_j{k}" for k in range(1, 8))
#: the name sets messages carry: both arms (either order), one arm, a few joints, a name that
#: appears only later in the stream, and no joint at all
LAYOUTS = (LEFT + RIGHT, LEFT, RIGHT, RIGHT + LEFT, ("left_j3", "right_j1"),
           ("gripper", "left_j1"), ())


def stream(seed: int, n: int):
    """``n`` messages (stamp, received, names, positions, velocities, efforts), s: 5 ms apart
    on each arm's clock, each clock off by up to 4 ms with 3 ms jitter (interleaved arms arrive
    out of stamp order), stamps rounded to 1 ms (ties), now and then a clock stepping back up
    to 1 s; velocities missing in a fifth, efforts missing or one short in a fifth each; a NaN
    position now and then; the "gripper" name only in the second half."""
    rng = np.random.default_rng(seed)
    offsets = {layout: rng.uniform(-0.004, 0.004) for layout in LAYOUTS}
    out = []
    for i in range(n):
        names = LAYOUTS[int(rng.choice([0, 1, 2, 3, 4, 6] + ([5] if i > n // 2 else [])))]
        t = 100.0 + i * 0.005 + offsets[names] + rng.normal(0.0, 0.003)
        if rng.random() < 0.01:
            t -= rng.uniform(0.05, 1.0)
        stamp = round(t, 3)
        received = t + rng.uniform(0.001, 0.02)
        q = rng.normal(size=len(names))
        if len(names) and rng.random() < 0.02:
            q[rng.integers(len(names))] = np.nan
        v = () if rng.random() < 0.2 else tuple(rng.normal(size=len(names)))
        r = rng.random()
        e = () if r < 0.2 else tuple(rng.normal(size=max(len(names) - 1, 0))) if r < 0.4 \
            else tuple(rng.normal(size=len(names)))
        out.append((stamp, received, names, tuple(q), v, e))
    return out


def assert_same(got: JointSamples, want: JointSamples, what: str) -> None:
    assert got.names == want.names, what
    for field in ("stamps", "received", "positions", "velocities", "efforts"):
        a, b = getattr(got, field), getattr(want, field)
        assert a.shape == b.shape and a.dtype == b.dtype, (what, field, a.shape, b.shape)
        assert np.array_equal(a, b, equal_nan=True), (what, field)


def windows(rng, msgs) -> list[float]:
    stamps = [m[0] for m in msgs]
    return [-math.inf, min(stamps) - 1.0, max(stamps) + 1.0, stamps[-1],
            float(rng.choice(stamps)), float(rng.uniform(min(stamps), max(stamps))),
            max(stamps) - 0.05]


@pytest.mark.parametrize("seed", range(6))
def test_every_window_is_what_the_old_buffer_gave(seed) -> None:
    """Queried between appends (the rows are built incrementally): every ``since``,
    ``received_since`` and arm's latest pose as the old algorithm over every row."""
    rng = np.random.default_rng(1000 + seed)
    msgs = stream(seed, 1500)
    rows, ref = JointStateRows(capacity=16), ReferenceRows()
    done = 0
    while done < len(msgs):
        for m in msgs[done:done + int(rng.integers(1, 200))]:
            rows.append(*m)
            ref.append(*m)
        done = len(ref.rows)
        fed = msgs[:done]
        for since in windows(rng, fed):
            assert_same(rows.samples(since=since), ref.samples(since=since), f"since {since}")
        received = [m[1] for m in fed]
        for t in (float(rng.choice(received)), float(np.median(received))):
            assert_same(rows.samples(received_since=t), ref.samples(received_since=t),
                        f"received since {t}")
        both = (float(np.median([m[0] for m in fed])), float(np.median(received)))
        assert_same(rows.samples(*both), ref.samples(*both), f"since/received since {both}")
        for joints in (LEFT, RIGHT, LEFT[2:5] + RIGHT[:1], ("gripper",), ("left_j1", "nowhere")):
            got, want = rows.latest(joints), ref.pose(joints)
            assert (got is None) == (want is None), joints
            if want is not None:
                assert np.array_equal(got, want), joints
    assert len(rows) == len(msgs)


def test_stage_1s_window_by_receive_time_reads_as_before() -> None:
    """Stage 1 read every row and kept those received since it began listening; it now asks
    for those rows only. Its joint names are the window's own; each arm's columns (all it
    reads, by name) are the same."""
    msgs = stream(7, 2000)
    rows, ref = JointStateRows(), ReferenceRows()
    for m in msgs:
        rows.append(*m)
        ref.append(*m)
    listening = float(np.quantile([m[1] for m in msgs], 0.8))
    old = ref.samples().received_since(listening)
    new = rows.samples(received_since=listening)
    for joints in (LEFT, RIGHT):
        assert len(new.arm(joints)) > 0
        assert_same(new.arm(joints), old.arm(joints), str(joints))


def test_a_message_not_one_position_per_name_is_refused_and_not_kept() -> None:
    rows = JointStateRows()
    rows.append(1.0, 1.0, LEFT, np.zeros(7))
    with pytest.raises(JointStateMessageError, match="7 name.*6 position"):
        rows.append(1.1, 1.1, LEFT, np.zeros(6))
    with pytest.raises(JointStateMessageError, match="3 velocity"):
        rows.append(1.2, 1.2, LEFT, np.zeros(7), np.zeros(3))
    with pytest.raises(JointStateMessageError, match="0 position"):
        rows.append(1.3, 1.3, LEFT, (), np.zeros(7))
    assert len(rows) == 1 and rows.samples().stamps.tolist() == [1.0]


def test_a_keep_time_not_positive_is_refused_by_its_setting_name() -> None:
    for keep_s in (0.0, -1.0, math.nan):
        with pytest.raises(ConfigError, match="joint_states_keep_s.*positive"):
            JointStateRows(keep_s=keep_s)


def feed_arriving(rows: JointStateRows, ref: ReferenceRows, msgs, arrived0: float) -> float:
    """Append ``msgs`` arriving 10 ms apart on the keep clock from ``arrived0``; the last one's
    arrival."""
    for k, m in enumerate(msgs):
        rows.append(*m, arrived=arrived0 + 0.01 * k)
        ref.append(*m)
    return arrived0 + 0.01 * (len(msgs) - 1)


def in_order(msgs):
    return [(100.0 + 0.01 * k,) + m[1:] for k, m in enumerate(msgs)]


def test_rows_are_kept_keep_s_after_arrival_and_a_window_past_them_is_refused() -> None:
    """keep_s = 1 s: 5 s of messages (10 ms apart); the last second's are all there, as the
    old buffer gave them; a window reaching back past a dropped row is refused by name;
    an arm silent for longer than keep_s has no latest pose."""
    msgs = in_order(stream(3, 500))
    rows, ref = JointStateRows(keep_s=1.0), ReferenceRows()
    feed_arriving(rows, ref, msgs, 0.0)
    assert rows.dropped > 0 and 100 <= len(rows) <= 126
    kept_since = msgs[-100][0]                  # arrived 0.99 s before the last one
    assert_same(rows.samples(since=kept_since), ref.samples(since=kept_since), "kept")
    oldest_kept = msgs[-len(rows)][0]
    assert_same(rows.samples(since=oldest_kept), ref.samples(since=oldest_kept), "all kept")
    for since in (-math.inf, msgs[0][0], msgs[-len(rows) - 1][0]):
        with pytest.raises(JointStateHistoryError, match="joint_states_keep_s"):
            rows.samples(since=since)
    with pytest.raises(JointStateHistoryError):
        rows.samples(received_since=msgs[0][1])
    left_only = (200.0, 200.0, LEFT, tuple(np.arange(7.0)))
    rows.append(*left_only, arrived=10.0)
    rows.append(201.0, 201.0, RIGHT, tuple(np.zeros(7)), arrived=13.0)
    assert rows.latest(RIGHT) is not None and rows.latest(LEFT) is None   # 3 s > 1.25 x 1 s


def test_nothing_is_dropped_while_held_and_the_window_stays_whole() -> None:
    msgs = in_order(stream(4, 600))
    rows, ref = JointStateRows(keep_s=1.0), ReferenceRows()
    with rows.hold():
        end = feed_arriving(rows, ref, msgs[:500], 0.0)
        assert rows.dropped == 0
        assert_same(rows.samples(), ref.samples(), "held")
    feed_arriving(rows, ref, msgs[500:], end + 0.01)
    assert rows.dropped > 0
    assert_same(rows.samples(since=msgs[-50][0]), ref.samples(since=msgs[-50][0]), "after")


def test_a_pose_and_a_recent_window_cost_the_same_after_a_long_session() -> None:
    """A HIL session (no simulator: nothing needs to answer) whose buffer was fed 40,000
    messages of both arms (its subscription callback): an arm's pose, the wait for joint
    states and the last second's window cost about what they cost after 1,000 (regression,
    issue 40: pose() and the wait rebuilt arrays from every message since the session began,
    40x the rows cost 40x)."""
    from sensor_msgs.msg import JointState

    from mj_manipulator_ros.hil.session import HilSession
    from mj_manipulator_ros.model.limits import load_config_with_model
    from mj_manipulator_ros.resources import config_file

    session = HilSession(load_config_with_model(config_file("sim_openarm.yaml")))
    try:
        joints = [j for a in session.config.arms for j in a.joint_names]
        msg = JointState()
        msg.name = joints
        msg.velocity = [0.0] * len(joints)
        msg.effort = [1.0] * len(joints)
        fed = [0]

        def feed(upto: int) -> None:
            for i in range(fed[0], upto):
                msg.header.stamp.sec = 100 + i // 200
                msg.header.stamp.nanosec = (i % 200) * 5_000_000
                msg.position = [i * 1e-4] * len(joints)
                session.joint_states._on_msg(msg)
            fed[0] = upto

        def median_s(call) -> float:
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                call()
                times.append(time.perf_counter() - t0)
            return float(np.median(times))

        def costs() -> dict[str, float]:
            since = 100 + fed[0] / 200 - 1.0
            assert session.pose("left")[0] == pytest.approx((fed[0] - 1) * 1e-4)
            assert len(session.joint_states.samples(since=since)) == 200
            return {"pose": median_s(lambda: session.pose("left")),
                    "wait": median_s(lambda: session.wait_for_joint_states(timeout=1.0)),
                    "window": median_s(lambda: session.joint_states.samples(since=since))}

        feed(1000)
        small = costs()
        feed(40_000)
        large = costs()
        for what in small:
            assert large[what] < 5 * small[what] + 0.005, (what, small, large)
    finally:
        session.close()


def test_the_session_keeps_reading_after_a_message_it_cannot_read(ros) -> None:
    """A /joint_states message without one position per name reaches the session's callback:
    it is counted and logged, not kept, and the messages after it read as before (the old
    buffer kept it, and every later window failed on it)."""
    import rclpy
    from sensor_msgs.msg import JointState

    from mj_manipulator_ros.hil.session import JointStateBuffer

    node = rclpy.create_node("joint_state_rows_rejects", context=ros.context)
    try:
        buffer = JointStateBuffer(node)
        bad, good = JointState(), JointState()
        bad.name, bad.position = list(LEFT), [0.0] * 6
        good.name, good.position = list(LEFT), [0.5] * 7
        good.header.stamp.sec = 3
        buffer._on_msg(bad)
        buffer._on_msg(good)
        s = buffer.samples()
        assert s.stamps.tolist() == [3.0] and s.names == LEFT
        assert s.positions.tolist() == [[0.5] * 7] and s.velocities.tolist() == [[0.0] * 7]
        assert buffer.rejected == 1 and "6 position" in str(buffer.rejection)
    finally:
        node.destroy_node()
