"""Splines meet their boundary conditions; checked against a slow reference (a linear solve)."""

from __future__ import annotations

import numpy as np
import pytest

from factories import make_plan
from mj_manipulator_ros.core.interpolation import (
    Interpolation, evaluate, resample_to_common_grid, sample, segment_coefficients)
from mj_manipulator_ros.core.plan import MultiArmPlan


def reference_quintic(p0, v0, a0, p1, v1, a1, T):
    """Solve the 6x6 boundary system for one scalar segment."""
    def rows(t):
        return [[t**k for k in range(6)],
                [k * t ** (k - 1) if k else 0 for k in range(6)],
                [k * (k - 1) * t ** (k - 2) if k > 1 else 0 for k in range(6)]]
    A = np.array(rows(0.0) + rows(T), dtype=float)
    return np.linalg.solve(A, [p0, v0, a0, p1, v1, a1])


def test_quintic_matches_reference() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        b = rng.normal(size=6)
        T = rng.uniform(0.05, 3.0)
        c = segment_coefficients(*[np.array([x]) for x in b], T, Interpolation.QUINTIC)
        np.testing.assert_allclose(c[:, 0], reference_quintic(*b, T), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("kind", list(Interpolation))
def test_boundary_conditions(kind) -> None:
    rng = np.random.default_rng(1)
    p0, v0, a0, p1, v1, a1 = (rng.normal(size=4) for _ in range(6))
    T = 0.7
    c = segment_coefficients(p0, v0, a0, p1, v1, a1, T, kind)
    p, v, a = evaluate(c, 0.0)
    q, w, b = evaluate(c, T)
    np.testing.assert_allclose(p, p0, atol=1e-12)
    np.testing.assert_allclose(q, p1, atol=1e-12)
    if kind is not Interpolation.LINEAR:
        np.testing.assert_allclose(v, v0, atol=1e-12)
        np.testing.assert_allclose(w, v1, atol=1e-10)
    if kind is Interpolation.QUINTIC:
        np.testing.assert_allclose(a, a0, atol=1e-12)
        np.testing.assert_allclose(b, a1, atol=1e-9)


def test_sample_holds_outside_and_hits_waypoints() -> None:
    plan = make_plan()
    t = plan["left"]
    p, v, _ = sample(t, np.concatenate([[-1.0], t.times, [5.0]]))
    np.testing.assert_allclose(p[1:-1], t.positions, atol=1e-12)
    np.testing.assert_allclose(p[0], t.positions[0])
    np.testing.assert_allclose(p[-1], t.positions[-1])
    assert np.all(v[0] == 0) and np.all(v[-1] == 0)


def test_resample_to_common_grid() -> None:
    a = make_plan(arms=("left",), duration=1.0, points=5)["left"]
    b = make_plan(arms=("right",), duration=1.3, points=7, seed=3)["right"]
    plan = resample_to_common_grid(MultiArmPlan({"left": a, "right": b}), 0.1)
    np.testing.assert_allclose(plan["left"].times, plan["right"].times)
    assert plan["left"].times[-1] == pytest.approx(1.3)
    assert plan["left"].times[1] - plan["left"].times[0] == pytest.approx(0.1)
    np.testing.assert_allclose(plan["left"].positions[-1], a.positions[-1])  # held after its end
    p, _, _ = sample(b, [0.5])
    np.testing.assert_allclose(plan["right"].positions[5], p[0], atol=1e-12)


def test_rest_to_rest() -> None:
    from mj_manipulator_ros.core.interpolation import rest_to_rest

    t = np.linspace(2.0, 4.0, 201)
    q, v = rest_to_rest(np.array([0.0, 1.0]), np.array([1.0, -1.0]), t)
    np.testing.assert_allclose(q[0], [0.0, 1.0])
    np.testing.assert_allclose(q[-1], [1.0, -1.0])
    np.testing.assert_allclose(v[[0, -1]], 0.0, atol=1e-12)
    np.testing.assert_allclose(np.abs(v).max(0), 1.875 * np.array([1.0, 2.0]) / 2.0, rtol=1e-3)
    np.testing.assert_allclose(np.gradient(q[:, 0], t), v[:, 0], atol=2e-3)  # consistent


@pytest.mark.parametrize("kind", list(Interpolation))
def test_spline_equals_the_slow_reference_everywhere(kind) -> None:
    """The per-cycle Spline against the per-segment linear solve: random waypoints, uneven
    times, every waypoint time exactly, between them, before and after."""
    from mj_manipulator_ros.core.interpolation import Spline
    from mj_manipulator_ros.core.plan import ArmTrajectory

    rng = np.random.default_rng(11)
    n, j = 6, 3
    times = np.cumsum(rng.uniform(0.1, 0.8, n)) - 0.3  # the first may be negative
    pos, vel, acc = rng.normal(size=(n, j)), rng.normal(size=(n, j)), rng.normal(size=(n, j))
    vel[-1] = 0.0
    traj = ArmTrajectory(tuple("abc"), times, pos, None if kind is Interpolation.LINEAR else vel,
                         acc if kind is Interpolation.QUINTIC else None)
    spline = Spline(traj)
    probes = np.concatenate([times, rng.uniform(times[0] - 0.5, times[-1] + 0.5, 200),
                             [times[0] - 1e-12, times[-1] + 1e-12]])
    for t in probes:
        got = spline.at(float(t))
        if t < times[0] or t > times[-1]:
            edge = pos[0] if t < times[0] else pos[-1]
            np.testing.assert_allclose(got[0], edge, atol=1e-12)
            assert not got[1:].any()
            continue
        k = min(int(np.searchsorted(times, t, side="right")) - 1, n - 2)
        T, s = times[k + 1] - times[k], t - times[k]
        for d in range(j):
            if kind is Interpolation.QUINTIC:
                c = reference_quintic(pos[k, d], vel[k, d], acc[k, d], pos[k + 1, d],
                                      vel[k + 1, d], acc[k + 1, d], T)
            elif kind is Interpolation.CUBIC:
                A = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [1, T, T**2, T**3], [0, 1, 2 * T, 3 * T**2]])
                c = np.r_[np.linalg.solve(A, [pos[k, d], vel[k, d], pos[k + 1, d], vel[k + 1, d]]), 0, 0]
            else:
                c = np.r_[pos[k, d], (pos[k + 1, d] - pos[k, d]) / T, 0, 0, 0, 0]
            want = [sum(c[i] * s**i for i in range(6)),
                    sum(i * c[i] * s ** (i - 1) for i in range(1, 6)),
                    sum(i * (i - 1) * c[i] * s ** (i - 2) for i in range(2, 6))]
            np.testing.assert_allclose(got[:, d], want, rtol=1e-7, atol=1e-7)
        # and it agrees with the vectorized sampler the replay check uses
        p, v, a = sample(traj, [t])
        np.testing.assert_allclose(got, np.vstack([p, v, a]), rtol=1e-9, atol=1e-9)


