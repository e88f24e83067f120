"""Continuing a plan after a stop (core/continuation.py, ros/plan_continuation.py), on the tiny
pair's simulator over real DDS: each stop kind, the arms brought to one plan time along their
own paths and the plan completed; the motion checked against the plan's path sampled densely
(an independent reference: the plan itself, not the continuation's goals) and replayed through
the scene; an arm moved off its plan refused by name before anything moves."""

from __future__ import annotations

import json
import re
import threading
import time

import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState

from mj_manipulator_ros.check.preflight import scene_checker
from mj_manipulator_ros.check.timeline import load_recording, timeline_from_recording
from mj_manipulator_ros.core.approach import approach_plan
from mj_manipulator_ros.core.continuation import OffPlanError, report_hints
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.report import ExecutionStatus, FailureReason
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from mj_manipulator_ros.ros.spinner import BackgroundSpinner
from plan_moment import at_plan_time
from test_execution_watch import swing_plan
from tiny_arm import tiny_config

#: how far (rad) a measured configuration may be from its plan's path: the simulated servos
#: follow their reference with a lag along the path and a small error across it (0.004 rad
#: measured on the curved plan, idle machine); a straight move back instead of the retrace
#: leaves the path by 0.035 rad there (the test asserts more than twice this bound)
ON_PATH_RAD = 0.01


class Listener:
    """Every /joint_states message (header stamp, names, positions) while it listens."""

    def __init__(self, ros) -> None:
        self.node = rclpy.create_node("continue_listener", context=ros.context)
        self.rows: list[tuple[float, list[str], list[float]]] = []
        self.lock = threading.Lock()
        self.node.create_subscription(JointState, "/joint_states", self._on, 100)
        ex = SingleThreadedExecutor(context=ros.context)
        ex.add_node(self.node)
        self.spinner = BackgroundSpinner(ex, "continue-listener").start()

    def _on(self, msg: JointState) -> None:
        with self.lock:
            self.rows.append((msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9,
                              list(msg.name), list(msg.position)))

    def since(self, t: float) -> list:
        with self.lock:
            return [r for r in self.rows if r[0] >= t]

    def close(self) -> None:
        self.spinner.stop()
        self.node.destroy_node()


@pytest.fixture
def listener(ros):
    made = Listener(ros)
    yield made
    made.close()


def curved_plan(duration: float = 4.0) -> MultiArmPlan:
    """Both arms out and back on a curved path in joint space (the first joint out and back
    once, the second three times), from rest to rest: a chord between two of its configurations
    leaves the path (a retrace along it can be told from a straight move)."""
    t = np.linspace(0.0, duration, 101)
    w = np.pi / duration
    q = np.stack([0.5 * np.sin(w * t) ** 2, 0.3 * np.sin(3 * w * t) ** 2], axis=1)
    v = np.stack([0.5 * w * np.sin(2 * w * t), 0.3 * 3 * w * np.sin(6 * w * t)], axis=1)
    v[[0, -1]] = 0.0
    return MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), t, q * [sign, 1.0],
                                          v * [sign, 1.0])
                         for a, sign in (("left", 1.0), ("right", -1.0))})


def chord_off_path(traj, t0: float, t1: float) -> float:
    """How far (rad) the straight move between the path's configurations at t0 and t1 leaves
    the path: the test's measure must be able to tell a retrace from it."""
    path = sample(traj, np.arange(0.0, traj.duration + 1e-4, 1e-3))[0]
    a, b = sample(traj, [t0, t1])[0]
    chord = a + np.linspace(0.0, 1.0, 101)[:, None] * (b - a)
    return max(float(np.min(np.max(np.abs(path - c), axis=1))) for c in chord)


def off_path(plan, rows) -> float:
    """The largest distance (rad, max over joints) of any recorded arm configuration from its
    plan's path sampled every 1 ms."""
    worst = 0.0
    for arm, traj in plan.arms.items():
        path = sample(traj, np.arange(0.0, traj.duration + 1e-4, 1e-3))[0]     # (N, J)
        for _, names, pos in rows:
            if not set(traj.joint_names) <= set(names):
                continue
            q = np.array([pos[names.index(j)] for j in traj.joint_names])
            worst = max(worst, float(np.min(np.max(np.abs(path - q), axis=1))))
    return worst


