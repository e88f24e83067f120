"""The simulator node: MuJoCo arms behind FollowJointTrajectory action servers.

Per arm, an action server at the arm's configured action (default
``/<arm>_arm_controller/follow_joint_trajectory``) with joint_trajectory_controller semantics
(``sim/arm_server.py``: checks in ``sim/goal.py``, execution by the arm's controller in
``sim/controllers``). Also:

- each arm's joint states (sensor_msgs/JointState; positions, velocities, efforts) on its
  ``joint_states_topic`` (default ``/joint_states``: one message for the arms sharing a topic)
  under the names its driver uses (``driver_joint_names``, default the model's), at
  ``sim.joint_state_rate_hz`` of simulated time, always, also while moving; goals and feedback
  use those names too;
- with ``use_sim_time``: ``/clock`` from the physics time every control cycle, and goal stamps
  are read on that clock; otherwise the simulator's clock is physics time mapped to ROS time
  (``sim/sim_clock.py``: a stall freezes references and stamps with physics) and physics is
  paced at ``real_time_factor``; past ``sim.max_lag_s`` behind real time, active goals abort
  naming the simulator; idle with the arms standing, a deficit is dropped at once (the stamps
  stay on real time however slow the machine);
- ``/diagnostics`` (diagnostic_msgs/DiagnosticArray) once a second: achieved real-time factor,
  lag, worst stall, cycles behind, the lag warning threshold (``sim/lag_warning.py``), and each
  arm's controller state;
- faults per arm (``sim.faults.<arm>`` in the config, or :meth:`SimNode.set_faults`):

  =====================  ==================================================================
  ``reject_next_goal``   the next goal is rejected (once)
  ``abort_after_s``      each goal aborts this long after its start (-4, "injected fault")
  ``stall``              goals are accepted and never finish (the arm holds); cancel works
  ``accept_delay_s``     the goal callback waits this long before accepting
  ``pickup_delay_s``     an accepted goal starts executing this long later
  ``cancel_delay_s``     the cancel callback answers this long after a cancel request
  ``command_latency_s``  commands reach the actuators this late (MuJoCo's actuator delay)
  ``ignore_cancel``      cancels are refused and the arm keeps moving
  ``clock_offset_s``     this arm's controller clock runs this far ahead (stamps, goal reading)
  ``clock_step_s``       the clock steps by this at ``clock_step_at_s`` and stays stepped
  ``joint_state_gap_s``  the arm's joint states stop this long from ``joint_state_gap_at_s``
  ``joint_state_drop``   this many consecutive joint-state messages lost from
                         ``joint_state_drop_at_s`` (``*_at_s``: physics time since start;
                         each of the three repeats every ``*_every_s`` when set)
  ``exit_after_s``       the simulator process exits (os._exit) this long after a goal starts
  ``swap_joints``        two joints swapped, commands and states (configuration only)
  ``sign_flip``          joints reversed, commands and states (configuration only)
  ``zero_offset``        joint -> rad added to its reported position (configuration only)
  ``scale``              joint -> k: moves k times its command (configuration only)
  ``force_limit``        joint -> N m its actuators apply at most (configuration only)
  ``activation_command`` joint -> rad its controller holds when activated, not the
                         measured position (``sim.arms.<arm>.start_active: false``: activated
                         by ``<controller node>/activate``)
  =====================  ==================================================================

  and ``sim.faults.crossed_arms: [A, B]``: each arm's controller drives the other arm.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from typing import Optional

import numpy as np
import rclpy
from rclpy.executors import MultiThreadedExecutor
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.ros.context import RosContext
from mj_manipulator_ros.ros.conversion import stamp_msg
from mj_manipulator_ros.ros.spinner import BackgroundSpinner
from mj_manipulator_ros.sim.arm_server import SimArmServer
from mj_manipulator_ros.sim.lag_warning import warn_lag_s
from mj_manipulator_ros.sim.refused_messages import RefusedMessages
from mj_manipulator_ros.sim.shared_model import SharedModel, Snapshot
from mj_manipulator_ros.sim.sim_clock import SimClock

#: how often each controller node's clock is set to its controller clock between goals, Hz of
#: physics time (at each goal's answer it is set exactly)
CONTROLLER_CLOCK_HZ = 50.0
#: how often the simulator's health goes out on /diagnostics, s (system clock)
DIAGNOSTICS_PERIOD_S = 1.0
from mj_manipulator_ros.sim.miswiring import WIRING_FAULTS

#: ArmFaults fields applied when the simulator starts (set_faults refuses them)
STARTUP_FAULTS = (*WIRING_FAULTS, "force_limit", "command_latency_s", "link_mass_scale",
                  "payload_kg", "payload_offset_m")
from mj_manipulator_ros.sim.sim_config import SimConfig


class SimNode:
    """The whole simulator: scene, physics thread, one action server per arm, publishers.

    Args:
        config: the simulator configuration.
        context: an initialised rclpy context, or None to own one.
    """

    def __init__(self, config: SimConfig, context=None, node_name: str = "mj_manipulator_sim",
                 serve: list[str] | None = None, record: str | None = None) -> None:
        """serve: the arms to serve (action servers, joint states); default every arm. The
        others are ghosts here: they hold their start pose and collide with nothing (they are
        another process's, one process per arm: serve=[arm])."""
        self.config = config
        unknown = sorted(set(serve or []) - set(config.executor.arm_names))
        if unknown:
            raise ConfigError(f"cannot serve unknown arm(s) {unknown}; arms: "
                              f"{list(config.executor.arm_names)}")
        self._owned = None
        if context is None:
            self._owned = RosContext()
            context = self._owned.context
        self.scene = config.build_scene()
        if serve is not None:
            self._ghost(set(self.scene.arms) - set(serve))
        use_sim = config.sim.use_sim_time
        if not use_sim and not config.sim.real_time_factor > 0:
            raise ConfigError("sim.real_time_factor 0 (as fast as possible) needs "
                              "sim.use_sim_time: true: on the system clock the simulator's clock "
                              "is physics time mapped to real time")
        self.shared = SharedModel(self.scene, config.sim,
                                  clock=SimClock(config.sim.real_time_factor, use_sim),
                                  warn_lag=warn_lag_s(config.sim, config.executor.execution))
        self.node = rclpy.create_node(f"{node_name}", context=context)
        self.arms = {a.name: SimArmServer(self.node, a, self.shared, config)
                     for a in config.executor.arms if serve is None or a.name in serve}
        #: each served arm's joint-state topic (``arms[].joint_states_topic``) and its joints'
        #: names there (the driver's: ``arms[].driver_joint_names``), in the arm's order
        self._arm_topic = {a.name: config.sim.arm(a.name).joint_states_topic
                           or a.joint_states_topic for a in config.executor.arms}
        self._wire = {a.name: [*a.wire_names, *a.gripper_wire_names]   # its gripper's after
                      for a in config.executor.arms}
        self._joint_pubs = {t: self.node.create_publisher(JointState, t, 10)
                            for t in sorted({self._arm_topic[n] for n in self.arms})}
        self._clock_pub = self.node.create_publisher(Clock, "/clock", 10) if use_sim else None
        self._served = [n for n in self.scene.arms if n in self.arms]
        #: arm -> the arm whose readings its joint states carry (itself, unless the fault
        #: ``joint_states_copied_from`` says another)
        self._reading_of = {n: (config.sim.faults[n].joint_states_copied_from
                                if n in config.sim.faults else "") or n for n in self.scene.arms}
        #: arm -> (the drop fault's occurrence, its messages lost so far)
        self._dropped: dict[str, tuple[int, int]] = {}
        logger = self.node.get_logger()

        def on_event(level: str, text: str) -> None:
            # rclpy ties a logger call site (file and line) to one severity and raises
            # ValueError on another: one line per level (a warning then an error from one line
            # stopped the physics thread)
            if level == "error":
                logger.error(text)
            elif level == "warn":
                logger.warning(text)
            else:
                logger.info(text)
        self.shared.on_event = on_event
        #: what the middleware refused to publish: dropped and counted, physics goes on
        self.refused = RefusedMessages(on_event)
        self._diagnostics = self.node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._diag_timer = self.node.create_timer(DIAGNOSTICS_PERIOD_S, self._publish_diagnostics)
        if self._clock_pub is not None:   # first: a cycle's joint states are never ahead of it
            self.shared.add_observer(config.sim.clock_rate_hz, self._publish_clock)
        self.shared.add_observer(config.sim.joint_state_rate_hz, self._publish_joint_states)
        self._executor = MultiThreadedExecutor(num_threads=2 + 2 * len(self.arms), context=context)
        self._executor.add_node(self.node)
        for server in self.arms.values():   # each controller's node: its action server
            self._executor.add_node(server.controller_node)
        # the controllers' node clocks follow physics (their kept results expire on them)
        self.shared.add_observer(CONTROLLER_CLOCK_HZ, self._set_controller_clocks)
        self._spinner: Optional[BackgroundSpinner] = None
        self.recorder = None
        if record:
            self.recorder = self._bag(record, context)

    def _ghost(self, arms: set) -> None:
        """Arms this process does not serve are another process's (another host's): here they
        only hold their start pose, which is not where they are. They must not collide with
        the served arm: their geoms lose their contacts (they stay visible)."""
        model = self.scene.model
        bodies = set().union(*(self.scene.arms[a].body_ids for a in arms)) if arms else set()
        ghost = np.isin(model.geom_bodyid, list(bodies))
        model.geom_contype[ghost] = 0
        model.geom_conaffinity[ghost] = 0

    def _bag(self, path: str, context):
        """The simulator's run as a bag: joint states, /clock, the served arms' action feedback
        and status; the configuration, the composed scene and its physics step inside."""
        from mj_manipulator_ros.ros.bag_recorder import BagRecorder, arm_topics
        from mj_manipulator_ros.ros.execution_recording import config_text

        topics = [(t, JointState) for t in self._joint_pubs]
        if self.config.sim.use_sim_time:
            topics.append(("/clock", Clock))
        for arm in self.arms.values():
            topics += arm_topics(arm.arm.action_name)
        return BagRecorder(path, context, topics, artifacts={
            "config": config_text(self.config.executor), **self.scene.artifacts()})

    def _publish_joint_states(self, snap: Snapshot) -> None:
        """One message per controller clock: every served arm in one message, unless a clock
        fault (``clock_offset_s``, ``clock_step_s``) gives an arm a clock of its own (stamped on
        it). An arm inside its ``joint_state_gap_s`` or with ``joint_state_drop`` messages
        still to lose is left out."""
        groups: dict[tuple[str, float], list[str]] = {}
        for n in self._served:
            faults = self.shared.controllers[n].faults
            if faults.joint_state_withheld(snap.sim_time) or self._dropping(n, faults, snap):
                continue
            key = (self._arm_topic[n], faults.clock_offset_at(snap.sim_time))
            groups.setdefault(key, []).append(n)
        for (topic, offset), names in groups.items():
            msg = JointState()
            msg.header.stamp = stamp_msg(snap.controller_time + offset)
            msg.name = [j for n in names for j in self._wire[n]]
            rows = [snap.arms[self._reading_of[n]].with_gripper() for n in names]
            msg.position = [float(x) for r in rows for x in r[0]]
            msg.velocity = [float(x) for r in rows for x in r[1]]
            msg.effort = [float(x) for r in rows for x in r[2]]
            self.refused.publish(self._joint_pubs[topic], msg, topic)

    def _dropping(self, arm: str, faults, snap: Snapshot) -> bool:
        """Is this arm's message of this cycle one of the ``joint_state_drop`` lost ones?"""
        occurrence = faults.joint_state_drop_occurrence(snap.sim_time)
        if occurrence == 0:
            return False
        seen, dropped = self._dropped.get(arm, (0, 0))
        if seen != occurrence:
            seen, dropped = occurrence, 0
        if dropped >= faults.joint_state_drop:
            return False
        self._dropped[arm] = (seen, dropped + 1)
        return True

    def _publish_diagnostics(self) -> None:
        """The simulator's health on /diagnostics (once a second, on the system clock: it goes
        on while physics stalls), as ros2_control's controller manager publishes its own."""
        h = self.shared.health()
        s = self.config.sim
        period = self.shared.control_period
        level = DiagnosticStatus.OK
        message = "keeping time"
        active = any(self.shared.controllers[n].active is not None for n in self._served)
        if not s.use_sim_time and h.lag_s > period:   # (on sim time physics is the clock)
            # as the log: a lag that can trip no check is a figure, not a warning
            message = f"behind real time by {h.lag_s * 1e3:.0f} ms"
            if active and h.warn_lag_s is not None and h.lag_s > h.warn_lag_s:
                level = DiagnosticStatus.WARN
            if s.max_lag_s > 0 and h.lag_s > s.max_lag_s:
                level = DiagnosticStatus.ERROR
        status = DiagnosticStatus(level=level, name=f"{self.node.get_name()}: physics",
                                  hardware_id="mj_manipulator_sim", message=message, values=[
            KeyValue(key="achieved real-time factor", value=f"{h.real_time_factor:.3f}"),
            KeyValue(key="target real-time factor", value=f"{self.shared.real_time_factor:g}"),
            KeyValue(key="lag (ms)", value=f"{h.lag_s * 1e3:.1f}"),
            KeyValue(key="worst lag (ms)", value=f"{h.worst_lag_s * 1e3:.1f}"),
            KeyValue(key="worst lag with a goal active (ms)",
                     value=f"{h.worst_active_lag_s * 1e3:.1f}"),
            KeyValue(key="worst stall (ms)", value=f"{h.worst_stall_s * 1e3:.1f}"),
            KeyValue(key="cycles more than a control period behind", value=str(h.late_cycles)),
            KeyValue(key="lag warning threshold (ms)",
                     value="never" if h.warn_lag_s is None else f"{h.warn_lag_s * 1e3:.1f}"),
            KeyValue(key="lag warnings", value=str(h.lag_warnings)),
            KeyValue(key="control cycles", value=str(h.cycles)),
            KeyValue(key="goals aborted for lag", value=str(h.aborts)),
            KeyValue(key="clock re-anchors", value=str(h.reanchors)),
            KeyValue(key="physics thread", value=h.scheduling),
            KeyValue(key="messages the middleware refused", value=str(self.refused.total()))])
        arms = []
        for name, server in self.arms.items():
            active = self.shared.controllers[name].active
            arms.append(DiagnosticStatus(
                level=DiagnosticStatus.OK, name=f"{self.node.get_name()}: {name} controller",
                hardware_id="mj_manipulator_sim",
                message="executing a goal" if active is not None else "holding"))
        msg = DiagnosticArray(status=[status, *arms])
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.refused.publish(self._diagnostics, msg, "/diagnostics")

    def _set_controller_clocks(self, snap: Snapshot) -> None:
        for name, server in self.arms.items():
            server.set_clock(self.shared.controller_time_at(snap.sim_time, name))

    def _publish_clock(self, snap: Snapshot) -> None:
        self.refused.publish(self._clock_pub, Clock(clock=stamp_msg(snap.sim_time)), "/clock")

    def set_faults(self, arm: str, **changes) -> None:
        """Change an arm's injected faults at run time (fields of ArmFaults; those applied when
        the simulator starts, :data:`STARTUP_FAULTS`: ValueError)."""
        wired = sorted(set(changes) & set(STARTUP_FAULTS))
        if wired:
            raise ValueError(f"sim faults {wired} are wired when the simulator starts: set them "
                             f"in sim.faults.{arm} of the configuration")
        server = self.arms[arm]
        server.set_faults(dataclasses.replace(server.faults, **changes))

    def start(self, physics: bool = True) -> "SimNode":
        """Serve (the node's spinner) and, unless ``physics`` is False, step physics in its own
        thread. False: the caller steps it (``shared.step_cycle``, lockstep tests and benches:
        physics advances only when they say)."""
        if physics:
            self.shared.start()
        self._spinner = BackgroundSpinner(self._executor, f"mjmr-sim-{uuid.uuid4().hex[:4]}").start()
        return self

    def close(self) -> None:
        """Stop physics, end running goals, destroy the node (and the owned context)."""
        for server in self.arms.values():  # before physics stops: no goal may wait for it
            server.closing.set()
        self.shared.stop()
        for ticket_list in (s.tickets for s in self.arms.values()):
            for t in ticket_list:
                t.done.set()
        if self._spinner is not None:
            self._spinner.stop()
            self._spinner = None
        self.node.destroy_timer(self._diag_timer)
        for s in self.arms.values():
            s.destroy()
        if self.recorder is not None:
            self.recorder.close()
        self.node.destroy_node()
        if self._owned is not None:
            self._owned.close()

    def __enter__(self) -> "SimNode":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def run_sim(config_path: str | None, argv: list[str] | None = None,
            serve: list[str] | None = None, record: str | None = None) -> int:
    """Run the simulator until SIGINT/SIGTERM. ROS parameters (``--ros-args -p``) override:
    ``config`` (file), ``use_sim_time``, ``real_time_factor``, ``serve`` (arm names)."""
    import dataclasses as dc
    import signal

    from mj_manipulator_ros.core.config import load_config
    from mj_manipulator_ros.core.exit_bound import bound_shutdown, shutdown_done
    from mj_manipulator_ros.core.heap import freeze_startup
    from mj_manipulator_ros.core.schema import from_mapping
    from mj_manipulator_ros.ros.params import parameter_overrides
    from mj_manipulator_ros.sim.sim_config import SimSettings, sim_config

    ros = RosContext(args=argv)
    try:
        params = parameter_overrides(ros.context, argv or [])
        path = config_path or params.get("config")
        if not path:
            print("sim: no configuration: --config FILE or --ros-args -p config:=FILE")
            return 2
        config = sim_config(load_config(path))
        given = {k: params[k] for k in ("use_sim_time", "real_time_factor") if k in params}
        if given:  # validated like the file
            merged = {f.name: getattr(config.sim, f.name) for f in dc.fields(SimSettings)
                      if f.name not in ("arms", "faults")}
            settings = from_mapping(SimSettings, {**merged, **given}, "--ros-args")
            config = dc.replace(config, sim=dc.replace(config.sim, use_sim_time=settings.use_sim_time,
                                                       real_time_factor=settings.real_time_factor))
        serve = serve or list(params.get("serve") or []) or None
        stop = threading.Event()
        previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
        sim = SimNode(config, context=ros.context, serve=serve, record=record).start()
        sim.node.get_logger().info(
            f"simulating arms {list(sim.scene.arms)}, serving {list(sim.arms)} ("
            f"{sim.scene.physics_summary()}; control {config.sim.control_rate_hz} Hz, real-time "
            f"factor {config.sim.real_time_factor}, use_sim_time {config.sim.use_sim_time})")
        freeze_startup()   # core/heap.py: no full collection scans the start-up's objects again
        try:
            while not stop.wait(0.5):
                if sim.shared.error is not None:
                    raise sim.shared.error
        finally:
            bound_shutdown("sim")   # core/exit_bound.py: a hang says where, and ends
            for s, h in previous.items():
                signal.signal(s, h)
            sim.close()
            print(f"sim: {sim.shared.health().summary()}", flush=True)
            if sim.refused.summary():
                print(f"sim: {sim.refused.summary()}", flush=True)
    finally:
        ros.close()
        shutdown_done()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``ros2 run mj_manipulator_ros sim_node --ros-args -p config:=FILE [-p use_sim_time:=true]``."""
    import sys

    return run_sim(None, sys.argv if argv is None else argv)
