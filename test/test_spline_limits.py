"""Limits on the reference the controller runs between waypoints (JTC's spline), not only at
the waypoints."""

from __future__ import annotations

import numpy as np
import pytest

from factories import make_config
from mj_manipulator_ros.core.errors import SplineLimitError
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.spline_peaks import segment_peaks
from mj_manipulator_ros.core.validation import plan_problems, validate_plan


def one_arm(times, positions, velocities=None, accelerations=None) -> MultiArmPlan:
    return MultiArmPlan({"left": ArmTrajectory(("left_j0",), np.asarray(times, float),
                                               np.asarray(positions, float)[:, None],
                                               None if velocities is None else np.asarray(velocities, float)[:, None],
                                               None if accelerations is None else np.asarray(accelerations, float)[:, None])})


@pytest.mark.parametrize("quintic, peak", [(False, 3.0), (True, 3.75)])
def test_a_plan_whose_waypoints_pass_but_whose_spline_does_not(quintic, peak) -> None:
    """0 -> 2 rad in 1 s from rest to rest: the mean velocity is the 2 rad/s limit (the old
    checks pass), the cubic peaks at 3.0 and the quintic at 3.75 rad/s."""
    cfg = make_config(("left",), joints=1, velocity=2.0)
    cfg = cfg.with_execution()
    plan = one_arm([0.0, 1.0], [-1.0, 1.0], [0.0, 0.0], [0.0, 0.0] if quintic else None)
    with pytest.raises(SplineLimitError) as info:
        validate_plan(plan, cfg)
    e = info.value
    assert (e.arm, e.index, e.joint) == ("left", 0, "left_j0")
    assert e.value == pytest.approx(peak) and e.speed_factor == pytest.approx(2.0 / peak)
    text = str(e)
    assert "segment 0->1" in text and ("quintic" if quintic else "cubic") in text
    assert f"{2.0 / peak:.3g} or less" in text
    validate_plan(plan.time_scaled(2.0 / peak), cfg)  # the factor it names passes


def test_acceleration_limits_use_the_square_root_factor() -> None:
    from mj_manipulator_ros.core.config import config_from_mapping

    cfg = config_from_mapping({"arms": [{"name": "left", "joint_names": ["left_j0"], "joint_limits": {
        "left_j0": {"lower": -2, "upper": 2, "velocity": 10.0, "acceleration": 4.0}}}]})
    # a rest-to-rest quintic over 2 rad in 1 s peaks at 2 x 10/sqrt(3) = 11.55 rad/s^2
    plan = one_arm([0.0, 1.0], [-1.0, 1.0], [0.0, 0.0], [0.0, 0.0])
    (problem,) = plan_problems(plan, cfg)
    assert "acceleration" in str(problem) and problem.value == pytest.approx(20 / np.sqrt(3), rel=1e-6)
    assert problem.speed_factor == pytest.approx(np.sqrt(4.0 / problem.value))
    validate_plan(plan.time_scaled(problem.speed_factor), cfg)


def test_peaks_equal_a_dense_sampling_of_the_spline() -> None:
    """Independent reference: the spline sampled every 10 us; random segments of every kind."""
    rng = np.random.default_rng(4)
    for kind in ("linear", "cubic", "quintic"):
        for _ in range(5):
            t = np.cumsum(np.r_[0.0, rng.uniform(0.05, 0.5, 5)])
            p = rng.uniform(-1, 1, (6, 3))
            v = rng.uniform(-2, 2, (6, 3)) if kind != "linear" else None
            a = rng.uniform(-5, 5, (6, 3)) if kind == "quintic" else None
            traj = ArmTrajectory(("a", "b", "c"), t, p, v, a)
            peaks = segment_peaks(traj)
            for k in range(5):
                s = np.linspace(t[k], t[k + 1], 20001)[:-1]  # this segment's own samples
                _, vel, acc = sample(traj, s)
                truth = np.abs(vel).max(axis=0)
                if v is not None:  # the segment's own end velocities are the given ones
                    truth = np.maximum(truth, np.maximum(np.abs(v[k]), np.abs(v[k + 1])))
                assert np.allclose(peaks.velocity[k], truth, rtol=1e-6, atol=1e-9)
                if kind != "linear":
                    assert np.allclose(peaks.acceleration[k], np.abs(acc).max(axis=0), rtol=1e-3,
                                       atol=1e-6)
                # never below the sampled truth (an upper-bound check may not underestimate)
                assert np.all(peaks.velocity[k] >= truth * (1 - 1e-9))
                # positions: the segment's own samples and its end waypoint
                pos = np.vstack([sample(traj, s)[0], p[k + 1]])
                assert np.allclose(peaks.position_max[k], pos.max(axis=0), atol=1e-9)
                assert np.allclose(peaks.position_min[k], pos.min(axis=0), atol=1e-9)
                assert np.all(peaks.position_max[k] >= pos.max(axis=0) - 1e-12)
                assert np.all(peaks.position_min[k] <= pos.min(axis=0) + 1e-12)


