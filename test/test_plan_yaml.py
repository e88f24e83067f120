"""The plan's YAML text made without PyYAML's representer (``core/plan_io.plan_yaml``): read
back by PyYAML's safe loader (pure Python and libyaml) to exactly the mapping PyYAML's own dumper
writes, every float bit for bit, special values and names included."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.plan_io import plan_from_mapping, plan_to_mapping, plan_yaml

ODD = [0.0, -0.0, 1e-05, -2.5e-300, 1e20, 123456789.125, 0.1 + 0.2, 5e-324, 1.7976931348623157e308]


def _plan(seed: int) -> MultiArmPlan:
    rng = np.random.default_rng(seed)
    n = 40
    t = np.cumsum(np.r_[0.0, rng.uniform(1e-3, 0.2, n - 1)])
    q = rng.normal(0.0, 2.0, (n, 3)) * 10.0 ** rng.integers(-8, 8, (n, 3))
    q[: len(ODD) // 3 * 3].flat[: len(ODD) // 3 * 3] = ODD[: len(ODD) // 3 * 3]
    arms = {"left/arm": ArmTrajectory(("left/j1", "j: 2", 'q"3'), t, q,
                                      rng.normal(size=(n, 3)), rng.normal(size=(n, 3))),
            "right": ArmTrajectory(("right_j1",), t, rng.normal(size=(n, 1)))}
    return MultiArmPlan(arms)


@pytest.mark.parametrize("loader", [yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)])
@pytest.mark.parametrize("seed", range(5))
def test_read_back_it_is_the_mapping_pyyamls_dumper_writes(seed, loader) -> None:
    plan = _plan(seed)
    ours = yaml.load(plan_yaml(plan), Loader=loader)
    theirs = yaml.load(yaml.safe_dump(plan_to_mapping(plan), sort_keys=False), Loader=loader)
    assert ours == theirs
    again = plan_from_mapping(ours)
    for arm, traj in plan.arms.items():
        assert np.array_equal(again[arm].positions, traj.positions)   # bit for bit
        assert again[arm].joint_names == traj.joint_names


def test_special_floats_are_yaml_floats() -> None:
    """nan and the infinities as YAML 1.1 writes them, an exponent without a dot made a float
    (``1e-05`` alone is a string to the safe loader)."""
    from mj_manipulator_ros.core.plan_io import yaml_float

    for x in (math.nan, math.inf, -math.inf, 1e-05, -3e+20, 2.0, -0.0):
        back = yaml.safe_load(yaml_float(x))
        assert isinstance(back, float), (x, yaml_float(x))
        assert (math.isnan(back) and math.isnan(x)) or (back == x and
                                                         math.copysign(1, back) == math.copysign(1, x))