def test_sample_of_each_new_trajectory_is_its_own_after_others_died() -> None:
    """``sample`` keeps every segment's coefficients while a trajectory lives, by identity:
    300 trajectories made, sampled twice and dropped one after another (CPython reuses the
    addresses of the dead), each sampled against the slow reference of its own waypoints;
    the kept coefficients go with their trajectory."""
    import gc

    from mj_manipulator_ros.core import interpolation
    from mj_manipulator_ros.core.plan import ArmTrajectory

    rng = np.random.default_rng(5)
    kept_before = len(interpolation._segment_coefficients)
    for _ in range(300):
        times = np.cumsum(rng.uniform(0.1, 0.5, 3))
        pos, vel, acc = rng.normal(size=(3, 1)), rng.normal(size=(3, 1)), rng.normal(size=(3, 1))
        traj = ArmTrajectory(("a",), times, pos, vel, acc)
        t = float(rng.uniform(times[0], times[1]))
        c = reference_quintic(pos[0, 0], vel[0, 0], acc[0, 0], pos[1, 0], vel[1, 0], acc[1, 0],
                              times[1] - times[0])
        want = sum(c[i] * (t - times[0]) ** i for i in range(6))
        for _ in range(2):
            got, _, _ = sample(traj, [t])
            np.testing.assert_allclose(got[0, 0], want, rtol=1e-9, atol=1e-9)
        del traj
    gc.collect()
    assert len(interpolation._segment_coefficients) <= kept_before


@pytest.mark.parametrize("kind", list(Interpolation))
def test_sample_rates_are_samples_velocities_and_accelerations_bit_for_bit(kind) -> None:
    """The rates alone (what a stop's search checks) are :func:`sample`'s own numbers."""
    from mj_manipulator_ros.core.interpolation import sample_rates
    from mj_manipulator_ros.core.plan import ArmTrajectory

    rng = np.random.default_rng(5)
    n, j = 7, 4
    times = np.cumsum(rng.uniform(0.05, 0.6, n))
    traj = ArmTrajectory(tuple("abcd"), times, rng.normal(size=(n, j)),
                         None if kind is Interpolation.LINEAR else rng.normal(size=(n, j)),
                         rng.normal(size=(n, j)) if kind is Interpolation.QUINTIC else None)
    probes = np.concatenate([times, times - 1e-9, times + 1e-9,
                             rng.uniform(times[0] - 0.3, times[-1] + 0.3, 500)])
    _, v, a = sample(traj, probes)
    vr, ar = sample_rates(traj, probes)
    assert np.array_equal(v, vr) and np.array_equal(a, ar)
    assert np.abs(v).max() > 0   # not two arrays of zeros