@pytest.mark.parametrize("quintic", [False, True])
def test_a_spline_that_overshoots_a_position_limit_between_waypoints_is_refused(quintic) -> None:
    """The issue's case, left joint 6 (limit 0.7853): 0 -> 0.7 (velocity 1.1) -> 0.7 (at rest)
    -> 0. Every waypoint is inside; the cubic the controller runs peaks at 0.863 between
    waypoints 1 and 2 (regression: it validated, ran and 'succeeded', the joint stopped by its
    model range). Checked against a dense sampling; no speed factor helps (same path)."""
    from mj_manipulator_ros.core.config import config_from_mapping
    from mj_manipulator_ros.core.errors import JointLimitError

    cfg = config_from_mapping({"arms": [{"name": "left", "joint_names": ["left_j0"], "joint_limits": {
        "left_j0": {"lower": -0.7853, "upper": 0.7853, "velocity": 2.0}}}]})
    plan = one_arm([0.0, 1.0, 2.0, 3.0], [0.0, 0.7, 0.7, 0.0], [0.0, 1.1, 0.0, 0.0],
                   [0.0, 0.0, 0.0, 0.0] if quintic else None)
    dense = sample(plan["left"], np.linspace(0.0, 3.0, 300001))[0][:, 0]
    assert dense.max() > 0.7853  # the fixture overshoots (independent of the checker)
    problems = [p for p in plan_problems(plan, cfg) if isinstance(p, JointLimitError)]
    assert problems, "the overshoot between waypoints was not refused"
    e = problems[0]
    assert (e.arm, e.index, e.joint) == ("left", 1, "left_j0")
    assert e.value == pytest.approx(dense.max(), abs=1e-6)
    assert "upper limit 0.7853" in str(e) and "between the waypoints" in str(e)
    with pytest.raises(JointLimitError):
        validate_plan(plan.time_scaled(0.25), cfg)   # slower runs the same path


def test_a_spline_inside_its_limits_is_not_refused() -> None:
    from mj_manipulator_ros.core.config import config_from_mapping

    cfg = config_from_mapping({"arms": [{"name": "left", "joint_names": ["left_j0"], "joint_limits": {
        "left_j0": {"lower": -0.7853, "upper": 0.7853, "velocity": 2.0}}}]})
    plan = one_arm([0.0, 1.0, 2.0, 3.0], [0.0, 0.7, 0.7, 0.0], [0.0, 0.3, 0.0, 0.0])
    assert sample(plan["left"], np.linspace(0.0, 3.0, 30001))[0].max() <= 0.7853
    validate_plan(plan, cfg)


def test_skipping_segments_that_cannot_have_an_interior_root_changes_no_extreme(
        monkeypatch) -> None:
    """The roots are solved only where one can lie in the segment (core/spline_peaks._roots with
    T): on finely timed plans of every kind, with extremes inside segments, near their ends and
    at them, every extreme equals the one from every root solved (the slow reference)."""
    import mj_manipulator_ros.core.spline_peaks as sp

    rng = np.random.default_rng(11)
    solve_all = sp._roots
    for kind in ("cubic", "quintic"):
        for dt in (0.01, 0.003, 0.2):
            t = np.arange(0.0, 2.0 + dt / 2, dt)
            f = rng.uniform(0.5, 3.0, 3)
            p = np.sin(np.outer(t, f) + rng.uniform(0, 6, 3))      # extremes inside segments
            v = np.cos(np.outer(t, f)) * f if kind != "linear" else None
            if v is not None:
                v[5] = 0.0      # a velocity root at a waypoint (an end of two segments)
                v += rng.normal(0, 0.3, v.shape)
            a = -p * f ** 2 + rng.normal(0, 1.0, p.shape) if kind == "quintic" else None
            traj = ArmTrajectory(("a", "b", "c"), t, p, v, a)
            fast = sp._segment_peaks(traj)
            monkeypatch.setattr(sp, "_roots", lambda d, T=None: solve_all(d))
            slow = sp._segment_peaks(traj)
            monkeypatch.setattr(sp, "_roots", solve_all)
            for name in ("velocity", "acceleration", "position_min", "position_max"):
                np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name),
                                              err_msg=f"{kind} every {dt} s: {name}")


def test_the_roots_of_every_degree_agree_with_numpys_one_polynomial_at_a_time() -> None:
    """Slow reference: ``np.roots`` per element, on random polynomials of degree 0-4 (some
    leading coefficients zero, double roots, no real roots); the real ones, sorted, agree."""
    from mj_manipulator_ros.core.spline_peaks import _roots

    rng = np.random.default_rng(5)
    d = rng.normal(0, 1, (5, 400))
    d[:, rng.random(400) < 0.4] *= (rng.random(5) < 0.5)[:, None]   # lower degrees
    d[4, 380:] = d[3, 380:] = 0.0
    d[2, 380:], d[1, 380:], d[0, 380:] = 1.0, -2.0 * 0.3, 0.09       # (s - 0.3)^2
    got = np.stack(_roots(d))
    for e in range(d.shape[1]):
        coeffs = np.trim_zeros(d[::-1, e], "f")
        ref = np.roots(coeffs) if coeffs.size > 1 else np.array([])
        ref = np.sort(ref[np.abs(ref.imag) <= 1e-6 * (1 + np.abs(ref.real))].real)
        mine = np.sort(got[:, e][np.isfinite(got[:, e])])
        assert mine.size == ref.size and np.allclose(mine, ref, rtol=1e-6, atol=1e-6), \
            (e, d[:, e], mine, ref)
