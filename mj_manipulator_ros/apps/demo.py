"""``make demo``: the simulated OpenArm pair runs the crossing plan, synchronized.

In one process, on one DDS graph (loopback):

1. the simulator node (physics thread, one FollowJointTrajectory server per arm, /joint_states);
2. the execution node (one combined FollowJointTrajectory action over both arms);
3. a client that sends the crossing plan (config/plans/openarm_crossing.yaml) as one 14-joint
   goal, as MoveIt would to a single controller, and watches it as MoveIt's execution manager
   does with its defaults: a goal with no result ``duration x 1.2 + 0.5 s`` after its sending
   is canceled (``moveit_monitoring`` in the report says how much room was left).

Before it executes, it replays the plan through the scene synchronized (0 colliding states) and
one arm after the other (k of N colliding), and pictures the worst sequential state
(``demo_sequential_worst.png``). It prints a summary and writes ``demo_report.json``::

    {"start_stamp": s, "start_skew_s": s,
     "arms": {arm: {"status", "motion_onset_s", "max_tracking_error_rad", "final_error_rad"}},
     "execution": <the executor's report>,
     "replay": {"synchronized": <replay report>, "sequential": <replay report>},
     "scene_xml": "demo_scene.xml", "physics_step": <the step and its caps>,
     "bag": "demo_bags/<time>_<goal id>",
     "moveit_monitoring": {"bound_s", "accepted_after_s", "result_after_s", "slack_s",
                           "canceled"}}

The execution is recorded as a bag (rosbag2, MCAP; the execution node's ``record_dir``):
joint states, both arms' action feedback and status, the goals, the executor's events, with the
plan, configuration, report and scene inside.

``motion_onset_s`` is the first control cycle at which the arm's commanded reference departs
from its start, in seconds after the start stamp; ``start_skew_s`` is max - min onset.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import rclpy
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionClient
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
from trajectory_msgs.msg import JointTrajectory

from mj_manipulator_ros.core.errors import MjManipulatorError
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.core.validation import check_speed_factor
from mj_manipulator_ros.check.preflight import preflight_for, scene_checker
from mj_manipulator_ros.model.limits import load_config_with_model
from mj_manipulator_ros.resources import config_file, share_dir
from mj_manipulator_ros.ros.context import RosContext
from mj_manipulator_ros.ros.conversion import trajectory_msg
from mj_manipulator_ros.ros.execution_node import CombinedTrajectoryServer
from mj_manipulator_ros.core.heap import FrozenHeap
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from mj_manipulator_ros.ros.moveit_monitor import send_monitored
from mj_manipulator_ros.ros.spinner import BackgroundSpinner
from mj_manipulator_ros.sim.sim_config import sim_config
from mj_manipulator_ros.sim.sim_node import SimNode

COMBINED_ACTION = "/mj_manipulator_execution/follow_joint_trajectory"


def combined_trajectory(plan: MultiArmPlan) -> JointTrajectory:
    """One trajectory over every arm's joints (the plan shares one time grid)."""
    parts = [trajectory_msg(t) for t in plan.arms.values()]
    msg = JointTrajectory()
    msg.joint_names = [j for p in parts for j in p.joint_names]
    for i, point in enumerate(parts[0].points):
        for other in parts[1:]:
            point.positions = list(point.positions) + list(other.points[i].positions)
            if point.velocities:
                point.velocities = list(point.velocities) + list(other.points[i].velocities)
        msg.points.append(point)
    return msg


#: the demo's start lead at least, s (see run_demo)
DEMO_LEAD_S = 0.6


#: how long the demo waits for the execution node to answer its goal, s: the node replays the
#: 1,401-state plan (synchronized and over the stop band) before it accepts, and on a loaded
#: machine that took over the 20 s this used to be (beside two busy loops the demo then said
#: "rejected" of a goal accepted later)
ANSWER_WAIT_S = 180.0


class DemoError(MjManipulatorError):
    """The demo could not run its plan (no server, a rejection, no result)."""


