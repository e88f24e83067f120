"""Checks made before a start stamp is computed, on what the arms report about themselves:

- **start state**: every arm's measured joint positions are within the start tolerance of the
  plan's first waypoint. A joint_trajectory_controller given a future stamp moves from where
  the arm is to the first waypoint within the lead: a motion nobody checked.
- **controller clocks**: every arm controller's clock agrees with this process's within
  ``max_clock_offset_s``: the stamp is computed here and read there.

Both raise (nothing is sent): :class:`StartStateError` (a PlanError) and
:class:`ClockOffsetError`.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.errors import ClockOffsetError, StartStateError
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.tolerances import joint_row
from mj_manipulator_ros.ros.joint_state_monitor import JointStateMonitor, positions

#: how often the clock-offset estimate is retried while samples accumulate, s
POLL_S = 0.02


class StartCheck:
    """Args: the configuration and the joint-state monitor (one per executor)."""

    def __init__(self, config: ExecutorConfig, monitor: JointStateMonitor) -> None:
        self.config = config
        self.monitor = monitor

    def tolerances(self, arm: str) -> np.ndarray:
        """Per joint of the arm, its start tolerance (rad or m; 0 = unchecked)."""
        cfg, s = self.config.arm(arm), self.config.execution
        return joint_row(cfg.start_tolerance, s.start_tolerance_rad, cfg.joint_names)

    def state_enabled(self, arms: Sequence[str]) -> bool:
        return any(np.any(self.tolerances(a) > 0) for a in arms)

    def measured(self, arms: Sequence[str], stop: Callable[[], bool] = lambda: False
                 ) -> dict[str, np.ndarray]:
        """Every arm's measured positions (J,), fresh (within ``joint_state_max_age_s``) and
        finite.

        Raises:
            StartStateError: no joint state within ``server_wait_s``, a stale one, or a
                non-finite position.
        """
        return {arm: self._read(arm, self.config.arm(arm).joint_names, stop) for arm in arms}

    def grippers(self, arms: Sequence[str], stop: Callable[[], bool] = lambda: False
                 ) -> dict[str, float]:
        """Where the arms' gripper joints stand (joint -> rad or m), fresh and finite: the
        pre-flight check stands them there.

        Raises:
            StartStateError: as :meth:`measured`, naming the gripper joint.
        """
        out: dict[str, float] = {}
        for arm in arms:
            joints = self.config.arm(arm).gripper_joints
            if joints:
                out.update(zip(joints, (float(x) for x in self._read(arm, joints, stop))))
        return out

    def _read(self, arm: str, joints: Sequence[str], stop: Callable[[], bool]) -> np.ndarray:
        """The arm's ``joints`` as measured, shape (len(joints),), fresh and finite; where the
        controllers' clock is checked (``max_clock_offset_s`` > 0), stamped after this call
        less that offset: a reading received late (a backlog on a loaded machine; its receipt
        time looks fresh) said where the arm was before, e.g. mid-way through the approach
        that had just succeeded."""
        s = self.config.execution
        cfg = self.config.arm(arm)
        asked = self.monitor.now()
        readings = self.monitor.wait_for(joints, s.server_wait_s, stop)
        if readings is None:
            if stop():
                raise StartStateError("stopped while waiting for joint states", arm=arm)
            missing = [j for j in joints if j not in self.monitor.received(joints)]
            raise StartStateError(
                f"no joint state for every joint of the arm on {cfg.joint_states_topic} "
                f"within {s.server_wait_s} s; expected {list(joints)}, none for {missing}",
                arm=arm, joint=missing[0] if missing else None)
        if s.max_clock_offset_s > 0 and asked > 0:
            since = asked - s.max_clock_offset_s
            fresh = self.monitor.wait_stamped(joints, since, s.joint_state_max_age_s, stop)
            if fresh is None:
                if stop():
                    raise StartStateError("stopped while waiting for joint states", arm=arm)
                late = self.monitor.readings(joints) or readings
                j, r = min(late.items(), key=lambda x: x[1].stamp)
                raise StartStateError(
                    f"no joint state stamped after {since:.3f} s (this check's start less "
                    f"max_clock_offset_s) within joint_state_max_age_s = "
                    f"{s.joint_state_max_age_s} s: the latest is stamped {r.stamp:.3f} s "
                    f"({(since - r.stamp) * 1e3:.1f} ms before); the states read are a backlog "
                    "of old ones, or its controller's clock is behind", arm=arm, joint=j,
                    value=r.stamp)
            readings = fresh
        now = self.monitor.now()
        stale = {j: now - r.received for j, r in readings.items()
                 if now - r.received > s.joint_state_max_age_s}
        if stale:
            j, age = max(stale.items(), key=lambda x: x[1])
            raise StartStateError(
                f"the latest joint state is {age:.3f} s old, more than "
                f"joint_state_max_age_s = {s.joint_state_max_age_s} s", arm=arm, joint=j,
                value=age)
        q = positions(readings, joints)
        bad = np.flatnonzero(~np.isfinite(q))
        if bad.size:  # NaN compares false against every tolerance: refuse it by name
            k = int(bad[0])
            raise StartStateError(
                f"the latest joint state reports position {q[k]} on "
                f"{cfg.joint_states_topic}; expected a finite number", arm=arm,
                joint=joints[k], value=float(q[k]))
        return q

    def check_state(self, plan: MultiArmPlan, stop: Callable[[], bool] = lambda: False,
                    measured: dict | None = None) -> dict[str, np.ndarray]:
        """Refuse a plan whose first waypoint is not where the arms are. Returns the measured
        positions per arm.

        Raises:
            StartStateError: naming arm, joint, measured, planned and tolerance.
        """
        measured = measured or self.measured(plan.arm_names, stop)
        for arm in plan.arm_names:
            tol = self.tolerances(arm)
            planned = plan[arm].positions[0]
            names = list(plan[arm].joint_names)
            cfg = self.config.arm(arm)
            order = [names.index(j) for j in cfg.joint_names]
            diff = np.abs(measured[arm] - planned[order])
            bad = np.flatnonzero((tol > 0) & (diff > tol))
            if bad.size:
                k = int(bad[np.argmax(diff[bad] - tol[bad])])
                raise StartStateError(
                    f"measured {measured[arm][k]:.4f}, the plan starts at {planned[order][k]:.4f} "
                    f"(|difference| {diff[k]:.4f} > start tolerance {tol[k]:g}): the controller "
                    "would move the arm there within the start lead, unchecked; move it there "
                    "first (execute --approach)", arm=arm, joint=cfg.joint_names[k],
                    value=float(measured[arm][k]))
        return measured

    def check_clocks(self, arms: Sequence[str], stop: Callable[[], bool] = lambda: False
                     ) -> dict[str, float]:
        """Every arm controller's clock offset (s); refuses one beyond ``max_clock_offset_s``.

        Raises:
            ClockOffsetError: an offset too large, or no estimate within ``server_wait_s``.
        """
        s = self.config.execution
        if s.max_clock_offset_s <= 0:
            return {}
        offsets = {}
        deadline = time.monotonic() + s.server_wait_s
        for arm in arms:
            joints = self.config.arm(arm).joint_names
            offset = self.monitor.clock_offset(joints)
            while offset is None and time.monotonic() < deadline and not stop():
                time.sleep(POLL_S)
                offset = self.monitor.clock_offset(joints)
            if offset is None:
                raise ClockOffsetError(
                    f"arm {arm!r}: cannot estimate its controller's clock offset within "
                    f"{s.server_wait_s} s from {self.config.arm(arm).joint_states_topic}: "
                    f"{self.monitor.offset_shortfall(joints)}", {arm: None})
            offsets[arm] = offset
        bad = {a: o for a, o in offsets.items() if abs(o) > s.max_clock_offset_s}
        if bad:
            arm, off = max(bad.items(), key=lambda x: abs(x[1]))
            raise ClockOffsetError(
                f"arm {arm!r}: its controller's clock is {abs(off) * 1e3:.1f} ms "
                f"{'ahead of' if off > 0 else 'behind'} this machine's (estimated from its "
                f"joint-state stamps), more than execution.max_clock_offset_s = "
                f"{s.max_clock_offset_s * 1e3:.0f} ms: the shared start stamp would start it that "
                "far off; synchronize the clocks (chrony, PTP)", offsets)
        return offsets
