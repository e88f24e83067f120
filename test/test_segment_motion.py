"""The synchronized replay's speed bound from each segment's exact extremes
(``check/timeline.py``, SegmentMotion) against a slow reference: the velocity sampled densely on
the spline the controller runs. Sound on any interval (never below a sampled |velocity|), one
figure per interval whether asked alone or in a batch, and no looser than the dense-profile
bound (PlanMotion) on the plan's own intervals, which the replay certifies."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.check.timeline import PlanMotion, SegmentMotion
from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan


def random_plan(rng, kind: str) -> MultiArmPlan:
    n = int(rng.integers(4, 12))
    t = np.cumsum(np.r_[0.0, rng.uniform(0.05, 0.6, n - 1)])
    arms = {}
    for arm in ("a", "b"):
        q = rng.uniform(-1.5, 1.5, (n, 3))
        v = None if kind == "linear" else rng.uniform(-2.0, 2.0, (n, 3))
        if v is not None:
            v[[0, -1]] = 0.0
        acc = rng.uniform(-8.0, 8.0, (n, 3)) if kind == "quintic" else None
        if acc is not None:
            acc[[0, -1]] = 0.0
        arms[arm] = ArmTrajectory(tuple(f"{arm}{j}" for j in range(3)), t, q, v, acc)
    return MultiArmPlan(arms)


@pytest.mark.parametrize("kind", ["linear", "cubic", "quintic"])
def test_the_segment_bound_is_never_below_the_velocity(kind) -> None:
    rng = np.random.default_rng({"linear": 1, "cubic": 2, "quintic": 3}[kind])
    for _ in range(4):
        plan = random_plan(rng, kind)
        motion = SegmentMotion(plan)
        ta = rng.uniform(0.0, plan.duration, 60)
        tb = np.minimum(ta + rng.exponential(0.2, 60), plan.duration)
        batch = motion.speed_bounds(ta, tb)
        for k in range(ta.size):
            alone = motion.speed_bound(float(ta[k]), float(tb[k]))
            dense = np.linspace(ta[k], tb[k], 400)
            for arm in plan.arm_names:
                assert np.array_equal(alone[arm], batch[arm][k])
                seen = np.abs(sample(plan[arm], dense)[1]).max(axis=0)
                assert (batch[arm][k] >= seen).all(), (kind, arm, ta[k], tb[k],
                                                       batch[arm][k], seen)
        # on the plan's own intervals: no looser than the dense profile's bound
        times = plan["a"].times
        exact, dense = (m.speed_bounds(times[:-1], times[1:]) for m in (
            motion, PlanMotion(plan, {a: 0.0 for a in plan.arm_names}, plan.duration)))
        for arm in plan.arm_names:
            assert (exact[arm] <= dense[arm] * (1 + 1e-9) + 1e-12).all(), arm