def at_plan_end(executor, plan) -> float:
    measured = executor.start_check.measured(list(plan.arm_names))
    return max(float(np.max(np.abs(measured[a] - plan[a].positions[-1])))
               for a in plan.arm_names)


def replay_clear(cfg, rows, path) -> dict:
    path.write_text("".join(json.dumps({"t": t, "name": n, "position": p}) + "\n"
                            for t, n, p in rows))
    joints = {a.name: a.joint_names for a in cfg.executor.arms}
    return scene_checker(cfg.executor).check(
        timeline=timeline_from_recording(load_recording(path), joints), mode="recorded").to_dict()


def test_a_peer_failed_stop_is_continued_along_the_plan(tiny_sim, ros, tmp_path,
                                                         listener) -> None:
    """The left arm's goal aborts mid-swing (simulator fault): its controller holds it there,
    the right arm stops along the plan further on. Continuing brings the right arm back along
    its own path to the left's plan time, then runs the rest of the plan: every configuration
    on the plan's path, the whole motion clear in the scene, the arms at the plan's end."""
    node = tiny_sim(left={"abort_after_s": 1.3})
    cfg = tiny_config(tmp_path, execution={"use_sim_time": True, "black_box_s": 0.0})
    plan = curved_plan()
    with MultiArmExecutor(cfg.executor, context=ros.context) as executor:
        failed = executor.execute(plan)
        assert failed.first_failure is not None and \
            failed.first_failure.reason is FailureReason.ABORTED, failed.summary()
        assert failed.stops and failed.stops[-1].held == ("left",), failed.summary()
        node.set_faults("left", abort_after_s=None)
        began = executor.now()
        cont = executor.continue_plan(plan)
        assert cont.succeeded, cont.summary()
        # the right arm stood further along; both were brought to the left's plan time
        assert cont.found["right"] > cont.found["left"] + 0.05, cont.found
        assert cont.common_time == pytest.approx(cont.found["left"])
        assert cont.retrace is not None and cont.retrace.succeeded
        assert at_plan_end(executor, plan) < 0.01
    # the measure tells a retrace along the path from a straight move back
    assert chord_off_path(plan["right"], cont.found["left"], cont.found["right"]) > \
        2 * ON_PATH_RAD
    rows = listener.since(began)
    assert len(rows) > 100
    assert off_path(plan, rows) <= ON_PATH_RAD, off_path(plan, rows)
    verdict = replay_clear(cfg, listener.rows, tmp_path / "motion.jsonl")
    assert verdict["colliding_states"] == 0, verdict


@pytest.mark.parametrize("kind", ["operator", "pause"])
def test_a_controlled_stop_and_a_pause_that_timed_out_are_continued(kind, tiny_sim, ros,
                                                                     tmp_path, listener) -> None:
    """Both leave every arm at one plan time: no retrace, the rest of the plan from there."""
    tiny_sim()
    cfg = tiny_config(tmp_path, execution={"use_sim_time": True, "black_box_s": 0.0,
                                           "max_pause_s": 0.3})
    plan = swing_plan()
    at = float(np.random.default_rng(5 if kind == "operator" else 6).uniform(0.5, 1.2))
    with MultiArmExecutor(cfg.executor, context=ros.context) as executor:
        act = executor.stop if kind == "operator" else executor.pause
        thread = at_plan_time(executor, at, lambda: act(f"{kind} (test)"))
        stopped = executor.execute(plan)
        thread.join(25.0)
        assert stopped.status is ExecutionStatus.STOPPED, stopped.summary()
        began = executor.now()
        cont = executor.continue_plan(plan)
        assert cont.succeeded, cont.summary()
        assert cont.retrace is None and cont.approach is None
        assert abs(cont.found["left"] - cont.found["right"]) < 0.01, cont.found
        assert at_plan_end(executor, plan) < 0.01
    assert off_path(plan, listener.since(began)) <= ON_PATH_RAD


