"""The stop band the gate certifies is computed from each plan's stopping distances: a plan
clear on time and in the old fixed 250 ms band, whose peers would come to rest further than
that after a failure, is refused naming the pair and the plan times; the shipped plans pass."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.check.failure_band import failure_band, rest_times
from mj_manipulator_ros.check.preflight import PlanRefused, PreflightCheck
from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.resources import config_file, share_dir
from test_replay import T, brute_force_band, checker_for, plan_of, scene_config

TURN_S = 0.8


def take_turns(gap: float) -> MultiArmPlan:
    """The left arm swings toward the right one and back, then, ``gap`` s after it is back, the
    right toward the left and back (cubic: positions and velocities)."""
    t = np.linspace(0.0, 0.2 + 2 * TURN_S + gap, 121)

    def turn(t0: float, amplitude: float):
        s = np.clip((t - t0) / TURN_S, 0.0, 1.0)
        inside = (t > t0) & (t < t0 + TURN_S)
        q = amplitude * np.sin(np.pi * s) ** 2
        dq = np.where(inside, amplitude * np.pi / TURN_S * np.sin(2 * np.pi * s), 0.0)
        zero = np.zeros_like(t)
        return np.column_stack([q, zero]), np.column_stack([dq, zero])

    (ql, vl), (qr, vr) = turn(0.1, 0.8), turn(0.1 + TURN_S + gap, -0.8)
    return MultiArmPlan({"left": ArmTrajectory(("left_j1", "left_j2"), t, ql, vl),
                         "right": ArmTrajectory(("right_j1", "right_j2"), t, qr, vr)})


def turns_config(tmp_path):
    # no acceleration limits in the tiny scene's configuration: the stop ramps at this one
    return scene_config(tmp_path, separation=0.55).with_execution(stop_acceleration=30.0)


def test_a_plan_whose_peers_stop_beyond_the_fixed_band_is_refused(tmp_path) -> None:
    cfg = turns_config(tmp_path)
    plan = take_turns(gap=0.0)
    checker, _ = checker_for(cfg)
    assert checker.check(plan).collision_free
    assert checker.check(plan, mode="band", skew=0.25).collision_free  # the old fixed band
    band = failure_band(plan, cfg)
    # computed, not assumed: detection + start lead + the ramp, beyond the fixed 250 ms
    assert band.controlled_s > band.detection_s + band.lead_s and band.skew_s == band.controlled_s
    assert band.cancels == 0 and band.skew_s > 0.25
    # an independent reference: a dense brute force of the computed band touches
    reference, where = brute_force_band(checker, plan, band.skew_s, step=0.01)
    assert reference < checker.margin, where
    gate = PreflightCheck(cfg)
    with pytest.raises(PlanRefused, match="apart in plan time") as info:
        gate(plan)
    b = info.value.report.band_collision
    assert b["arms"] == ["left", "right"] and abs(b["t1"] - b["t2"]) <= band.skew_s + 1e-9
    assert f"{b['t1']:.3f} s" in str(info.value) and "peers come to rest" in str(info.value)
    assert info.value.band == band


def test_a_plan_with_room_for_its_stops_is_accepted(tmp_path) -> None:
    cfg = turns_config(tmp_path)
    plan = take_turns(gap=0.2)
    gate = PreflightCheck(cfg)
    assert gate(plan).collision_free
    assert gate.last_band is not None and gate.last_band.skew_s > 0.25


def test_rest_times_are_the_executors_ramps(tmp_path) -> None:
    """Each rest is at least one start lead past the request (at full speed the arms keep the
    plan that long) and a stop asked at the end rests at the end."""
    cfg = turns_config(tmp_path)
    plan = take_turns(gap=0.2)
    requests = np.array([0.0, 0.5, 1.0, plan.duration])
    rest = rest_times(plan, cfg, requests)
    lead = cfg.execution.start_lead_s
    assert np.all(rest[:-1] >= requests[:-1] + lead - 1e-9)
    assert rest[-1] == pytest.approx(plan.duration)


def test_failure_times_without_a_controlled_stop_count_as_cancels(tmp_path) -> None:
    """A plan whose own acceleration grows beyond the stop's bound (an oscillation at 10 rad/s
    of amplitude 0.05 t rad: up to 10 rad/s^2 against stop_acceleration 4): from the failure
    times where it is, no ramp within the limits exists (the executor cancels every arm
    there): counted, covered by the cancel band, never an error. (A plan of positions only is
    stopped from any plan time, as it is sent: test_time_scaling.py.)"""
    cfg = scene_config(tmp_path).with_execution(stop_skew_s=1.0)   # stop_acceleration 4
    t = np.linspace(0.0, 2.0, 201)
    q = np.column_stack([0.05 * t * np.sin(10.0 * t), np.zeros(t.size)])
    v = np.column_stack([0.05 * np.sin(10.0 * t) + 0.5 * t * np.cos(10.0 * t),
                         np.zeros(t.size)])
    plan = MultiArmPlan({arm: ArmTrajectory((f"{arm}_j1", f"{arm}_j2"), t, q, v)
                         for arm in ("left", "right")})
    band = failure_band(plan, cfg)
    assert 0 < band.cancels < band.failures
    assert band.skew_s == 1.0 > band.controlled_s and "canceled" in band.set_by


def test_the_band_needs_the_progress_watch(tmp_path) -> None:
    """Without the watch on arms out of step nothing bounds the band: an error naming the
    setting, from the gate too (its width is computed beside the synchronized replay); a plan
    that collides on time is refused for that, as before (the band is not its verdict)."""
    cfg = turns_config(tmp_path).with_execution(max_progress_skew_s=0.0)
    with pytest.raises(ConfigError, match="max_progress_skew_s"):
        failure_band(take_turns(gap=0.2), cfg)
    gate = PreflightCheck(cfg)
    with pytest.raises(ConfigError, match="max_progress_skew_s"):
        gate(take_turns(gap=0.2))
    both = take_turns(gap=0.2)   # the right arm swings toward the left at the left's time
    both = MultiArmPlan({"left": both["left"], "right": ArmTrajectory(
        ("right_j1", "right_j2"), both["left"].times, -both["left"].positions,
        -both["left"].velocities)})
    with pytest.raises(PlanRefused, match="collides when replayed synchronized"):
        gate(both)


@pytest.mark.parametrize("name", ["openarm_crossing", "openarm_wave"])
def test_the_shipped_plans_pass_their_computed_band(name) -> None:
    cfg = load_config(config_file("sim_openarm.yaml"))
    plan = load_plan(share_dir() / "config" / "plans" / f"{name}.yaml")
    gate = PreflightCheck(cfg)
    assert gate(plan).collision_free
    band = gate.last_band
    assert band.skew_s == band.controlled_s > cfg.execution.stop_skew_s and band.cancels == 0


def test_a_plans_band_is_computed_once_and_a_held_arm_never_changes_it(tmp_path, monkeypatch
                                                                        ) -> None:
    """The gate keeps each plan's band by the plan's fingerprint: the same plan again is not
    recomputed, a plan differing in one value is; a one-arm plan's band (the other arm held
    where it stands) equals the band computed on the plan with that arm standing still."""
    from mj_manipulator_ros.check import preflight
    from mj_manipulator_ros.check.preflight import with_held_arms

    cfg = turns_config(tmp_path)
    gate = PreflightCheck(cfg)
    computed = []
    monkeypatch.setattr(preflight, "failure_band",
                        lambda plan, config: computed.append(plan) or failure_band(plan, config))
    plan = take_turns(gap=0.4)
    first = gate.band(plan)
    assert gate.band(take_turns(gap=0.4)) is first and len(computed) == 1
    left = plan["left"]
    nudged = left.positions.copy()
    nudged[7, 0] += 1e-9
    moved = MultiArmPlan({"left": ArmTrajectory(left.joint_names, left.times, nudged,
                                                left.velocities), "right": plan["right"]})
    assert gate.band(moved) is not first and len(computed) == 2
    alone = MultiArmPlan({"left": plan["left"]})
    held = {"right": np.array([0.3, -0.2])}
    reference = failure_band(with_held_arms(alone, held, gate.checker.arms), cfg)
    gate(alone, held)
    assert gate.last_band == reference and computed[-1].arm_names == ("left",)


def test_a_plans_verdict_is_kept_and_never_outlives_a_changed_held_arm(tmp_path, monkeypatch
                                                                        ) -> None:
    """The gate keeps each checked plan's verdict (synchronized and band replays) by the
    fingerprint of the plan as checked: the same plan with the same held arms is not replayed
    again, refused or accepted as before; the same moving arm beside a held arm that stands
    elsewhere is replayed, and refused when it now strikes that arm."""
    cfg = turns_config(tmp_path)
    gate = PreflightCheck(cfg)
    replays = []
    check = gate.checker.check
    monkeypatch.setattr(gate.checker, "check",
                        lambda plan, **kw: replays.append(kw.get("mode")) or check(plan, **kw))
    safe, refused = take_turns(gap=0.4), take_turns(gap=0.0)
    first = gate(safe)
    assert replays == ["synchronized", "band"]
    assert gate(take_turns(gap=0.4)) is first and len(replays) == 2
    with pytest.raises(PlanRefused) as one:
        gate(refused)
    with pytest.raises(PlanRefused) as two:
        gate(refused)
    assert len(replays) == 4 and two.value.report is one.value.report
    # the left arm's turn alone, the right arm held at rest, then where its own turn takes it
    alone = MultiArmPlan({"left": safe["left"]})
    reach = safe["right"].positions[np.argmax(np.abs(safe["right"].positions[:, 0]))]
    gate(alone, {"right": np.zeros(2)})
    assert len(replays) == 6
    assert gate.checker.check(with_held(gate, alone, reach)).collision_free is False
    with pytest.raises(PlanRefused, match="synchronized"):
        gate(alone, {"right": reach})


def with_held(gate: PreflightCheck, plan: MultiArmPlan, right: np.ndarray) -> MultiArmPlan:
    from mj_manipulator_ros.check.preflight import with_held_arms
    return with_held_arms(plan, {"right": right}, gate.checker.arms)



def test_the_gate_computes_each_stop_once_where_stop_limits_are_set(monkeypatch) -> None:
    """With stop limits the gate predicts every stop of the plan it will run (the stop
    envelope), then bands it: the band's stops are the envelope's (its failures detected on
    the envelope's own request times, bit for bit), kept with the plan, not computed again;
    and a band from stops kept is the band computed afresh, figure for figure."""
    import dataclasses

    import mj_manipulator_ros.core.stop_ends as stop_ends_module
    from mj_manipulator_ros.check.stop_envelope import HandPaths, predict
    from mj_manipulator_ros.model.limits import load_config_with_model
    from mj_manipulator_ros.model.scene import scene_for

    config = load_config_with_model(str(config_file("openarm_bimanual.yaml")))
    path = share_dir() / "config/plans/openarm_crossing.yaml"
    plan = load_plan(path)
    computed = []
    real = stop_ends_module._stop_ends

    def counted(plan, bounds, starts, f0):
        computed.append(np.array(starts))
        return real(plan, bounds, starts, f0)

    monkeypatch.setattr(stop_ends_module, "_stop_ends", counted)
    envelope = predict(plan, config, HandPaths(plan, scene_for(config)))
    assert len(computed) == 1 and computed[0].size > 200
    band = failure_band(plan, config)
    # the band computed only the stops the envelope does not ask: at the plan's end
    anew = np.concatenate(computed[1:]) if computed[1:] else np.zeros(0)
    assert np.all(anew >= plan.duration), anew[anew < plan.duration]
    assert envelope.request.size > 200
    monkeypatch.setattr(stop_ends_module, "_stop_ends", real)
    fresh = failure_band(load_plan(path), config)   # a new plan object: nothing kept
    assert dataclasses.asdict(band) == dataclasses.asdict(fresh)
