"""Where many controlled stops come to rest, searched in lockstep (core/stop_ends.py), against
its reference: plan_ramp asked one request at a time, as the executor asks it. Bit for bit, on
the shipped plans and on random ones (velocities, accelerations, positions only), at full and
reduced speed, with stops that reach the plan's end and stops that fit no ramp."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.errors import RampLimitError
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.core.stop_ends import stop_ends
from mj_manipulator_ros.core.time_scaling import config_bounds, joint_bounds, plan_ramp
from mj_manipulator_ros.resources import config_file, share_dir


def one_at_a_time(plan, bounds, starts, f0) -> np.ndarray:
    out = []
    for s in starts:
        try:
            out.append(plan_ramp(plan, float(s), f0, 0.0, bounds).end_plan_time)
        except RampLimitError:
            out.append(np.nan)
    return np.array(out)


@pytest.mark.parametrize("name", ["openarm_wave", "openarm_crossing"])
@pytest.mark.parametrize("speed", [1.0, 0.5])
def test_the_shipped_plans_rest_where_the_executor_would_stop_them(name, speed) -> None:
    config = load_config(config_file("openarm_bimanual.yaml"))
    plan = load_plan(share_dir() / f"config/plans/{name}.yaml")
    bounds = config_bounds(plan, config)
    starts = np.concatenate([[-0.1, 0.0], np.linspace(0.01, plan.duration, 97),
                             [plan.duration - 0.05, plan.duration + 1.0]])
    fast = stop_ends(plan, bounds, starts, speed)
    reference = one_at_a_time(plan, bounds, starts, speed)
    assert np.array_equal(fast, reference, equal_nan=True), np.flatnonzero(fast != reference)
    assert np.isfinite(reference).all()
    assert reference[-3] == reference[-1] == plan.duration and reference[-2] < plan.duration


def random_plan(rng, kind: str) -> MultiArmPlan:
    n = int(rng.integers(4, 12))
    t = np.concatenate([[0.0], np.cumsum(rng.uniform(0.1, 0.6, n - 1))])
    arms = {}
    for a, joints in (("left", 3), ("right", 2)):
        q = np.cumsum(rng.uniform(-0.6, 0.6, (n, joints)), axis=0)
        v = rng.uniform(-1.5, 1.5, (n, joints))
        v[0] = v[-1] = 0.0
        acc = rng.uniform(-3.0, 3.0, (n, joints)) if kind == "quintic" else None
        if acc is not None:
            acc[0] = acc[-1] = 0.0
        names = tuple(f"{a}_j{k}" for k in range(joints))
        arms[a] = ArmTrajectory(names, t, q, None if kind == "linear" else v, acc)
    return MultiArmPlan(arms)


@pytest.mark.parametrize("kind", ["cubic", "quintic", "linear"])
def test_random_plans_rest_where_the_executor_would_stop_them(kind) -> None:
    """Random plans and bounds, tight enough that some stops fit no ramp (NaN) and loose
    enough that most do, at random speeds: every figure equals the reference's."""
    rng = np.random.default_rng({"cubic": 1, "quintic": 2, "linear": 3}[kind])
    found = {"rest": 0, "none": 0, "end": 0}
    for _ in range(6):
        plan = random_plan(rng, kind)
        limits = {a: {j: (float(rng.uniform(1.5, 6.0)),
                          None if rng.random() < 0.3 else float(rng.uniform(4.0, 20.0)))
                      for j in plan[a].joint_names} for a in plan.arm_names}
        bounds = joint_bounds(plan, limits, float(rng.uniform(3.0, 10.0)))
        speed = float(rng.choice([1.0, 0.7, 0.3]))
        starts = np.append(np.sort(rng.uniform(-0.2, plan.duration, 25)),
                           [plan.duration, plan.duration + 0.1])
        fast = stop_ends(plan, bounds, starts, speed)
        reference = one_at_a_time(plan, bounds, starts, speed)
        assert np.array_equal(fast, reference, equal_nan=True), (
            kind, speed, starts[fast != reference], fast[fast != reference],
            reference[fast != reference])
        found["none"] += int(np.isnan(reference).sum())
        found["end"] += int((reference == plan.duration).sum())
        found["rest"] += int((np.isfinite(reference) & (reference < plan.duration)).sum())
    assert all(found.values()), found   # every kind of outcome met


