"""The execution node's program: configuration, pre-flight gate, executor, combined server.

``ros2 run mj_manipulator_ros execution_node --ros-args -p config:=FILE`` (or
``mj-manipulator-ros execution-node --config FILE``). Node parameters: ``config`` and every
overridable execution setting (:mod:`mj_manipulator_ros.core.overrides`), each unset unless
given, so the file's value stands. ``use_sim_time`` is ROS's own parameter of every node (it is
always declared, default false): sim time is used when it or the file's
``execution.use_sim_time`` is true.
"""

from __future__ import annotations

import signal
import threading

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import MultiThreadedExecutor

from mj_manipulator_ros.check.preflight import preflight_for
from mj_manipulator_ros.core import overrides
from mj_manipulator_ros.core.config import ExecutionSettings
from mj_manipulator_ros.core.errors import MjManipulatorError
from mj_manipulator_ros.core.exit_bound import bound_shutdown, shutdown_done
from mj_manipulator_ros.core.heap import freeze_startup
from mj_manipulator_ros.model.limits import load_config_with_model
from mj_manipulator_ros.ros.context import RosContext
from mj_manipulator_ros.ros.execution_node import CombinedTrajectoryServer
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from mj_manipulator_ros.ros.spinner import BackgroundSpinner

NODE_NAME = "mj_manipulator_execution"
#: ROS declares use_sim_time on every node; it is not declared again here.
ROS_OWN_PARAMETERS = ("use_sim_time",)


def node_parameters() -> dict[str, str]:
    """name -> description of every parameter the node declares (besides ROS's own)."""
    out = {"config": "path of the executor configuration file (arms, actions, limits, execution)"}
    for f in overrides.overridable(ExecutionSettings):
        if f.name not in ROS_OWN_PARAMETERS:
            out[f.name] = f"{f.metadata['doc']}; unset = execution.{f.name} of the config"
    return out


def run_node(argv: list[str] | None = None, config_path: str | None = None) -> int:
    """Run the execution node until SIGINT/SIGTERM (which abort a running goal first)."""
    ros = RosContext(args=argv)
    node = rclpy.create_node(NODE_NAME, context=ros.context)
    for name, doc in node_parameters().items():
        node.declare_parameter(name, None, ParameterDescriptor(description=doc, dynamic_typing=True))
    path = config_path or node.get_parameter("config").value
    if not path:
        node.get_logger().fatal("parameter 'config' (the executor configuration file) is not set")
        node.destroy_node()
        ros.close()
        return 2
    try:
        config = load_config_with_model(path)
        given = {name: node.get_parameter(name).value for name in node_parameters()
                 if name != "config"}
        if node.get_parameter("use_sim_time").value:
            given["use_sim_time"] = True
        config = config.with_execution(**overrides.check(ExecutionSettings, given,
                                                         "node parameter"))
        preflight = preflight_for(config)
    except MjManipulatorError as exc:
        node.get_logger().fatal(str(exc))
        node.destroy_node()
        ros.close()
        return 2
    executor = MultiArmExecutor(config, context=ros.context, preflight=preflight)
    server = CombinedTrajectoryServer(node, config, executor)
    spin = MultiThreadedExecutor(num_threads=4, context=ros.context)
    spin.add_node(node)
    stop = threading.Event()

    def on_signal(signum, _frame):
        server.abort(f"execution node stopping ({signal.Signals(signum).name})")
        stop.set()
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    node.get_logger().info(
        f"combined FollowJointTrajectory action on {node.get_fully_qualified_name()}/"
        f"follow_joint_trajectory for arms {list(config.arm_names)}")
    announce_ready(node, executor)
    freeze_startup()   # core/heap.py: no full collection scans the start-up's objects again
    try:
        with BackgroundSpinner(spin, "mjmr-execution-node"):
            stop.wait()
    finally:
        bound_shutdown("execution node")   # core/exit_bound.py: a hang says where, and ends
        for s, h in previous.items():
            signal.signal(s, h)
        server.destroy()
        executor.close()
        node.destroy_node()
        ros.close()
        shutdown_done()
    return 0


#: how often the node looks whether the arms are all there, until they are (s)
READY_POLL_S = 0.1


def announce_ready(node, executor: MultiArmExecutor) -> None:
    """Log once, when first true, that every arm's server, joint states and clock offset are
    there (``MultiArmExecutor.readiness``): a goal sent before waits for them in its start
    check (up to ``server_wait_s``), one sent after does not."""
    timer = None

    def look() -> None:
        said = executor.readiness()
        if said is not None and timer is not None and not timer.is_canceled():
            timer.cancel()
            node.get_logger().info(said)
    timer = node.create_timer(READY_POLL_S, look)


def main(argv: list[str] | None = None) -> int:
    """``ros2 run mj_manipulator_ros execution_node --ros-args -p config:=FILE``."""
    import sys

    return run_node(sys.argv if argv is None else argv)