def run_demo(config_path: Path | None = None, plan_path: Path | None = None,
             out: Path = Path("demo_report.json"), speed: float = 1.0, view: bool = False,
             controller: str | None = None) -> dict:
    config = load_config_with_model(config_path or config_file("sim_openarm.yaml"))
    plan = load_plan(plan_path or share_dir() / "config/plans/openarm_crossing.yaml")
    if speed != 1.0:
        plan = plan.time_scaled(check_speed_factor(speed, config))
    # One Python process runs the simulator, the execution node and the client here: handing a
    # 1,401-point goal to rclpy alone costs ~155 ms of conversion (measured on a 2-core machine,
    # idle), and the simulator converts and checks it again before accepting; goals were
    # accepted up to 80 ms after a 0.25 s lead. The demo's lead covers that (the check that
    # refuses a late acceptance stays on).
    config = config.with_execution(
        record_dir=str(out.with_name(out.stem.replace("_report", "") + "_bags")),
        start_lead_s=max(config.execution.start_lead_s, DEMO_LEAD_S))
    sim_cfg = sim_config(config)
    # The demo runs the simulator in the executor's process: a SCHED_FIFO physics thread there
    # competes with the action servers for the GIL (measured on a loaded 2-core machine: goals
    # accepted 353 ms after the stamp with it, 159 ms without), so it is not asked for here.
    sim_cfg = dataclasses.replace(sim_cfg, sim=dataclasses.replace(sim_cfg.sim, thread_priority=0))
    if controller is not None:  # every arm's simulated controller (position servos or torque)
        arms = {a.name: dataclasses.replace(sim_cfg.sim.arm(a.name), controller=controller)
                for a in config.arms}
        sim_cfg = dataclasses.replace(sim_cfg, sim=dataclasses.replace(sim_cfg.sim, arms=arms))
    replay = replay_comparison(config, plan, out.with_name(out.stem.replace("_report", "") +
                                                           "_sequential_worst.png"))
    with RosContext() as ros:
        sim = SimNode(sim_cfg, context=ros.context).start()
        executor = MultiArmExecutor(config, context=ros.context, preflight=preflight_for(config))
        executor.record_artifacts = sim.scene.artifacts()
        node = rclpy.create_node("mj_manipulator_execution", context=ros.context)
        server = CombinedTrajectoryServer(node, config, executor)
        server_exec = MultiThreadedExecutor(num_threads=4, context=ros.context)
        server_exec.add_node(node)
        client_node = rclpy.create_node("mj_manipulator_demo_client", context=ros.context)
        client = ActionClient(client_node, FollowJointTrajectory, COMBINED_ACTION)
        client_exec = SingleThreadedExecutor(context=ros.context)
        client_exec.add_node(client_node)
        viewer = _open_viewer(sim) if view else None
        # core/heap.py: the simulator shares this process with the executor (handed back on
        # return: the caller's process may live on)
        heap = FrozenHeap()
        heap.freeze()
        try:
            with BackgroundSpinner(server_exec, "mjmr-demo-execution"):
                if not client.wait_for_server(timeout_sec=20.0):
                    raise DemoError(f"combined action {COMBINED_ACTION} not available")
                goal = FollowJointTrajectory.Goal(trajectory=combined_trajectory(plan))
                print(f"demo: sending the crossing plan ({plan['left'].times.size} states, "
                      f"{plan.duration:.1f} s, {len(goal.trajectory.joint_names)} joints) to "
                      f"{COMBINED_ACTION}", flush=True)
                watched = send_monitored(client, client_exec, goal, plan.duration,
                                         ANSWER_WAIT_S, on_spin=None if viewer is None else
                                         (lambda: _sync_viewer(viewer, sim)))
                if watched.accepted is None:
                    raise DemoError(f"no answer from the execution node within {ANSWER_WAIT_S:g} "
                                    "s of sending the crossing plan (its pre-flight replay "
                                    "comes first)")
                if not watched.accepted:
                    raise DemoError("the execution node rejected the crossing plan (its log "
                                    "above says why)")
                print(f"demo: accepted {watched.accepted_after_s:.1f} s after sending (the "
                      "execution node's pre-flight replay first)", flush=True)
                if watched.timed_out:
                    # as MoveIt would: "Controller is taking too long to execute trajectory"
                    print(f"demo: no result {watched.bound_s:.1f} s after sending: MoveIt's "
                          "default execution monitoring stopped the goal there (canceled)",
                          flush=True)
                if watched.result_after_s is None:
                    raise DemoError("no result from the execution node")
                monitoring = {"bound_s": round(watched.bound_s, 3),
                              "accepted_after_s": round(watched.accepted_after_s, 3),
                              "result_after_s": round(watched.result_after_s, 3),
                              "slack_s": round(watched.slack_s, 3),
                              "canceled": watched.timed_out}
                print(f"demo: result {watched.result_after_s:.2f} s after sending; MoveIt's "
                      f"default execution monitoring allows {watched.bound_s:.2f} s (slack "
                      f"{watched.slack_s:+.2f} s)", flush=True)
        finally:
            if viewer is not None:
                viewer.close()
            client.destroy()
            client_exec.shutdown()
            client_node.destroy_node()
            server.destroy()
            executor.close()
            node.destroy_node()
            sim.close()
            heap.release()
    report = server.last_report
    arms = {}
    for name, arm_server in sim.arms.items():
        ticket = arm_server.tickets[-1] if arm_server.tickets else None
        onset = None if ticket is None or ticket.motion_onset is None else \
            ticket.motion_onset - report.start_stamp
        arms[name] = {"status": report.arms[name].status.value, "motion_onset_s": onset,
                      "max_tracking_error_rad": None if ticket is None else ticket.max_tracking_error,
                      "final_error_rad": None if ticket is None else ticket.final_error}
    onsets = [a["motion_onset_s"] for a in arms.values() if a["motion_onset_s"] is not None]
    physics = sim.scene.save(out.with_name(out.stem.replace("_report", "") + "_scene.xml"))
    doc = {"start_stamp": report.start_stamp, **physics,
           "bag": None if server.last_record is None else str(server.last_record),
           "start_skew_s": (max(onsets) - min(onsets)) if len(onsets) == len(arms) else None,
           "arms": arms, "execution": report.to_dict(), "replay": replay,
           "moveit_monitoring": monitoring,
           "simulator": sim.shared.health().summary()}
    out.write_text(json.dumps(doc, indent=2))
    return doc