def test_an_arm_moved_after_the_stop_is_refused_by_name_then_brought_back(
        tiny_sim, ros, tmp_path, listener) -> None:
    """After an operator's stop, the left arm is moved 0.2 rad off its plan (another
    client's checked move): continuing is refused naming the arm and the joint, nothing moves
    (no goal reaches either controller); with approach it is brought back and the plan
    completes."""
    node = tiny_sim()
    cfg = tiny_config(tmp_path, execution={"use_sim_time": True, "black_box_s": 0.0})
    plan = swing_plan()
    with MultiArmExecutor(cfg.executor, context=ros.context) as executor:
        thread = at_plan_time(executor, 0.8, lambda: executor.stop("operator (test)"))
        stopped = executor.execute(plan)
        assert stopped.status is ExecutionStatus.STOPPED, stopped.summary()
        thread.join(25.0)
        # the swing passes each pose twice (out and back): where the arms stopped, from the
        # stop's report, as the operator says it (--continue-near) after another client moved
        # an arm (the executor's latest run is then that move, not this plan)
        hints = report_hints(stopped, plan)
        here = executor.start_check.measured(["left"])["left"]
        moved = executor.execute(approach_plan(cfg.executor, {"left": here},
                                               {"left": here + np.array([0.2, 0.0])}))
        assert moved.succeeded, moved.summary()
        goals = {a: len(node.arms[a].tickets) for a in ("left", "right")}
        before = executor.start_check.measured(["left", "right"])
        with pytest.raises(OffPlanError, match=r"arm 'left', joint 'left_j1'.*off its plan"):
            executor.continue_plan(plan, hints=hints)
        time.sleep(0.3)
        after = executor.start_check.measured(["left", "right"])
        assert {a: len(node.arms[a].tickets) for a in ("left", "right")} == goals
        assert max(float(np.max(np.abs(after[a] - before[a]))) for a in after) < 1e-3
        cont = executor.continue_plan(plan, approach=True, hints=hints)
        assert cont.succeeded, cont.summary()
        assert cont.off_plan == ("left",) and cont.approach is not None
        assert at_plan_end(executor, plan) < 0.01


