"""The Annex-B-style stop table (check/stop_table.py, `mj-manipulator-ros stop-table`): each
row's run is the motion it says (one joint at the row's speed through the pose, every other
joint still, within the joints' limits), its prediction is the executor's own stop computed one
request at a time (``check/stop_distances.stop_profile``, the reference) with the
configuration's allowances, and the simulator's stop stays within it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from mj_manipulator_ros.check.preflight import preflight_for
from mj_manipulator_ros.check.stop_distances import stop_profile
from mj_manipulator_ros.check.stop_table import SPEEDS, stop_table
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.core.validation import validate_plan
from mj_manipulator_ros.model.limits import load_config_with_model
from mj_manipulator_ros.model.scene import scene_for
from mj_manipulator_ros.resources import config_file, share_dir

CLI = [sys.executable, "-m", "mj_manipulator_ros.cli"]


@pytest.fixture(scope="module")
def table():
    config = load_config_with_model(config_file("sim_openarm.yaml"))
    plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    gate = preflight_for(config)
    made, runs = stop_table(plan, config, scene_for(config), ["left"],
                            gate=lambda p, held: gate(p, held))
    return config, plan, made, runs


def test_each_row_runs_one_joint_at_its_speed_through_the_pose(table) -> None:
    config, _plan, made, runs = table
    assert len(made.rows) == 7 * 2 * len(SPEEDS)
    assert sum(r.fits for r in made.rows) >= len(made.rows) // 2
    assert {r.why.split(":")[0] for r in made.rows if not r.fits} <= {
        "the joint's range holds no run at this speed", "the run collides"}
    for i, (row_plan, request, others) in runs.items():
        row = made.rows[i]
        validate_plan(row_plan, config)                          # within the joints' limits
        traj = row_plan["left"]
        j = list(traj.joint_names).index(row.joint)
        q, v, _ = sample(traj, [request])
        assert abs(abs(v[0, j]) - row.velocity) < 1e-6, row      # the row's speed there
        assert abs(q[0, j] - row.at) < 1e-6, row
        still = np.delete(traj.positions, j, axis=1)
        assert np.ptp(still, axis=0).max() == 0.0, row           # every other joint stands
        pose = made.poses["left"][row.pose]
        assert np.allclose(np.delete(pose, j), still[0]), row
        assert set(others) == {"right"}


def test_the_prediction_is_the_executors_stop_one_request_at_a_time(table) -> None:
    config, _plan, made, runs = table
    s = config.execution
    checked = 0
    for i, (row_plan, request, _others) in list(runs.items())[::2]:   # the suite's time
        row = made.rows[i]
        if row.stop != "controlled":
            continue
        ref = stop_profile(row_plan, config, scene_for(config), requests=np.array([request]))
        assert abs(row.time - (ref.stop_time[0] + s.stop_settle_s)) < 2e-3, row
        assert row.hand_travel >= ref.hand_travel["left"][0] + s.stop_overtravel_m - 1e-3, row
        checked += 1
    assert checked >= 8


@pytest.mark.slow
def test_the_simulated_position_servos_stop_within_the_controlled_rows(table) -> None:
    """The simulator (the configuration's position servos, the row's plan run from rest) against
    the prediction, on the rows of the extended pose that are controlled stops."""
    from mj_manipulator_ros.core.time_scaling import config_bounds
    from mj_manipulator_ros.sim.sim_config import sim_config
    from mj_manipulator_ros.sim.stop_trial import ArmStop, measure_stop

    config, _plan, made, runs = table
    sim = sim_config(config)
    checked = 0
    for i, (row_plan, request, others) in runs.items():
        row = made.rows[i]
        if row.stop != "controlled" or row.pose != "extended":
            continue
        m = measure_stop(sim, row_plan, config_bounds(row_plan, config), request,
                         {"left": ArmStop.CONTROLLED}, config.execution.start_lead_s,
                         others=others)["left"]
        assert m.settled and m.time_s <= row.time and m.hand_travel_m <= row.hand_travel, \
            (row.joint, row.speed, m)
        assert m.joint_travel > 0.5 * row.joint_travel, (row.joint, row.speed, m)  # it moved
        checked += 1
    assert checked >= 5


def test_the_command_writes_the_predicted_table_and_names_a_wrong_arm(tmp_path) -> None:
    plan = str(share_dir() / "config/plans/openarm_crossing.yaml")
    cfg = str(config_file("sim_openarm.yaml"))
    out = subprocess.run([*CLI, "stop-table", plan, "--config", cfg, "--arm", "middle"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--arm ['middle']: not in the plan" in out.stderr, out.stderr
    out = subprocess.run([*CLI, "stop-table", plan, "--config", cfg, "--arm", "right",
                          "--controllers", "", "--json", str(tmp_path / "t.json"),
                          "--image", str(tmp_path / "t.png")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    assert {r["arm"] for r in doc["rows"]} == {"right"} and len(doc["rows"]) == 42
    assert doc["allowances"]["stop_settle_s"] == 0.31
    assert (tmp_path / "t.png").stat().st_size > 10_000
