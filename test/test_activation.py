"""The simulated controller's activation (``sim.arms.<arm>.start_active: false``): inactive it
refuses goals and the arm holds its initial pose; activated it holds the measured position, or
with the ``activation_command`` fault what the fault names (openarm_ros2#66: every joint
commanded toward zero at activation), and the arm moves there; deactivated it holds where the
arm is. Physics stepped synchronously (every controller kind), then the services over DDS."""

from __future__ import annotations

import time

import numpy as np
import pytest

from mj_manipulator_ros.core.config import config_from_mapping
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.sim_config import sim_config

from tiny_arm import swing, tiny_mapping

START = {"left_j1": 0.6, "left_j2": -0.4, "right_j1": 0.3}


def config(tmp_path, kind: str = "position", faults: dict | None = None, start=START,
           **mapping):
    inactive = {"controller": kind, "start_active": False}
    data = tiny_mapping(tmp_path, sim={"arms": {"left": inactive, "right": {"controller": kind}},
                                       "faults": faults or {}, **mapping})
    data["scene"]["initial_positions"] = dict(start)
    return sim_config(config_from_mapping(data, "t"))


def physical(sim: SharedModel, arm: str = "left") -> np.ndarray:
    return sim.data.qpos[sim.scene.arms[arm].qpos_adr].copy()


def cycles(sim: SharedModel, seconds: float) -> None:
    for _ in range(int(round(seconds / sim.control_period))):
        sim.step_cycle()


@pytest.mark.parametrize("kind", ["position", "torque"])
def test_inactive_holds_activated_holds_the_measured_pose(tmp_path, kind) -> None:
    sim = SharedModel.from_config(config(tmp_path, kind))
    cycles(sim, 0.3)
    before = physical(sim)
    assert not sim.controllers["left"].follower.activated
    assert sim.controllers["right"].follower.activated
    done = sim.controllers["left"].follower.request_activation(True)
    assert not done.is_set()            # applied by the physics thread, at its next cycle
    cycles(sim, 0.5)
    assert done.is_set() and sim.controllers["left"].follower.activated
    assert np.abs(physical(sim) - before).max() < 1e-3


@pytest.mark.parametrize("kind", ["position", "torque"])
def test_a_zeroed_command_at_activation_drives_the_joint_to_zero_until_deactivated(
        tmp_path, kind) -> None:
    """left_j1 held at 0.6 rad; activated with the fault, its controller holds 0 for it: the
    joint turns toward 0 (left_j2, not named, far less); deactivated 50 ms later, the arm holds
    where it was then (it does not go on to 0; its overshoot returns)."""
    sim = SharedModel.from_config(config(tmp_path, kind,
                                         {"left": {"activation_command": {"left_j1": 0.0}}}))
    cycles(sim, 0.3)
    before = physical(sim)
    sim.controllers["left"].follower.request_activation(True)
    cycles(sim, 0.05)
    moved = physical(sim) - before
    # toward 0; j2, not named, only by the reaction of j1's acceleration
    assert moved[0] < -0.05 and abs(moved[1]) < 0.1 * abs(moved[0]), moved
    sim.controllers["left"].follower.request_activation(False)
    cycles(sim, 0.6)
    after = physical(sim)
    # back at (within a cycle's travel of) where it was when deactivated, far from 0
    assert after[0] > 0.1 and np.abs(after - (before + moved)).max() < 0.02, (before + moved,
                                                                               after)


def test_the_fault_names_joints_of_the_arm(tmp_path) -> None:
    from mj_manipulator_ros.core.errors import ConfigError
    with pytest.raises(ConfigError, match=r"activation_command: 'left_j9' is not a joint of arm "
                                          r"'left'; its joints: \['left_j1', 'left_j2'\]"):
        config(tmp_path, faults={"left": {"activation_command": {"left_j9": 0.0}}})


def test_the_services_switch_the_controller_and_goals_wait_for_it(ros, tmp_path) -> None:
    """Over DDS: a plan for both arms is refused while left's controller is inactive (its goal
    rejected, nothing moved); ``<controller node>/activate`` answers once active; the plan then
    runs; ``/deactivate`` makes it refuse again."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_srvs.srv import Trigger

    from mj_manipulator_ros.core.report import ExecutionStatus
    from mj_manipulator_ros.ros.executor import MultiArmExecutor
    from mj_manipulator_ros.sim.arm_server import controller_node_name
    from mj_manipulator_ros.sim.sim_node import SimNode

    cfg = config(tmp_path, start={}, real_time_factor=1.0, use_sim_time=False)
    node = SimNode(cfg, context=ros.context).start()
    client = rclpy.create_node("activation_client", context=ros.context)
    spin = SingleThreadedExecutor(context=ros.context)
    spin.add_node(client)
    try:
        name = controller_node_name(node.node.get_name(), "left")

        def call(verb: str) -> Trigger.Response:
            c = client.create_client(Trigger, f"/{name}/{verb}")
            assert c.wait_for_service(timeout_sec=10.0), f"/{name}/{verb} not offered"
            future = c.call_async(Trigger.Request())
            spin.spin_until_future_complete(future, timeout_sec=10.0)
            client.destroy_client(c)
            assert future.done(), f"/{name}/{verb} did not answer"
            return future.result()

        plan = swing(1.0)      # from where the arms hold (every joint 0)
        with MultiArmExecutor(cfg.executor, context=ros.context) as executor:
            before = physical(node.shared)
            refused = executor.execute(plan)
            assert refused.status is not ExecutionStatus.SUCCEEDED, refused.summary()
            assert "reject" in refused.summary().lower(), refused.summary()
            assert np.abs(physical(node.shared) - before).max() < 2e-3
            answer = call("activate")
            assert answer.success and "activated" in answer.message, answer.message
            assert node.shared.controllers["left"].follower.activated
            ran = executor.execute(plan)
            assert ran.status is ExecutionStatus.SUCCEEDED, ran.summary()
            answer = call("deactivate")
            assert answer.success and not node.shared.controllers["left"].follower.activated
    finally:
        spin.shutdown()
        client.destroy_node()
        node.close()