def test_the_execution_node_continues_its_latest_goal(tiny_sim, ros, tmp_path) -> None:
    """Through the execution node: a combined goal whose left arm aborts mid-plan ends
    ABORTED; ~/continue (a real service call) brings the arms to one plan time along the plan
    and completes it; a second ~/continue says there is nothing to continue."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import ActionClient
    from rclpy.executors import MultiThreadedExecutor
    from std_srvs.srv import Trigger

    from action_helpers import result, send
    from mj_manipulator_ros.ros.conversion import trajectory_msg
    from mj_manipulator_ros.ros.execution_node import CombinedTrajectoryServer

    node = tiny_sim(left={"abort_after_s": 1.3})
    cfg = tiny_config(tmp_path, execution={"use_sim_time": True, "black_box_s": 0.0})
    plan = curved_plan()
    action = "/mjmr_test_continue/follow_joint_trajectory"
    with MultiArmExecutor(cfg.executor, context=ros.context) as executor:
        server_node = rclpy.create_node("mjmr_test_continue", context=ros.context)
        server = CombinedTrajectoryServer(server_node, cfg.executor, executor, action)
        spin = MultiThreadedExecutor(num_threads=4, context=ros.context)
        spin.add_node(server_node)
        spinner = BackgroundSpinner(spin, "continue-server").start()
        client_node = rclpy.create_node("mjmr_test_continue_client", context=ros.context)
        client_exec = SingleThreadedExecutor(context=ros.context)
        client_exec.add_node(client_node)
        try:
            client = ActionClient(client_node, FollowJointTrajectory, action)
            assert client.wait_for_server(timeout_sec=10.0)
            joints = [j for a in ("left", "right") for j in plan[a].joint_names]
            combined = np.hstack([plan["left"].positions, plan["right"].positions])
            velocities = np.hstack([plan["left"].velocities, plan["right"].velocities])
            goal = FollowJointTrajectory.Goal(trajectory=trajectory_msg(ArmTrajectory(
                tuple(joints), plan["left"].times, combined, velocities)))
            handle = send(client, client_exec, goal)
            assert handle is not None and handle.accepted
            assert result(client_exec, handle, 30.0).status == GoalStatus.STATUS_ABORTED
            node.set_faults("left", abort_after_s=None)
            trigger = client_node.create_client(Trigger, "/mjmr_test_continue/continue")
            assert trigger.wait_for_service(timeout_sec=10.0)
            for want in (True, False):
                future = trigger.call_async(Trigger.Request())
                client_exec.spin_until_future_complete(future, timeout_sec=60.0)
                assert future.done(), "~/continue: no response"
                answer = future.result()
                assert answer.success is want, answer.message
            assert "nothing to continue" in answer.message
            cont = server.last_continuation
            assert cont.succeeded and cont.retrace is not None, cont.summary()
            assert at_plan_end(executor, plan) < 0.01
        finally:
            spinner.stop()
            server.destroy()
            server_node.destroy_node()
            client_exec.shutdown()
            client_node.destroy_node()


def test_locate_finds_the_plan_time_refuses_off_and_ambiguous_poses() -> None:
    """On the out-and-back swing every pose but the turn is passed twice: found with a hint
    (each pass), refused without one (naming the arm and both passes); a pose 0.2 rad off
    names the arm, the joint and the nearest plan time."""
    from mj_manipulator_ros.core.continuation import AmbiguousPlanTimeError, locate

    traj = swing_plan()["left"]
    tol = np.full(2, 0.01)
    for t in (0.35, 1.65):
        q = sample(traj, [t])[0][0]
        assert locate(traj, q, tol, hint=t + 0.1) == pytest.approx(t, abs=2e-3)
    with pytest.raises(AmbiguousPlanTimeError, match=r"arm 'left'.*more than once.*0\.3\d\d"):
        locate(traj, sample(traj, [0.35])[0][0], tol)
    turn = sample(traj, [1.0])[0][0]
    assert locate(traj, turn, tol) == pytest.approx(1.0, abs=2e-3)
    with pytest.raises(OffPlanError, match=r"arm 'left', joint 'left_j2'.*plan time 1\.000 s") \
            as caught:
        locate(traj, turn + [0.0, 0.2], tol)
    assert caught.value.plan_time == pytest.approx(1.0, abs=2e-3)


def test_the_command_line_continues_a_stopped_plan(tiny_sim, ros, tmp_path, capsys) -> None:
    """``execute PLAN --continue`` after a peer-failed stop left by this process's executor
    (the arms stopped near plan time 1.3 s on an out-and-back plan: said with
    --continue-near): refused while the left arm is off its plan (exit 2, nothing moved; the
    command's ``main`` called here), then ``--continue --approach`` in its own process
    completes the plan (exit 0, JSON account)."""
    import subprocess
    import sys

    import yaml

    from mj_manipulator_ros.cli import main
    from mj_manipulator_ros.core.plan_io import plan_to_mapping
    from tiny_arm import tiny_mapping

    node = tiny_sim(left={"abort_after_s": 1.3})
    execution = {"use_sim_time": True, "black_box_s": 0.0}
    cfg = tiny_config(tmp_path, execution=execution)
    config_file = tmp_path / "tiny.yaml"
    config_file.write_text(yaml.safe_dump(tiny_mapping(tmp_path, execution=execution)))
    plan = curved_plan()
    plan_file = tmp_path / "curved.yaml"
    plan_file.write_text(yaml.safe_dump(plan_to_mapping(plan)))
    with MultiArmExecutor(cfg.executor, context=ros.context) as executor:
        failed = executor.execute(plan)
        assert failed.first_failure is not None and failed.stops, failed.summary()
        node.set_faults("left", abort_after_s=None)
        here = executor.start_check.measured(["left"])["left"]
        moved = executor.execute(approach_plan(cfg.executor, {"left": here},
                                               {"left": here + np.array([0.0, 0.2])}))
        assert moved.succeeded, moved.summary()
    args = ["execute", str(plan_file), "--config", str(config_file), "--continue", "--json",
            "--continue-near", "1.3"]
    goals = {a: len(node.arms[a].tickets) for a in ("left", "right")}
    capsys.readouterr()
    code = main(list(args))
    refused = capsys.readouterr()
    assert code == 2, refused.out + refused.err
    # the joint farthest from the plan's nearest configuration (moving j2 off the curved path
    # moves the nearest point along it too)
    assert re.search(r"arm 'left', joint 'left_j[12]': measured .* off its plan.*nothing was "
                     r"sent", refused.err), refused.err
    assert {a: len(node.arms[a].tickets) for a in ("left", "right")} == goals
    done = subprocess.run([sys.executable, "-m", "mj_manipulator_ros.cli", *args, "--approach"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    account = json.loads(done.stdout)
    assert account["succeeded"] and account["off_plan"] == ["left"], account
    assert account["rest"]["status"] == "succeeded"
    with MultiArmExecutor(cfg.executor, context=ros.context) as executor:
        assert at_plan_end(executor, plan) < 0.01
