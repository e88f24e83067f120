"""Random operator sequences through the execution node: the sequences of
``bench/random_sequences.py`` (the same seeds draw the same plans and moments), made the way a
ROS user makes them: the plan sent as one combined FollowJointTrajectory goal (stamp 0, every
joint, as MoveIt sends it) to the node's action server (``ros/execution_node.py``), pauses,
resumes and stops through its ``~/pause``, ``~/resume``, ``~/stop`` services, speed changes on
``~/speed_scaling``, the operator's abort as the goal's cancel, a failing controller as in the
executor's sequences. Tiny pair, the simulator in-process at ``PACE`` x real time, sim time,
real DDS, every server and client its own node.

Per sequence, on top of the executor's invariants (``random_sequences.problems``):

- the goal got exactly one result: an answer to its goal, then one terminal status (succeeded,
  canceled or aborted: never unknown), within ``RESULT_DUE_S`` of the node's report, and it
  says what the report says (succeeded only when the report did; canceled only when its
  client canceled and the report says canceled or stopped);
- a request the sequence makes before the start is made once the node has accepted the goal
  (before, the node has nothing to pause);
- a cancel the node accepted shows in the report (a stop with the cancel's reason, or the
  execution canceled, stopped or failed first), or came after the goal had ended.

Usage: python bench/random_combined.py [--sequences 200] [--seed 1]   (prints JSON)
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from random_sequences import (  # noqa: E402  (sets the DDS domain before rclpy loads)
    Bench, Request, Sequence, actions_of, arm_moves, plan_of, problems, run_and_report,
    running, wait_for_plan_time, watch_standing)

import rclpy  # noqa: E402
from action_msgs.msg import GoalStatus  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor  # noqa: E402
from std_msgs.msg import Float64  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from mj_manipulator_ros.core.goal_kind import GoalKind  # noqa: E402
from mj_manipulator_ros.core.report import ExecutionStatus  # noqa: E402
from mj_manipulator_ros.ros.conversion import trajectory_msg  # noqa: E402
from mj_manipulator_ros.ros.execution_node import CombinedTrajectoryServer  # noqa: E402
from mj_manipulator_ros.ros.spinner import BackgroundSpinner  # noqa: E402

NODE = "mjmr_random_execution"
#: the node's reasons for what its services and a cancel ask (``ros/execution_node.py``)
REASONS = {"pause": "~/pause", "stop": "stop requested (~/stop)",
           "cancel": "combined goal canceled by its client"}
#: the goal's result arrives at most this long (s, wall) after the node's report
RESULT_DUE_S = 5.0
#: bound on any one answer (goal response, service, cancel), s wall
ANSWER_S = 10.0
#: bound on one goal from its sending to its result, s wall (the swing, pauses, stops)
GOAL_S = 60.0
TERMINAL = {GoalStatus.STATUS_SUCCEEDED: "succeeded", GoalStatus.STATUS_CANCELED: "canceled",
            GoalStatus.STATUS_ABORTED: "aborted"}


def combined_goal(plan) -> FollowJointTrajectory.Goal:
    """The plan as one trajectory over every arm's joints, stamp 0 (the arms share one time
    grid in the swing)."""
    msgs = [trajectory_msg(plan[a]) for a in plan.arm_names]
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = [j for m in msgs for j in m.joint_names]
    for i, point in enumerate(msgs[0].points):
        for m in msgs[1:]:
            if m.points[i].time_from_start != point.time_from_start:
                raise ValueError(f"the arms' plans differ in time at point {i}")
            point.positions = list(point.positions) + list(m.points[i].positions)
            point.velocities = list(point.velocities) + list(m.points[i].velocities)
        goal.trajectory.points.append(point)
    return goal


class ActionBench(Bench):
    """:class:`Bench` with the execution node's combined server on the same executor, a client
    node for the goal (spun by the thread that sends it) and an operator node for the services
    and the speed topic (spun by the operator's thread)."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        ctx = self.ros.context
        self.node = rclpy.create_node(NODE, context=ctx)
        self.server = CombinedTrajectoryServer(self.node, self.config.executor, self.executor)
        self._spin = MultiThreadedExecutor(num_threads=4, context=ctx)
        self._spin.add_node(self.node)
        self._spinner = BackgroundSpinner(self._spin, "random-combined-server").start()
        self.client_node = rclpy.create_node("mjmr_random_client", context=ctx)
        self.client = ActionClient(self.client_node, FollowJointTrajectory,
                                   f"/{NODE}/follow_joint_trajectory")
        self.client_exec = SingleThreadedExecutor(context=ctx)
        self.client_exec.add_node(self.client_node)
        self.op_node = rclpy.create_node("mjmr_random_operator", context=ctx)
        self.services = {name: self.op_node.create_client(Trigger, f"/{NODE}/{name}")
                         for name in ("pause", "resume", "stop")}
        self.speed = self.op_node.create_publisher(Float64, f"/{NODE}/speed_scaling", 10)
        self.op_exec = SingleThreadedExecutor(context=ctx)
        self.op_exec.add_node(self.op_node)
        if not self.client.wait_for_server(timeout_sec=ANSWER_S) or not all(
                c.wait_for_service(timeout_sec=ANSWER_S) for c in self.services.values()):
            self.close()
            raise RuntimeError(f"the execution node's action or services not found within "
                               f"{ANSWER_S} s")

    def run(self, seeds) -> list[Sequence]:
        out = []
        for seed in seeds:
            out.append(run_combined(self, seed))
            self.home_after(out[-1])
        return out

    def call(self, name: str) -> tuple[object, str]:
        """A service call from the operator's thread: (success, message) or ("no answer", '')."""
        future = self.services[name].call_async(Trigger.Request())
        self.op_exec.spin_until_future_complete(future, timeout_sec=ANSWER_S)
        if not future.done():
            return "no answer", f"~/{name}: no answer within {ANSWER_S} s"
        response = future.result()
        answer = "refused" if " refused: " in response.message else bool(response.success)
        return answer, response.message

    def close(self) -> None:
        for c in self.services.values():
            self.op_node.destroy_client(c)
        self.client.destroy()
        self.client_exec.shutdown()
        self.op_exec.shutdown()
        self.client_node.destroy_node()
        self.op_node.destroy_node()
        self._spinner.stop()
        self.server.destroy()
        self.node.destroy_node()
        super().close()


def run_combined(bench: ActionBench, seed: int) -> Sequence:
    """One seeded sequence through the node (the seed's plan and moments of ``run_one``)."""
    import numpy as np
    executor, sim = bench.executor, bench.sim
    rng = np.random.default_rng(seed)
    seq = Sequence(seed)
    plan = plan_of(rng)
    actions = actions_of(rng)
    done = threading.Event()
    cancel_asked = threading.Event()
    cancel_answered = threading.Event()
    cancel_answer: dict = {}
    accepted = threading.Event()   # the node accepted the goal: the operator may act
    before = executor.last_run
    bench.server.last_report = None
    started = time.monotonic()

    def operator() -> None:
        while not (accepted.wait(0.05) or done.is_set()):
            pass
        for plan_time, action, factor in actions:
            if not wait_for_plan_time(executor, plan_time, done):
                return
            if action == "abort":
                action = "cancel"
            req = Request(action, plan_time, running=running(executor))
            if action in ("pause", "resume", "stop"):
                req.answer, message = bench.call(action)
                req.text = REASONS.get(action, message)
                if req.answer is not True:
                    req.text = message
            elif action == "speed":
                bench.speed.publish(Float64(data=factor))
                req.answer, req.text = "published", f"speed {factor:.3f}"
            elif action == "cancel":
                cancel_asked.set()
                cancel_answered.wait(ANSWER_S)
                req.answer = cancel_answer.get("accepted", "no answer")
                req.text = REASONS["cancel"]
            else:   # a controller fails: its goal aborted from now on
                arm = str(rng.choice(("left", "right")))
                sim.set_faults(arm, abort_after_s=0.0)
                req.answer, req.text = True, arm
            seq.requests.append(req)

    def sampler() -> None:
        watch_standing(executor, sim, lambda run: run is not before, seq, done)

    threads = [threading.Thread(target=f, name=f"seq-{f.__name__}") for f in (operator, sampler)]
    for t in threads:
        t.start()
    found: list[str] = []
    out: dict = {}
    try:
        found += _send_and_wait(bench, plan, accepted, cancel_asked, cancel_answered,
                                cancel_answer, out)
    finally:
        done.set()
        cancel_answered.set()
        for t in threads:
            t.join(ANSWER_S + 5.0)
        for arm in ("left", "right"):
            sim.set_faults(arm, abort_after_s=None)
    seq.report = bench.server.last_report
    out["report"] = seq.report
    run = executor.last_run
    if run is not None and run is not before:
        seq.arm_moves |= arm_moves(run)
    seq.wall_s = round(time.monotonic() - started, 3)
    seq.problems = problems(seq, out, threads, sim) + found + _result_problems(seq, out)
    return seq


def _send_and_wait(bench: ActionBench, plan, accepted, cancel_asked, cancel_answered,
                   cancel_answer, out: dict) -> list[str]:
    """Send the goal; spin the client on this thread until its result (bounded), sending the
    operator's cancel when asked; set ``accepted`` once the node accepted it. Fills ``out``: the result's status and when it and the node's
    report came (wall)."""
    ex = bench.client_exec
    future = bench.client.send_goal_async(combined_goal(plan))
    ex.spin_until_future_complete(future, timeout_sec=ANSWER_S)
    if not future.done():
        return [f"no answer to the goal within {ANSWER_S} s"]
    handle = future.result()
    if not handle.accepted:
        return ["the goal was rejected (the arms were home: it should run)"]
    accepted.set()
    result_future = handle.get_result_async()
    cancel_future = None
    deadline = time.monotonic() + GOAL_S
    while not result_future.done() and time.monotonic() < deadline:
        ex.spin_once(timeout_sec=0.01)
        if bench.server.last_report is not None and "report_at" not in out:
            out["report_at"] = time.monotonic()
        if cancel_asked.is_set() and cancel_future is None:
            cancel_future = handle.cancel_goal_async()
            out["cancel_sent"] = True
        if cancel_future is not None and cancel_future.done() and not cancel_answered.is_set():
            response = cancel_future.result()
            cancel_answer["accepted"] = bool(response.goals_canceling)
            cancel_answered.set()
    if cancel_future is not None and not cancel_answered.is_set():
        ex.spin_until_future_complete(cancel_future, timeout_sec=ANSWER_S)
        if cancel_future.done():
            cancel_answer["accepted"] = bool(cancel_future.result().goals_canceling)
        cancel_answered.set()
    if not result_future.done():
        return [f"no result within {GOAL_S} s of sending the goal"]
    out["result_at"] = time.monotonic()
    out.setdefault("report_at", out["result_at"] if bench.server.last_report else None)
    out["status"] = result_future.result().status
    out["error_string"] = result_future.result().result.error_string
    return []


def _result_problems(seq: Sequence, out: dict) -> list[str]:
    """What the goal's result broke of the module docstring's rules (empty: none)."""
    if "status" not in out:
        return []   # said by _send_and_wait
    found = []
    status, report = out["status"], seq.report
    if status not in TERMINAL:
        found.append(f"the goal's result has status {status}, not a terminal one")
    if report is None:
        return found + [f"a result came but the node made no report: "
                        f"{out.get('error_string', '')!r}"]
    late = out["result_at"] - out["report_at"]
    if late > RESULT_DUE_S:
        found.append(f"the result came {late:.2f} s after the node's report")
    if (status == GoalStatus.STATUS_SUCCEEDED) != report.succeeded:
        found.append(f"result {TERMINAL.get(status, status)} for a report "
                     f"{report.status.value}")
    if status == GoalStatus.STATUS_CANCELED and not (
            out.get("cancel_sent") and report.status in (ExecutionStatus.CANCELED,
                                                         ExecutionStatus.STOPPED)):
        found.append(f"result canceled; cancel sent: {bool(out.get('cancel_sent'))}, report "
                     f"{report.status.value}")
    for req in seq.requests:
        if req.action == "cancel" and req.answer is True and not (
                any(s.kind is GoalKind.STOP and s.reason == REASONS["cancel"]
                    for s in report.stops)
                or report.status in (ExecutionStatus.CANCELED, ExecutionStatus.FAILED,
                                     ExecutionStatus.STOPPED)):
            found.append(f"cancel at {req.at:.3f} accepted; the report shows no stop "
                         f"({report.status.value})")
    return found


def main() -> int:
    return run_and_report(ActionBench, __doc__.split("\n\n")[0], 200,
                          "tiny pair, in-process simulator at 2x real time, sim time, Fast DDS "
                          "loopback, through the execution node's combined action, services "
                          "and speed topic")


if __name__ == "__main__":
    raise SystemExit(main())
