"""A bring-up session: the executor, a /joint_states buffer, and (with --sim) the simulator.

With ``sim=True`` the simulated arms run in this process on sim time, faster than real time
(``settings.sim_real_time_factor``), so every stage runs exactly as on hardware but quicker; the
executor and every measurement use the same /clock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator, Mapping, Optional

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState

from mj_manipulator_ros.check.preflight import preflight_for, scene_checker
from mj_manipulator_ros.check.replay_checker import PlanReplayChecker
from mj_manipulator_ros.core.config import ExecutorConfig, limit_or_inf
from mj_manipulator_ros.core.errors import ExecutionRefusedError, JointStateMessageError
from mj_manipulator_ros.core.approach import approach_plan
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.report import ExecutionReport
from mj_manipulator_ros.hil.analysis import JointSamples
from mj_manipulator_ros.hil.joint_state_rows import JointStateRows
from mj_manipulator_ros.ros.context import RosContext
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from mj_manipulator_ros.ros.spinner import BackgroundSpinner


class Interrupted(Exception):
    """Ctrl-C during a stage. ``report`` is the interrupted execution's report (None when no
    execution was running): it says whether every arm's stop was confirmed."""

    def __init__(self, report: Optional[ExecutionReport] = None) -> None:
        super().__init__("interrupted (Ctrl-C)")
        self.report = report


class JointStateBuffer(JointStateRows):
    """The /joint_states messages of a session (``hil/joint_state_rows.py``): each one's stamp,
    receive time on the node's clock and values, kept ``keep_s`` s of wall time after arrival
    (none dropped while a run holds them). A message that cannot be read by name (not one
    position per name) is not kept: counted in :attr:`rejected`, the first in
    :attr:`rejection`, logged."""

    def __init__(self, node, keep_s: float = math.inf,
                 names: Optional[Mapping[str, Mapping[str, str]]] = None) -> None:
        """``names``: per joint-state topic, a joint's name there -> its model name
        (``ExecutorConfig.names_on_topics``; default: ``/joint_states``, names as they come)."""
        super().__init__(keep_s)
        self._node = node
        self.rejected = 0
        self.rejection: Optional[JointStateMessageError] = None
        names = names or {"/joint_states": {}}
        self._subs = [node.create_subscription(
            JointState, topic, functools.partial(self._on_renamed, dict(names[topic])), 200)
            for topic in sorted(names)]

    def _on_renamed(self, model_names: Mapping[str, str], msg: JointState) -> None:
        if any(model_names.get(n, n) != n for n in msg.name):
            msg.name = [model_names.get(n, n) for n in msg.name]
        self._on_msg(msg)

    def _on_msg(self, msg: JointState) -> None:
        received = self._node.get_clock().now().nanoseconds * 1e-9
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        try:
            self.append(stamp, received, msg.name, msg.position, msg.velocity, msg.effort,
                        arrived=time.monotonic())
        except JointStateMessageError as exc:
            self.rejected += 1
            self.rejection = self.rejection or exc
            self._node.get_logger().error(f"{exc} ({self.rejected} so far)",
                                          throttle_duration_sec=5.0)