def replay_comparison(config, plan: MultiArmPlan, image: Path) -> dict:
    """What the plan does synchronized (as planned) and run one arm after the other."""
    checker = scene_checker(config)
    out = {}
    for mode in ("synchronized", "sequential"):
        report = checker.check(plan, mode=mode)
        print(f"demo: {report.summary().splitlines()[0]}", flush=True)
        out[mode] = report.to_dict()
        if mode == "sequential" and not report.collision_free:
            try:
                from mj_manipulator_ros.check.render import render_worst
                render_worst(checker, report, plan, image)
                out[mode]["image"] = str(image)
                print(f"demo: worst sequential state pictured in {image}", flush=True)
            except Exception as exc:  # noqa: BLE001 - a missing GL backend must not stop the demo
                print(f"demo: could not render the worst state ({type(exc).__name__}: {exc})")
    return out


def _open_viewer(sim: SimNode):
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        print("demo: --view needs a display (DISPLAY is not set); running without the viewer")
        return None
    import mujoco
    import mujoco.viewer

    sim._view_data = mujoco.MjData(sim.shared.model)  # the viewer's own data, never the shared
    return mujoco.viewer.launch_passive(sim.shared.model, sim._view_data)


def _sync_viewer(viewer, sim: SimNode) -> None:
    import mujoco

    sim.shared.read(lambda m, d: sim._view_data.qpos.__setitem__(slice(None), d.qpos))
    mujoco.mj_forward(sim.shared.model, sim._view_data)
    viewer.sync()


def _figure(value, scale: float, fmt: str, unit: str) -> str:
    """A measured figure, or "not measured" (never a None in a format string)."""
    return "not measured" if value is None else f"{value * scale:{fmt}} {unit}"


def summary(doc: dict) -> str:
    """What the demo did, failures first, every figure with its unit or "not measured"."""
    execution = doc["execution"]
    lines = [f"execution: {execution['status']}"]
    failure = execution.get("first_failure")
    if failure:
        lines.append(f"  first failure: {failure['arm'] or 'external'}: {failure['reason']}"
                     + (f": {failure['error_string']}" if failure.get("error_string") else ""))
    for arm, a in doc["arms"].items():
        lines.append(f"  {arm}: {a['status']}, motion onset "
                     f"{_figure(a['motion_onset_s'], 1e3, '.1f', 'ms')} after the stamp, max "
                     f"tracking error {_figure(a['max_tracking_error_rad'], 1, '.4f', 'rad')}, "
                     f"final error {_figure(a['final_error_rad'], 1, '.4f', 'rad')}")
    lines.append(f"start skew (motion onset, max - min): "
                 f"{_figure(doc['start_skew_s'], 1e3, '.2f', 'ms')}")
    if doc.get("simulator"):
        lines.append(f"simulator: {doc['simulator']}")
    for mode, r in doc.get("replay", {}).items():
        lines.append(f"replay {mode}: {r['colliding_states']} of {r['states_checked']} states "
                     "colliding")
    return "\n".join(lines)
