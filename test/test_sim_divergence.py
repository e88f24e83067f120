"""A simulator whose physics diverges stops and says so, instead of publishing a reset or a NaN
state as the robot's (sim/shared_model.py), ROS-free."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.errors import SimulationDivergedError
from mj_manipulator_ros.resources import config_file
from mj_manipulator_ros.sim.shared_model import SharedModel
from mj_manipulator_ros.sim.sim_config import sim_config


def shared(config: str = "sim_openarm.yaml") -> SharedModel:
    s = SharedModel.from_config(sim_config(load_config(config_file(config))))
    s.add_observer(100.0, lambda snap: None)   # someone reads the state
    return s


@pytest.mark.parametrize("config", ["sim_openarm.yaml", "sim_openarm_twin.yaml"])
def test_a_healthy_hold_runs_on(config) -> None:
    s = shared(config)
    for _ in range(500):
        s.step_cycle()
    assert np.isfinite(s.data.qpos).all()


def test_a_state_mujoco_resets_stops_the_simulator_by_name() -> None:
    """A huge (or NaN) velocity makes MuJoCo reset the state to the model's zero pose: finite,
    and false."""
    s = shared()
    s.step_cycle()
    s.data.qvel[s.scene.arms["left"].dof_adr[3]] = 1e30
    with pytest.raises(SimulationDivergedError, match="mjWARN_BADQVEL .the state was reset"):
        for _ in range(50):
            s.step_cycle()


@pytest.mark.parametrize("value,named", [(np.nan, "not finite"), (5e4, "not a motion")])
def test_a_twin_gone_wild_stops_the_simulator_by_name(value, named) -> None:
    """Under the co-simulation MuJoCo's integrator never runs: the actuator twin writes its own
    state; a NaN there stays NaN, and a diverging one grows through finite values (seen in a
    rehearsal: 2e10 rad) that MuJoCo never checks."""
    s = shared("sim_openarm_twin.yaml")
    s.step_cycle()
    s.cosim.twin.v[3] = value
    with pytest.raises(SimulationDivergedError, match=named):
        for _ in range(50):
            s.step_cycle()
