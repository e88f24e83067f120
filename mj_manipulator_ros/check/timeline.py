"""Where every arm is at every checked instant, for each replay mode.

- ``synchronized``: as planned, every arm on one clock.
- ``sequential``: arms one after another in the given order; an arm that has not started holds
  its first pose, one that has finished holds its last (what a layer that runs arms one after
  another does).
- ``skewed``: arm k starts ``skews[k]`` s late (sensitivity to start skew).
- ``recorded``: joint states recorded during an execution (see :func:`load_recording`); between
  samples the motion is taken as linear (the recording cannot say more).

A timeline is a list of times (M,) and, per arm, joint positions (M, J).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from mj_manipulator_ros.core import yaml_load
from mj_manipulator_ros.core.errors import PlanError
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.object_cache import kept
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.spline_peaks import segment_peaks


class ReplayMode(str, enum.Enum):
    SYNCHRONIZED = "synchronized"
    SEQUENTIAL = "sequential"
    SKEWED = "skewed"
    RECORDED = "recorded"
    BAND = "band"            # every pair of arms at plan times within a skew (check/band.py)


#: Resolution (s) of the dense velocity profile behind :meth:`Timeline.speed_bound`.
DENSE_STEP_S = 0.001


@dataclass(frozen=True)
class Timeline:
    """Checked instants and poses; plus the motion between them.

    Attributes:
        times: (M,), s.
        positions: arm -> (M, J).
        pose_at: t (s) -> {arm: (J,)}, the true pose at any time (the plan's splines, as the
            controller interpolates them; a recording is taken as linear between samples).
        speed_bound: (ta, tb) -> {arm: (J,)}, an upper bound of |joint velocity| on [ta, tb].
        speed_bounds: optional, the same over many intervals at once: (ta (K,), tb (K,)) ->
            {arm: (K, J)}, element by element the figures of ``speed_bound``.
    """

    times: np.ndarray
    positions: Mapping[str, np.ndarray]
    pose_at: Optional[Callable[[float], dict]] = None
    speed_bound: Optional[Callable[[float, float], dict]] = None
    speed_bounds: Optional[Callable[[np.ndarray, np.ndarray], dict]] = None

    def __len__(self) -> int:
        return int(self.times.size)

    def with_holds(self, holds: Mapping[str, np.ndarray]) -> "Timeline":
        """This timeline plus arms that hold still at the given poses (J,) throughout."""
        holds = {a: np.asarray(q, dtype=float) for a, q in holds.items()}
        positions = {**self.positions,
                     **{a: np.repeat(q[None], len(self), 0) for a, q in holds.items()}}
        pose_at, speed_bound, speed_bounds = self.pose_at, self.speed_bound, self.speed_bounds
        return Timeline(
            self.times, positions,
            None if pose_at is None else (lambda t: {**pose_at(t), **holds}),
            None if speed_bound is None else (
                lambda ta, tb: {**speed_bound(ta, tb), **{a: np.zeros_like(q) for a, q in holds.items()}}),
            None if speed_bounds is None else (
                lambda ta, tb: {**speed_bounds(ta, tb), **{
                    a: np.zeros((np.size(ta), q.size)) for a, q in holds.items()}}))


class PlanMotion:
    """pose_at / speed_bound of a plan whose arms start at given times.

    The speed bound is rigorous given the sampling: every instant lies within ``step`` of a
    dense sample, so |qdot(t)| <= max |qdot(samples within step)| + step * max |qddot|.
    """

    def __init__(self, plan: MultiArmPlan, starts: Mapping[str, float], end: float) -> None:
        self.plan, self.starts, self.end = plan, dict(starts), end
        self.speed: dict | None = None  # the dense profile, computed on first use

    def _profile(self) -> None:
        plan, end = self.plan, self.end
        self.step = DENSE_STEP_S
        for a in self.starts:
            gaps = np.diff(plan[a].times)
            if gaps.size:
                self.step = min(self.step, float(gaps.min()) / 2)
        self.grid = np.arange(0.0, end + self.step, self.step)
        self.speed, self.accel = {}, {}
        for a, start in self.starts.items():
            _, v, acc = sample(plan[a], self.grid - start)
            self.speed[a] = np.abs(v)
            self.accel[a] = float(np.abs(acc).max()) if acc.size else 0.0

    def pose_at(self, t: float) -> dict:
        return {a: sample(self.plan[a], [t - s])[0][0] for a, s in self.starts.items()}

    def speed_bound(self, ta: float, tb: float) -> dict:
        if self.speed is None:
            self._profile()
        lo = max(int(np.floor(ta / self.step)) - 1, 0)
        hi = min(int(np.ceil(tb / self.step)) + 2, self.grid.size)
        return {a: self.speed[a][lo:hi].max(axis=0) + self.step * self.accel[a]
                for a in self.starts}

    def speed_bounds(self, ta: np.ndarray, tb: np.ndarray) -> dict:
        """:meth:`speed_bound` over many intervals at once: ``ta``, ``tb`` (K,) s -> arm ->
        (K, J) rad/s, the same figures element by element (one ``maximum.reduceat`` over the
        dense profile per arm instead of K slices)."""
        if self.speed is None:
            self._profile()
        ta, tb = np.asarray(ta, dtype=float), np.asarray(tb, dtype=float)
        hi = np.minimum(np.ceil(tb / self.step).astype(np.int64) + 2, self.grid.size)
        lo = np.minimum(np.maximum(np.floor(ta / self.step).astype(np.int64) - 1, 0), hi - 1)
        cuts = np.empty(2 * lo.size, dtype=np.int64)
        cuts[0::2], cuts[1::2] = lo, hi   # every other reduction is [lo_k, hi_k)
        out = {}
        for a in self.starts:
            speed = self.speed[a]
            padded = np.vstack([speed, np.full((1, speed.shape[1]), -np.inf)])  # hi may be G
            out[a] = (np.maximum.reduceat(padded, cuts, axis=0)[0::2]
                      + self.step * self.accel[a]) if lo.size else np.zeros((0, speed.shape[1]))
        return out


class SegmentMotion(PlanMotion):
    """pose_at / speed_bound of a plan with every arm on one clock from 0, the speed bound from
    each segment's exact largest |velocity| (``core/spline_peaks.py``: the spline's extremes
    at its ends and at the real roots of its acceleration, as validation checks the limits
    with), scaled by 1 + 1e-9: on [ta, tb], the largest over the segments it touches. No
    dense sampling (a 14 s plan: 14,000 samples per arm)."""

    #: relative slack on the exact extremes (their rounding)
    SLACK = 1e-9

    def __init__(self, plan: MultiArmPlan) -> None:
        super().__init__(plan, {a: 0.0 for a in plan.arm_names}, plan.duration)
        self.peaks = {a: segment_peaks(plan[a]).velocity * (1.0 + self.SLACK)
                      for a in plan.arm_names}

    def speed_bound(self, ta: float, tb: float) -> dict:
        return {a: v[0] for a, v in self.speed_bounds(np.array([ta], dtype=float),
                                                      np.array([tb], dtype=float)).items()}

    def speed_bounds(self, ta: np.ndarray, tb: np.ndarray) -> dict:
        ta, tb = np.asarray(ta, dtype=float), np.asarray(tb, dtype=float)
        out = {}
        for a, peaks in self.peaks.items():
            times = self.plan[a].times
            if peaks.shape[0] == 0:   # one waypoint: it stands still
                out[a] = np.zeros((ta.size, self.plan[a].positions.shape[1]))
                continue
            last = peaks.shape[0] - 1
            lo = np.clip(np.searchsorted(times, ta, side="right") - 1, 0, last)
            hi = np.clip(np.searchsorted(times, tb, side="left") - 1, lo, last)
            cuts = np.empty(2 * lo.size, dtype=np.int64)
            cuts[0::2], cuts[1::2] = lo, hi + 1   # every other reduction is [lo_k, hi_k]
            padded = np.vstack([peaks, np.full((1, peaks.shape[1]), -np.inf)])
            out[a] = np.maximum.reduceat(padded, cuts, axis=0)[0::2] if lo.size \
                else np.zeros((0, peaks.shape[1]))
        return out


def synchronized_motion(plan: MultiArmPlan) -> SegmentMotion:
    """The :class:`SegmentMotion` of ``plan``, made once per plan and kept while it lives (its
    arrays are read-only): the synchronized replay and the band replay of one plan share it."""
    return kept(_motions, plan, SegmentMotion)


#: id of a plan -> its SegmentMotion, while the plan lives
_motions: dict[int, SegmentMotion] = {}


def _grid(plan: MultiArmPlan, dt: Optional[float], duration: float) -> np.ndarray:
    if dt is None:  # the plan's own grid (validated plans share it)
        return np.asarray(next(iter(plan.arms.values())).times, dtype=float)
    if not (np.isfinite(dt) and dt > 0):
        raise PlanError(f"dt must be a positive number of seconds, got {dt!r}")
    grid = np.arange(0.0, duration + dt * 1e-6, dt)
    return grid if duration - grid[-1] <= 1e-9 else np.append(grid, duration)


def build_timeline(plan: MultiArmPlan, mode: ReplayMode | str, dt: Optional[float] = None,
                   skews: Optional[Mapping[str, float]] = None,
                   order: Optional[Sequence[str]] = None) -> Timeline:
    """The checked instants and poses of a plan in one of the plan-based modes.

    Args:
        dt: check on a uniform grid of this step (s); None = the plan's own grid (and, in
            sequential/skewed mode, each arm's grid shifted by its start).
        skews: arm -> start delay (s), for ``skewed``; missing arms start on time.
        order: arm order for ``sequential``; default: the plan's order.
    """
    mode = ReplayMode(mode)
    arms = list(order or plan.arm_names)
    if mode is ReplayMode.RECORDED:
        raise PlanError("recorded replay takes a recording: use timeline_from_recording()")
    if mode is ReplayMode.BAND:
        raise PlanError("the band replay is not a timeline: use PlanReplayChecker.check(mode='band')")
    if mode is ReplayMode.SYNCHRONIZED:
        starts = {a: 0.0 for a in arms}
    elif mode is ReplayMode.SEQUENTIAL:
        starts, t = {}, 0.0
        for a in arms:
            starts[a] = t
            t += plan[a].duration
    else:
        skews = dict(skews or {})
        unknown = sorted(set(skews) - set(arms))
        if unknown:
            raise PlanError(f"skews name unknown arm(s) {unknown}; the plan has {arms}")
        bad = {a: s for a, s in skews.items() if not (np.isfinite(s) and s >= 0)}
        if bad:
            raise PlanError(f"skews must be finite and >= 0 s, got {bad}")
        starts = {a: float(skews.get(a, 0.0)) for a in arms}
    end = max(starts[a] + plan[a].duration for a in arms)
    if dt is None and mode is not ReplayMode.SYNCHRONIZED:
        times = np.unique(np.concatenate([plan[a].times + starts[a] for a in arms]))
    else:
        times = _grid(plan, dt, end)
    positions = {a: sample(plan[a], times - starts[a])[0] for a in arms}
    motion = synchronized_motion(plan) if mode is ReplayMode.SYNCHRONIZED \
        and set(arms) == set(plan.arm_names) else PlanMotion(plan, starts, end)
    return Timeline(times, positions, motion.pose_at, motion.speed_bound, motion.speed_bounds)


def timeline_from_recording(recording: "Recording", arm_joints: Mapping[str, Sequence[str]],
                            every: int = 1) -> Timeline:
    """Poses of each arm at each recorded sample (joints matched by name)."""
    idx = {}
    for arm, joints in arm_joints.items():
        missing = [j for j in joints if j not in recording.names]
        if missing:
            raise PlanError(f"the recording has no joint(s) {missing} of arm {arm!r}; it has "
                            f"{list(recording.names)}")
        idx[arm] = [recording.names.index(j) for j in joints]
    sel = slice(None, None, max(1, every))
    times = recording.times[sel] - recording.times[0]
    positions = {a: recording.positions[sel][:, i] for a, i in idx.items()}

    def pose_at(t: float) -> dict:  # linear between samples (the recording's assumption)
        return {a: np.array([np.interp(t, times, q[:, j]) for j in range(q.shape[1])])
                for a, q in positions.items()}

    def speed_bound(ta: float, tb: float) -> dict:
        k0 = max(int(np.searchsorted(times, ta, side="right")) - 1, 0)
        k1 = min(int(np.searchsorted(times, tb, side="left")), times.size - 1)
        out = {}
        for a, q in positions.items():
            seg = slice(k0, max(k1, k0 + 1) + 1)
            dq = np.abs(np.diff(q[seg], axis=0))
            dt = np.diff(times[seg])[:, None]
            out[a] = (dq / np.maximum(dt, 1e-12)).max(axis=0) if dq.size else np.zeros(q.shape[1])
        return out
    return Timeline(times, positions, pose_at, speed_bound)


@dataclass(frozen=True)
class Recording:
    """Joint states recorded during an execution: times (M,) s; positions (M, n) by names (n,)."""

    times: np.ndarray
    names: tuple[str, ...]
    positions: np.ndarray


def load_recording(path: str | Path) -> Recording:
    """Read the joint states of a recording: a rosbag2 directory or an MCAP file (every
    ``sensor_msgs/msg/JointState`` topic, by header stamp), or JSON lines (older records), one
    ``/joint_states`` message each::

        {"t": 1795999924.25, "name": ["j1", "j2"], "position": [0.1, 0.2]}

    Messages may name joints in any order and subsets (several publishers); each one's values are
    merged into the latest pose, so every row holds every joint seen so far. Rows before every
    joint has been seen once are dropped.

    Raises:
        PlanError: unreadable, malformed or empty.
    """
    path = Path(path)
    messages = _bag_joint_states(path) if path.is_dir() or path.suffix == ".mcap" \
        else _json_joint_states(path)
    names: list[str] = []
    latest: dict[str, float] = {}
    rows, times = [], []
    for where, t, joint_names, pos in messages:
        if len(joint_names) != len(pos):
            raise PlanError(f"{where}: {len(joint_names)} names but {len(pos)} positions")
        for j, x in zip(joint_names, pos):
            if j not in latest:
                names.append(j)
            latest[j] = float(x)
        rows.append(dict(latest))
        times.append(t)
    if not rows:
        raise PlanError(f"{path}: the recording has no joint states")
    complete = [k for k, r in enumerate(rows) if len(r) == len(names)]
    positions = np.array([[rows[k][j] for j in names] for k in complete])
    order = np.argsort(np.asarray(times)[complete], kind="stable")
    return Recording(np.asarray(times)[complete][order], tuple(names), positions[order])


def _json_joint_states(path: Path):
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
            yield f"{path}:{n}", float(msg["t"]), msg["name"], msg["position"]
        except (ValueError, KeyError, TypeError) as exc:
            raise PlanError(f"{path}:{n}: expected {{t, name, position}}: {exc}") from None


def _bag_joint_states(path: Path):
    """(where, header stamp s, names, positions) of every JointState message in a rosbag2
    directory (its MCAP files, as metadata.yaml lists them) or one MCAP file."""
    from mcap.exceptions import McapError
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    if path.is_dir():
        meta = path / "metadata.yaml"
        if not meta.is_file():
            raise PlanError(f"{path}: not a rosbag2 directory (no metadata.yaml)")
        info = yaml_load.safe_load(meta.read_text())["rosbag2_bagfile_information"]
        if info.get("storage_identifier") != "mcap":
            raise PlanError(f"{path}: storage {info.get('storage_identifier')!r}; only MCAP bags "
                            "are read (ros2 bag convert can make one)")
        files = [path / f for f in info["relative_file_paths"]]
    else:
        files = [path]
    for file in files:
        try:
            with file.open("rb") as fh:
                reader = make_reader(fh, decoder_factories=[DecoderFactory()])
                summary = reader.get_summary()
                topics = [c.topic for c in summary.channels.values()
                          if summary.schemas[c.schema_id].name == "sensor_msgs/msg/JointState"]
                if not topics:
                    continue
                for _, channel, _, msg in reader.iter_decoded_messages(topics=topics):
                    stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
                    yield f"{file} ({channel.topic})", stamp, list(msg.name), list(msg.position)
        except (OSError, ValueError, McapError) as exc:
            raise PlanError(f"{file}: cannot read the MCAP file: {exc}") from None
