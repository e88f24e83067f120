"""Another action server of an arm's action name in the domain (a second driver, a restarted
one's lingering participant) is not that arm's controller leaving: while it is discovered or
removed endpoint by endpoint, or while its service QoS does not match the client's, rclpy's
``server_is_ready`` reads False with the arm's own server still serving (ros/arm_client.py:
``ArmChannel.server_gone``).

The namesake here is a real action server in its own DDS participant whose goal service is
transient-local: the arm's volatile request writer never matches its request reader, so the
client sees two servers and unequal matches, the state a namesake shows for a moment while it
comes and goes, held for as long as it stays (measured: up to 0.6 s of "not ready" while a
second process serving the name started; a moment again 20 s after it was killed, when its
lease ran out: CI's two ``controller_gone`` failures of 2026-12-07).
"""

from __future__ import annotations

import threading

import rclpy
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionServer
from rclpy.qos import DurabilityPolicy, QoSProfile

from mj_manipulator_ros.core.report import ArmStatus, FailureReason
from mj_manipulator_ros.ros.context import RosContext
from mj_manipulator_ros.ros.executor import MultiArmExecutor

from plan_moment import at_plan_time
from test_execution_watch import swing_plan
from tiny_arm import tiny_config

#: plan time (s) the namesake comes and goes, in a swing of SWING_S
COMES_S, GOES_S, SWING_S = 0.3, 1.4, 2.0



def _namesake(node, action: str, held: dict):
    """What starts a namesake: a real action server of ``action`` on ``node`` (its goal
    service transient-local, so the client's volatile writer never matches it), kept in
    ``held["server"]``."""
    def comes() -> None:
        held["server"] = ActionServer(
            node, FollowJointTrajectory, action, lambda handle: FollowJointTrajectory.Result(),
            goal_service_qos_profile=QoSProfile(depth=10,
                                                durability=DurabilityPolicy.TRANSIENT_LOCAL))
    return comes

def test_a_namesake_server_coming_and_going_is_not_the_controller_leaving(tiny_sim, ros,
                                                                           tmp_path) -> None:
    """The right arm's namesake is served from 0.3 s to 1.4 s of a 2 s swing: both arms
    succeed (regression: the right arm failed ``controller_gone`` at its first look)."""
    tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True,
                                              "black_box_s": 0.0}).executor
    action = config.arm("right").action_name
    other = RosContext()
    node = rclpy.create_node("namesake", context=other.context)
    held: dict[str, object] = {}
    seen: list[bool] = []   # was the right arm's server "not ready" while the namesake served?

    comes = _namesake(node, action, held)

    try:
        with MultiArmExecutor(config, context=ros.context) as executor:
            channel = executor.channels["right"]

            def goes() -> None:
                seen.append(not channel.client.server_is_ready())
                held.pop("server").destroy()
            threads = [at_plan_time(executor, COMES_S, comes),
                       at_plan_time(executor, GOES_S, goes)]
            report = executor.execute(swing_plan(duration=SWING_S))
            for thread in threads:
                thread.join(10.0)
            assert not any(t.is_alive() for t in threads), "a plan-moment thread did not end"
    finally:
        if "server" in held:
            held.pop("server").destroy()
        node.destroy_node()
        other.close()
    assert seen == [True], (f"the namesake never made the right arm's server read not ready "
                            f"(seen {seen}): this test no longer holds the state it is about")
    assert report.succeeded, report.summary()
    assert report.arms["right"].status is ArmStatus.SUCCEEDED, report.summary()
    assert report.first_failure is None or \
        report.first_failure.reason is not FailureReason.CONTROLLER_GONE, report.summary()


def test_the_controller_leaving_while_a_namesake_stays_still_ends_the_run(tiny_sim, ros,
                                                                          tmp_path) -> None:
    """The adversarial case of the verdict above: a namesake arrives 0.3 s into the swing and
    stays, and the right arm's own server is destroyed at 0.6 s (the graph still shows a server
    of the name). The run must not succeed, and every arm must end: the liveness watch or the
    result deadline fails it, and the left arm is stopped. (A namesake there before the start
    keeps the server "not ready": no goal is sent, server_unavailable.)"""
    sim = tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True,
                                              "black_box_s": 0.0}).executor
    action = config.arm("right").action_name
    other = RosContext()
    node = rclpy.create_node("namesake", context=other.context)
    held: dict[str, object] = {}

    comes = _namesake(node, action, held)
    try:
        with MultiArmExecutor(config, context=ros.context) as executor:
            threads = [at_plan_time(executor, COMES_S, comes),
                       at_plan_time(executor, 0.6, sim.arms["right"].destroy)]
            report = executor.execute(swing_plan(duration=SWING_S))
            for thread in threads:
                thread.join(10.0)
    finally:
        if "server" in held:
            held.pop("server").destroy()
        node.destroy_node()
        other.close()
    assert not report.succeeded, report.summary()
    f = report.first_failure
    assert f is not None and f.arm == "right", report.summary()
    assert report.arms["right"].status is not ArmStatus.SUCCEEDED, report.summary()
    assert report.arms["left"].status in (ArmStatus.CANCELED, ArmStatus.STOPPED), \
        report.summary()
