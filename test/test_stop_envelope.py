"""Stop envelopes (check/stop_envelope.py): stop limits in the configuration, enforced before
motion by slowing the plan only where a stop would pass them, or refusing by name.

The slowed plan's stops are checked against an independent reference: ``check/stop_distances
.stop_profile`` (one ``plan_ramp`` per request, the executor's own ramp; the hand's path from
the slowed plan's own kinematics, not through the slowing's plan-time map) on a finer, offset
request grid."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from mj_manipulator_ros.check.stop_distances import stop_profile
from mj_manipulator_ros.check.stop_envelope import HandPaths, predict
from mj_manipulator_ros.check.stop_fit import StopLimitError, fit_stop_limits
from mj_manipulator_ros.core.config import config_from_mapping
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.core.validation import validate_plan
from mj_manipulator_ros.model.limits import load_config_with_model
from mj_manipulator_ros.model.scene import scene_for
from mj_manipulator_ros.resources import config_file, share_dir


#: the kinematic envelope: no allowance for the arm's own response (the simulated servos' are
#: in sim_openarm.yaml; test_measured_stops.py checks them against the simulator), a hold's
#: stop time the default's: what stop_profile, the reference here, computes
KINEMATIC = {"stop_settle_s": 0.0, "hold_settle_s": 0.05, "tracking_lag_s": 0.0,
             "stop_overtravel_m": 0.0}


def openarm(**execution):
    config = load_config_with_model(config_file("sim_openarm.yaml"))
    return dataclasses.replace(config, execution=dataclasses.replace(
        config.execution, **{**KINEMATIC, **execution}))


def crossing():
    return load_plan(share_dir() / "config/plans/openarm_crossing.yaml")


def test_limits_are_read_per_arm_with_the_execution_as_default() -> None:
    config = config_from_mapping({
        "arms": [{"name": "l", "joint_names": ["a"], "max_stop_time_s": 0.4},
                 {"name": "r", "joint_names": ["b"]}],
        "execution": {"max_stop_distance_m": 0.1}})
    assert config.stop_limits("l") == (0.4, 0.1)
    assert config.stop_limits("r") == (None, 0.1)
    with pytest.raises(ConfigError, match=r"arms\[0\]\.max_stop_distance_m"):
        config_from_mapping({"arms": [{"name": "l", "joint_names": ["a"],
                                       "max_stop_distance_m": -0.1}]})


@pytest.mark.slow
def test_the_crossing_plan_is_slowed_where_needed_and_every_stop_then_meets_the_limits() -> None:
    limit_t, limit_d = 0.5, 0.10
    config = openarm(max_stop_time_s=limit_t, max_stop_distance_m=limit_d)
    scene = scene_for(config)
    plan = crossing()
    before = stop_profile(plan, config, scene, every=0.05)
    worst = before.worst()
    assert worst["stop_time_s"][0] > limit_t or max(
        worst[f"{a}_hand_travel_m"][0] for a in plan.arm_names) > limit_d, worst  # not vacuous

    fit = fit_stop_limits(plan, config, scene)
    slowed = fit.plan
    assert fit.slowed and slowed.duration > plan.duration, fit.summary()
    validate_plan(slowed, config)                       # within every joint's limits
    # slowed only where needed: some of the plan still runs at full speed
    assert sum(b - a for a, b, _f in fit.slowed) < plan.duration
    # the reference, on the slowed plan itself, on requests the fit never looked at
    after = stop_profile(slowed, config, scene, every=0.02,
                         requests=np.arange(0.013, slowed.duration, 0.02))
    assert after.stop_time.max() <= limit_t + 1e-9, after.summary()
    for arm in plan.arm_names:
        assert after.hand_travel[arm].max() <= limit_d + 1e-9, (arm, after.summary())
    # a slower speed (--speed, ~/speed_scaling) keeps them too
    assert predict(slowed, config, HandPaths(slowed, scene), speed=0.5).fits(config).all()
    # the same path: each arm's waypoints lie on its original path (a dense sampling of it)
    dense = np.arange(0.0, plan.duration + 5e-5, 5e-5)
    for arm in plan.arm_names:
        path, _, _ = sample(plan[arm], dense)
        for p in slowed[arm].positions[::7]:
            assert np.abs(path - p).max(axis=1).min() < 2e-4, arm
    # in sync: one time grid, and at each waypoint every arm at the same original plan time
    assert len({tuple(slowed[a].times) for a in plan.arm_names}) == 1
    s_of = fit.plan_times
    assert s_of[0] == 0.0 and abs(s_of[-1] - plan.duration) < 1e-9 and np.all(np.diff(s_of) > 0)
    for arm in plan.arm_names:
        original, _, _ = sample(plan[arm], s_of)
        assert np.abs(original - slowed[arm].positions).max() < 1e-9, arm


def test_a_limit_no_speed_can_meet_is_refused_by_name() -> None:
    config = openarm(max_stop_time_s=0.04)   # below every hold's stop time (0.05 s)
    with pytest.raises(StopLimitError) as err:
        fit_stop_limits(crossing(), config, scene_for(config))
    text = str(err.value)
    assert "arm 'left'" in text and "plan time 0.00 s" in text and "hold stop" in text \
        and "0.050 s" in text and "0.04 s" in text and "nothing was sent" in text, text

    config = openarm(max_stop_distance_m=1e-4, min_speed_factor=0.2)
    with pytest.raises(StopLimitError) as err:
        fit_stop_limits(crossing(), config, scene_for(config))
    text = str(err.value)
    assert "even at the lowest speed allowed (execution.min_speed_factor 0.2)" in text, text
    assert "carries its hand" in text and "max_stop_distance_m" in text, text


def test_without_limits_nothing_changes_and_nothing_is_computed() -> None:
    config = openarm()
    plan = crossing()
    fit = fit_stop_limits(plan, config, scene=None)     # no scene needed: nothing computed
    assert fit.plan is plan and not fit.slowed


def test_the_prediction_is_the_reference_at_full_speed() -> None:
    """The fast prediction (every request together) against the slow reference on the same
    requests: the same stop times and hand travel."""
    config = openarm()
    scene = scene_for(config)
    plan = crossing()
    env = predict(plan, config, HandPaths(plan, scene))
    ref = stop_profile(plan, config, scene, requests=env.request)
    ok = ~np.isnan(env.controlled_time)
    assert ok.sum() > 0.9 * ok.size
    assert np.allclose(env.controlled_time[ok], ref.stop_time[ok], atol=2e-3)
    for arm in plan.arm_names:
        assert np.allclose(env.controlled_travel[arm][ok], ref.hand_travel[arm][ok], atol=1e-3)


def _tiny(tmp_path, **execution):
    """The tiny pair's executor configuration with every joint limited in acceleration (8
    rad/s^2: the swings keep within it, and every ramp is bound by it) and ``execution``."""
    from mj_manipulator_ros.sim.sim_config import sim_config
    from tiny_arm import tiny_mapping

    mapping = tiny_mapping(tmp_path, execution={"use_sim_time": True, **execution})
    for arm in mapping["arms"]:
        for limits in arm["joint_limits"].values():
            limits["acceleration"] = 8.0
    return sim_config(config_from_mapping(mapping)).executor


@pytest.mark.slow
def test_execute_runs_the_plan_slowed_for_the_limits_and_refuses_one_that_cannot_fit(
        tiny_sim, ros, tmp_path) -> None:
    from mj_manipulator_ros.check.preflight import preflight_for
    from mj_manipulator_ros.ros.executor import MultiArmExecutor
    from test_execution_watch import swing_plan

    sim = tiny_sim()
    plan = swing_plan(duration=1.5, amplitude=0.6)
    free = _tiny(tmp_path)
    full = predict(plan, free, HandPaths(plan, scene_for(free)))
    worst = max(full.worst()[f"{a}_hand_travel_m"] for a in plan.arm_names)
    config = _tiny(tmp_path, max_stop_distance_m=round(0.6 * worst, 4))
    with MultiArmExecutor(config, context=ros.context, preflight=preflight_for(config)) as ex:
        report = ex.execute(plan, record=str(tmp_path / "bag"))
        assert report.succeeded, report.summary()
        assert report.stop_limits.startswith("slowed for the stop limits"), report.stop_limits
        # the bag's copy of the report says it too (regression: it did not)
        from bag_reader import read_bag
        inside = json.loads(read_bag(tmp_path / "bag").metadata["custom_data"]["report"])
        assert inside["stop_limits"] == report.stop_limits, inside["stop_limits"]
        assert "stop limits: slowed" in report.summary()
        ran = max(r.result_at for r in report.arms.values()) - report.start_stamp
        assert ran > plan.duration * 1.05, (ran, report.stop_limits)

        goals = {a: len(s.tickets) for a, s in sim.arms.items()}
        impossible = _tiny(tmp_path, max_stop_distance_m=1e-5)
        with MultiArmExecutor(impossible, context=ros.context,
                              preflight=preflight_for(impossible)) as strict:
            with pytest.raises(StopLimitError, match="carries its hand"):
                strict.execute(plan)
        assert {a: len(s.tickets) for a, s in sim.arms.items()} == goals   # nothing sent


def test_limits_with_the_gate_off_are_refused_at_start_up(tmp_path) -> None:
    from mj_manipulator_ros.check.preflight import preflight_for

    config = _tiny(tmp_path, max_stop_time_s=0.5, preflight_check=False)
    with pytest.raises(ConfigError, match="the pre-flight gate is what enforces them"):
        preflight_for(config)


@pytest.mark.parametrize("limits", [(0.5, 0.10), (0.6, 0.10), (None, 0.08), (0.7, 0.12),
                                    (0.45, None)])
def test_the_first_slowing_of_the_crossing_plan_is_enough(limits, monkeypatch) -> None:
    """The speeds the fit first tries hold from one start lead before each request that needs
    them to one lead after it (a stop asked there keeps the plan a lead and ramps from the
    speed then): the slowed plan's own stops then fit, with no further round of prediction
    (each costs a prediction of every stop of the slowed plan). A first version held the speed
    only before the request: 2-3 rounds for these limits."""
    import mj_manipulator_ros.check.stop_fit as stop_fit

    rounds = []
    real = stop_fit.predict

    def counted(plan, config, paths, *args, original=None, **kwargs):
        if original is not None:   # a prediction of a slowed plan: one round
            rounds.append(plan.duration)
        return real(plan, config, paths, *args, original=original, **kwargs)

    monkeypatch.setattr(stop_fit, "predict", counted)
    t_max, d_max = limits
    config = openarm(max_stop_time_s=t_max, max_stop_distance_m=d_max)
    plan = crossing()
    fit = stop_fit.fit_stop_limits(plan, config, scene_for(config))
    assert fit.slowed, fit.summary()                    # not vacuous: the limits bind
    assert len(rounds) == 1, (limits, rounds)
    assert fit.worst_after["stop_time_s"] <= (t_max or np.inf)
