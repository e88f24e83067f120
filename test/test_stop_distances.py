"""Stop distances for every plan time (check/stop_distances.py), against an independent
reference: a plan that turns one joint about a fixed axis, where the hand's travel is the
joint's travel times the hand's distance from that axis, and the rest time follows the ramp."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from mj_manipulator_ros.check.stop_distances import stop_profile
from mj_manipulator_ros.core.interpolation import rest_to_rest, sample
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.model.limits import load_config_with_model
from mj_manipulator_ros.model.scene import scene_for
from mj_manipulator_ros.resources import config_file


@pytest.mark.slow
def test_one_turning_joint_gives_the_arc_and_the_ramps_rest() -> None:
    config = load_config_with_model(config_file("sim_openarm.yaml"))
    scene = scene_for(config)
    model = scene.model
    data = mujoco.MjData(model)
    start = {}
    for arm in ("left", "right"):
        b = scene.arms[arm]
        start[arm] = np.array(data.qpos[b.qpos_adr])
    t = np.linspace(0.0, 4.0, 201)
    q0 = start["left"].copy()
    q1 = q0.copy()
    q1[0] += 0.6                                  # left joint 1 only
    p, v = rest_to_rest(q0, q1, t)
    plan = MultiArmPlan({
        "left": ArmTrajectory(config.arm("left").joint_names, t, p, v),
        "right": ArmTrajectory(config.arm("right").joint_names, t,
                               np.repeat(start["right"][None], t.size, 0),
                               np.zeros((t.size, start["right"].size)))})
    profile = stop_profile(plan, config, scene, every=0.25)
    # the hand's distance from joint 1's axis, from the model at the start pose
    b = scene.arms["left"]
    mujoco.mj_kinematics(model, data)
    mujoco.mj_comPos(model, data)
    joint = int(b.joint_ids[0])
    hand = int(model.jnt_bodyid[b.joint_ids[-1]])
    axis, anchor = data.xaxis[joint], data.xanchor[joint]
    rel = data.xpos[hand] - anchor
    radius = float(np.linalg.norm(rel - np.dot(rel, axis) * axis))
    assert radius > 0.05
    lead = config.execution.start_lead_s
    for k, s in enumerate(profile.request):
        s_req, rest = float(s), float(profile.rest[k])
        a, _, _ = sample(plan["left"], [s_req, rest])
        turned = abs(a[1][0] - a[0][0])            # monotone motion: travel = displacement
        assert profile.joint_travel["left"][k] == pytest.approx(turned, abs=1e-6)
        assert profile.hand_travel["left"][k] == pytest.approx(radius * turned, rel=1e-3,
                                                               abs=1e-6)
        assert profile.joint_travel["right"][k] == 0.0 and profile.hand_travel["right"][k] == 0.0
        # the rest: one lead at speed 1, then the ramp's f0 T / 2 of plan time
        ramp_s = profile.stop_time[k] - lead
        if rest < plan.duration - 1e-9:
            assert rest == pytest.approx(s_req + lead + ramp_s / 2, abs=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("plan", ["openarm_crossing", "openarm_wave"])
def test_check_plan_stops_on_the_shipped_plans(plan, tmp_path) -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    from mj_manipulator_ros.resources import share_dir

    cli = str(Path(sys.executable).with_name("mj-manipulator-ros"))
    png = tmp_path / "stops.png"
    out = subprocess.run([cli, "check-plan", str(share_dir() / f"config/plans/{plan}.yaml"),
                          "--config", str(config_file("sim_openarm.yaml")), "--stops",
                          "--stops-plot", str(png), "--json", "--hold", "4"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    stops = doc["stops"]
    # the band the gate certifies: computed, and wider than the fixed cancel band
    band = doc["stop_band"]
    assert band["skew_s"] == band["controlled_s"] > band["cancel_s"] and band["cancels"] == 0
    # a cancel in the simulated position controllers: the arms run on no further than the
    # gate's default assumption
    hold = doc["hold"]
    assert hold["kinds"] == {"left": "position", "right": "position"}
    assert len(hold["request"]) == 4 and hold["worst_run_on"][0] is not None, hold
    assert hold["worst_run_on"][0] <= band["hold_s"], hold
    assert set(stops["hand_travel"]) == {"left", "right"}
    worst = stops["worst"]
    lead = stops["lead_s"]
    assert lead < worst["stop_time_s"][0] < lead + 1.0
    assert png.stat().st_size > 10000


@pytest.mark.slow
def test_an_arm_that_ignores_its_cancel_is_measured_running_on() -> None:
    """Adversarial: the left controller refuses cancels (a fault) and runs its plan on; the
    measured run-on is the whole settling window, beyond the gate's assumption, and said so;
    the right arm, canceled, stands."""
    import dataclasses

    from mj_manipulator_ros.core.config import load_config
    from mj_manipulator_ros.core.plan_io import load_plan
    from mj_manipulator_ros.resources import share_dir
    from mj_manipulator_ros.sim.hold_overshoot import SETTLE_S, measure_hold
    from mj_manipulator_ros.sim.sim_config import ArmFaults, sim_config

    cfg = sim_config(load_config(config_file("sim_openarm.yaml")))
    cfg = dataclasses.replace(cfg, sim=dataclasses.replace(
        cfg.sim, faults={"left": ArmFaults(ignore_cancel=True)}))
    plan = load_plan(share_dir() / "config/plans/openarm_wave.yaml")
    hold = measure_hold(cfg, plan, [0.75])   # both arms at their fastest there (0.70 rad/s)
    bound = cfg.executor.execution.hold_overshoot_s
    assert hold.run_on["left"][0] == pytest.approx(SETTLE_S, abs=0.02)
    assert hold.travel["left"][0] > 0.05
    assert abs(hold.run_on["right"][0]) <= bound and hold.travel["right"][0] < 0.005
    assert "DOES NOT cover it" in hold.summary(bound)