class HilSession:
    """Args:
        config: the setup under test.
        sim: run the simulated arms in this process (sim time, faster than real time).
        real_time_factor: the simulator's speed with ``sim``.
        joint_states_keep_s: how long a /joint_states message is kept after its arrival, s of
            wall time (every caller asks for a recent window; a run holds its own whole).
    """

    def __init__(self, config: ExecutorConfig, sim: bool = False, real_time_factor: float = 4.0,
                 joint_states_keep_s: float = 60.0, black_box_dir: str | None = None) -> None:
        """``black_box_dir``: where the executor's black box writes (the run's folder), unless
        the configuration names one (``execution.black_box_dir``)."""
        self.ros = RosContext()
        self.sim_node = None
        if sim:
            from mj_manipulator_ros.sim.sim_config import sim_config
            from mj_manipulator_ros.sim.sim_node import SimNode

            sc = sim_config(config)
            sc = dataclasses.replace(sc, sim=dataclasses.replace(
                sc.sim, use_sim_time=True, real_time_factor=real_time_factor))
            self.sim_node = SimNode(sc, context=self.ros.context).start()
            # The start lead is waited on the controllers' clock but covers wall-clock work
            # (sending a goal, its acceptance: 124-155 ms for a 1,401-point goal in this
            # process). Sim time running real_time_factor x faster would leave that work
            # 1/factor of the lead the robot gets: the rehearsal gets the same wall time.
            # (the measured lead's floor with it: unscaled, 0.06 s of sim time was 30 ms of wall
            # time at 2x, and goals were taken late beside a busy loop)
            config = config.with_execution(use_sim_time=True).with_pace(real_time_factor)
        # bring-up measures the cancel path (stages 3 and 6): a failed arm's peers are canceled
        config = config.with_execution(cancel_peers_on_failure=True)
        # every goal gets the full lead (start_lead_s), not the measured one: the bring-up's
        # motions judge the robot, and a goal the machine's load made late judges nothing (its
        # stage fails "not measured"); the measured lead's saving (0.1-0.2 s a goal) is nothing
        # beside a jog's settling (the rehearsed ALOHA's jog at the measured 0.12 s of sim time,
        # a 190 ms stall of the simulator: taken 2 ms late in CI)
        config = config.with_execution(start_lead_floor_s=config.execution.start_lead_s)
        if black_box_dir and not config.execution.black_box_dir:
            config = config.with_execution(black_box_dir=str(black_box_dir))
        self.config = config
        gate = preflight_for(config)
        self.executor = MultiArmExecutor(config, context=self.ros.context, preflight=gate)
        self.node = rclpy.create_node(
            f"mjmr_hil_{uuid.uuid4().hex[:6]}", context=self.ros.context,
            parameter_overrides=[Parameter("use_sim_time", Parameter.Type.BOOL, sim)])
        self.joint_states = JointStateBuffer(self.node, joint_states_keep_s,
                                             config.names_on_topics())
        ex = SingleThreadedExecutor(context=self.ros.context)
        ex.add_node(self.node)
        self._spinner = BackgroundSpinner(ex, "mjmr-hil-listener").start()
        # the gate's checker when there is one (thread-safe: one check at a time on its
        # MjData): the same scene is not built twice
        self._checker: Optional[PlanReplayChecker] = getattr(gate, "checker", None)
        self.interrupted = threading.Event()
        #: (plan, report, samples) of the latest execution, for the records
        self.last_run: Optional[tuple] = None
        self.last_synchronized_run: Optional[tuple] = None  # the latest successful one
        #: where each run is recorded as a bag (set by the runner), the stage running, the bags
        self.bags_dir: Optional[Path] = None
        #: where the operator's pictures go, and how the operator is asked (set by the runner)
        self.pictures_dir: Optional[Path] = None
        #: the run folder (set by the runner): what a stage writes besides its results
        self.records_dir: Optional[Path] = None
        #: per arm, its mean pose and effort (J,) at rest wherever a stage weighed it (the
        #: jogs, the pose set): what its load is fitted from (``runners/load_measure.py``)
        self.rest_samples: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        self.ask = input
        self.say = print
        self.is_tty = False
        self.stage: int = 0
        self.bags: list[tuple[int, Path]] = []
        if self.sim_node is not None:
            self.executor.record_artifacts = self.sim_node.scene.artifacts()

    def note_rest(self, arm: str, q: np.ndarray, effort: Optional[np.ndarray]) -> None:
        """Keep ``arm``'s pose and effort (J,) at rest for its load fit (none without an
        effort, or with one not finite)."""
        if effort is not None and np.all(np.isfinite(effort)) and np.all(np.isfinite(q)):
            self.rest_samples.setdefault(arm, []).append(
                (np.array(q, dtype=float), np.array(effort, dtype=float)))

    @property
    def checker(self) -> PlanReplayChecker:
        """The replay checker on the config's scene (built on first use)."""
        if self._checker is None:
            self._checker = scene_checker(self.config)
        return self._checker

    def interrupt(self) -> None:
        """Ctrl-C: cancel every arm now (any thread); the running stage ends with Interrupted."""
        self.interrupted.set()
        self.executor.abort("interrupted (Ctrl-C)")

    # ---- time ---------------------------------------------------------------------------------
    def now(self) -> float:
        """The controllers' clock, s."""
        return self.executor.now()

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on the controllers' clock (bounded by 10x that in wall time)."""
        end = self.now() + seconds
        deadline = time.monotonic() + max(10 * seconds, 1.0)
        while self.now() < end and time.monotonic() < deadline:
            if self.interrupted.wait(0.002):
                raise Interrupted()

    def wait_for_joint_states(self, timeout: float = 10.0) -> bool:
        """Wait (wall time, s) until a message carrying every joint of each arm came."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self.joint_states.latest(a.joint_names) is not None for a in self.config.arms):
                return True
            time.sleep(0.02)
        return False

    # ---- poses and motions --------------------------------------------------------------------
    def pose(self, arm: str) -> np.ndarray:
        """The latest measured positions of an arm's joints (J,): those of the latest-stamped
        message carrying every one of them."""
        q = self.joint_states.latest(self.config.arm(arm).joint_names)
        if q is None:
            raise ExecutionRefusedError(
                f"no /joint_states for arm {arm!r} within the last "
                f"{self.joint_states.keep_s:g} s (joint_states_keep_s)")
        return q

    def limits(self, arm: str) -> tuple[np.ndarray, np.ndarray]:
        cfg = self.config.arm(arm)
        lo = np.array([limit_or_inf(cfg.joint_limits.get(j), "lower") for j in cfg.joint_names])
        hi = np.array([limit_or_inf(cfg.joint_limits.get(j), "upper") for j in cfg.joint_names])
        return lo, hi

    def move_plan(self, targets: dict[str, np.ndarray], speed_fraction: float = 0.25,
                  min_duration: float = 1.0) -> MultiArmPlan:
        """A rest-to-rest move of each arm from its measured pose to ``targets``, slow enough
        (peak speed <= speed_fraction x the velocity limits), on one time grid."""
        return approach_plan(self.config, {a: self.pose(a) for a in targets}, targets,
                             speed_fraction, min_duration)

    def run(self, plan: MultiArmPlan, settle: float = 0.3) -> tuple[ExecutionReport, JointSamples]:
        """Execute, then keep listening ``settle`` s; return the report and the joint states
        from shortly before the start stamp on."""
        if self.interrupted.is_set():
            raise Interrupted()
        t0 = self.now()
        record = None
        if self.bags_dir is not None:
            record = self.bags_dir / f"stage{self.stage}_{len(self.bags) + 1:02d}"
            self.bags.append((self.stage, record))
        with self.joint_states.hold():   # the run's window stays whole, however long it runs
            report = self.executor.execute(plan, record=record)
            if self.sim_node is not None and self.sim_node.shared.error is not None:
                raise self.sim_node.shared.error   # the simulator stopped: nothing it said holds
            try:
                self.sleep(settle)
            except Interrupted:
                raise Interrupted(report) from None
            samples = self.joint_states.samples(since=t0 - 0.5)
        self.last_run = (plan, report, samples)
        if len(plan.arm_names) > 1 and report.succeeded:
            self.last_synchronized_run = self.last_run
        if self.interrupted.is_set():
            raise Interrupted(report)
        return report, samples

    @contextlib.contextmanager
    def paced(self, real_time_factor: float) -> Iterator[None]:
        """With --sim: the simulator runs at ``real_time_factor`` inside the block, then at its
        earlier pace again; without a simulator, nothing changes. For the runs whose figures
        are latencies: a wall-clock delay (a cancel crossing this process's threads and DDS)
        counts ``real_time_factor`` x in sim time, so a latency is measured as the robot
        would have it only at 1."""
        if self.sim_node is None:
            yield
            return
        shared = self.sim_node.shared
        before = shared.real_time_factor
        shared.set_real_time_factor(real_time_factor)
        try:
            yield
        finally:
            shared.set_real_time_factor(before)

    def set_fault(self, arm: str, **changes) -> None:
        if self.sim_node is None:
            raise ExecutionRefusedError("faults can only be injected into the simulator (--sim)")
        self.sim_node.set_faults(arm, **changes)

    def close(self) -> None:
        self._spinner.stop()
        self.node.destroy_node()
        self.executor.close()
        if self.sim_node is not None:
            self.sim_node.close()
        self.ros.close()