def test_a_joint_bounded_at_zero_is_treated_as_plan_ramp_treats_it() -> None:
    """A joint that holds still with a velocity or acceleration bound of 0 (the configuration
    accepts 0): its ratios are 0 / 0. plan_ramp passes over them; the lockstep search did not
    (regression, found in review: with the velocity bound 0 it never ended, with the
    acceleration bound 0 it gave NaN where plan_ramp gives a rest)."""
    t = np.linspace(0.0, 1.0, 11)
    q = np.column_stack([0.4 * np.sin(np.pi * t / 2) ** 2, np.full(t.size, 0.3)])
    v = np.column_stack([0.4 * np.pi / 2 * np.sin(np.pi * t), np.zeros(t.size)])
    plan = MultiArmPlan({"a": ArmTrajectory(("j0", "j1"), t, q, v)})
    starts = np.array([0.2, 0.5, 0.8])
    for limits in ({"j0": (3.0, 10.0), "j1": (0.0, 10.0)}, {"j0": (3.0, 10.0), "j1": (3.0, 0.0)},
                   {"j0": (3.0, 10.0), "j1": (0.0, 0.0)}):
        bounds = joint_bounds(plan, {"a": limits}, 5.0)
        reference = one_at_a_time(plan, bounds, starts, 1.0)
        assert np.isfinite(reference).all(), (limits, reference)
        assert np.array_equal(stop_ends(plan, bounds, starts, 1.0), reference, equal_nan=True), \
            limits


def test_the_compiled_samples_give_the_numpy_figures() -> None:
    """The search's rate samples and the sent goals' spline samples in C (core/_rate_kernel.c)
    against their numpy reference (the code that runs without a compiler), bit for bit: each
    request's peak use of its limits for random ramps (slowing down and running on to the
    plan's end), every request's ramp length and whether it fits none, and where its goals
    rest, on the crossing plan and random plans of each interpolation, with a bound of 0
    (0 / 0) and unbounded joints among them."""
    from mj_manipulator_ros.core import stop_ends as module

    assert module.KERNEL is not None, "core/_rate_kernel.c was not built (make setup)"
    rng = np.random.default_rng(7)
    crossing = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    cases = [(crossing, config_bounds(crossing, load_config(config_file("sim_openarm.yaml"))))]
    for kind in ("cubic", "quintic", "linear"):
        plan = random_plan(rng, kind)
        limits = {a: {j: (float(rng.choice([0.0, rng.uniform(1.5, 6.0)])),
                          None if rng.random() < 0.3 else float(rng.uniform(4.0, 20.0)))
                      for j in plan[a].joint_names} for a in plan.arm_names}
        cases.append((plan, joint_bounds(plan, limits, float(rng.uniform(3.0, 10.0)))))
    for plan, bounds in cases:
        s0 = np.sort(rng.uniform(0.01, plan.duration, 40))
        for speed in (1.0, 0.4):
            idx = np.arange(s0.size)
            T = rng.uniform(0.02, 1.5, s0.size)
            f1 = np.where(rng.random(s0.size) < 0.2, speed, 0.0)
            f0 = np.full(s0.size, speed)
            peaks = [module._Search(plan, bounds, s0, speed, kernel=k)._peaks(idx, f0, f1, T)
                     for k in (module.KERNEL, None)]
            assert np.array_equal(peaks[0], peaks[1], equal_nan=True), speed
            fast = module._Search(plan, bounds, s0, speed).lengths()
            slow = module._Search(plan, bounds, s0, speed, kernel=None).lengths()
            assert np.array_equal(fast[0], slow[0]) and np.array_equal(fast[1], slow[1]), speed
            # the goals as sent, on their own splines: their peak use and where they rest
            goals = [module._SentGoals(plan, bounds, speed, kernel=k) for k in (module.KERNEL,
                                                                                 None)]
            peaks = [g._peaks(s0, T, f1) for g in goals]
            assert np.array_equal(peaks[0], peaks[1], equal_nan=True), speed
            ok = ~fast[1]
            assert np.array_equal(goals[0].ends(s0[ok], fast[0][ok]),
                                  goals[1].ends(s0[ok], fast[0][ok]), equal_nan=True), speed
