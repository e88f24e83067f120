"""The replay's per-state loop in C (check/_contact_kernel.c) against its reference
(PlanReplayChecker._contacts, one state at a time in Python): the same figures state by state,
the same reports whole, and exact errors for wrong arguments."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from mj_manipulator_ros.check import replay_checker
from mj_manipulator_ros.check.replay_checker import PlanReplayChecker
from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.model.scene import scene_for
from mj_manipulator_ros.resources import config_file, share_dir


def test_the_kernel_is_built_here() -> None:
    assert replay_checker.KERNEL is not None, (
        "check/_contact_kernel.c was not built (make setup builds it against the mujoco wheel's "
        "headers): every replay runs the Python reference, about twice as slow")


@pytest.fixture(scope="module")
def openarm():
    config = load_config(config_file("openarm_bimanual.yaml"))
    return PlanReplayChecker.from_scene(scene_for(config))


def both(checker: PlanReplayChecker, call):
    """``call()`` with the C kernel, then with the reference."""
    try:
        checker.kernel = replay_checker.KERNEL
        fast = call()
        checker.kernel = None
        return fast, call()
    finally:
        checker.kernel = replay_checker.KERNEL


@pytest.mark.parametrize("model", ["near", "pairs", "tight", "every pair"])
def test_state_by_state_the_figures_of_the_reference(openarm, model) -> None:
    """Random poses of both arms inside their ranges, many of them touching: every category's
    smallest distance and every overflow flag equal the reference's, bit for bit. "every pair":
    the near model with MuJoCo reporting every pair of geoms (no contype narrowing): the
    pairs of no category and those of the allowed-collision matrix are filtered after
    detection, as with a scene whose own contype bits cannot be narrowed."""
    import copy

    rng = np.random.default_rng(7)
    c = openarm
    if model == "every pair":
        mm = copy.deepcopy(c._models["near"][0])
        active = (mm.geom_contype != 0) | (mm.geom_conaffinity != 0)
        mm.geom_contype[active], mm.geom_conaffinity[active] = 1, 1
        c.model, c.data = mm, mujoco.MjData(mm)
    else:
        c.model, c.data, _ = c._models[model]
    poses = {}
    for name, arm in c.arms.items():
        lo, hi = c.model.jnt_range[arm.joint_ids].T
        poses[name] = rng.uniform(lo, hi, (400, len(arm.joint_ids)))
    rows = c._qpos(poses)
    (table, full), (ref_table, ref_full) = both(c, lambda: c._clearances(rows))
    assert np.isfinite(ref_table).any() and (ref_table < c.margin).any()   # contacts, hits
    assert np.array_equal(table, ref_table) and np.array_equal(full, ref_full)
    if model == "every pair":   # MuJoCo reported pairs the filters drop
        contacts = c.data.contact.geom
        owners = c.geom_owner[contacts]
        bodies = c.model.geom_bodyid[contacts]
        dropped = (c._pair_category[owners[:, 0], owners[:, 1]] < 0) | \
            c._allowed_mask[bodies[:, 0], bodies[:, 1]]
        assert dropped.any(), "the last state had no contact the filters drop"


def test_a_full_contact_buffer_is_flagged_as_by_the_reference() -> None:
    """Arms of many overlapping spheres in a small contact buffer: the states where MuJoCo
    drops contacts are flagged by both, and counted once in a report."""
    from test_replay import BALLS, crowded_checker

    checker = crowded_checker(*BALLS)
    rows = checker._qpos({"left": np.linspace(-1, 1, 9)[:, None],
                          "right": np.linspace(1, -1, 9)[:, None]})
    (table, full), (ref_table, ref_full) = both(checker, lambda: checker._clearances(rows))
    assert ref_full.any() and not ref_full.all(), ref_full   # both kinds of state
    assert np.array_equal(full, ref_full) and np.array_equal(table, ref_table)
    t = np.array([0.0, 1.0])
    plan = MultiArmPlan({a: ArmTrajectory((f"{a}_j1",), t, np.zeros((2, 1)))
                         for a in ("left", "right")})
    fast, ref = both(checker, lambda: checker.check(plan, continuous=False))
    assert fast.contact_overflow_states == ref.contact_overflow_states == 2


def same_reports(fast, ref) -> None:
    assert fast.to_dict() == ref.to_dict()
    assert np.array_equal(fast.times, ref.times)
    assert fast.clearance_traces.keys() == ref.clearance_traces.keys()
    for k in ref.clearance_traces:
        assert np.array_equal(fast.clearance_traces[k], ref.clearance_traces[k]), k


@pytest.mark.parametrize("name", ["openarm_wave", "openarm_crossing"])
def test_the_shipped_plans_get_the_reference_reports(openarm, name) -> None:
    """Synchronized (continuous) and band replays of the shipped plans: every field, every
    state's time and every clearance trace as the reference gives them."""
    plan = load_plan(share_dir() / f"config/plans/{name}.yaml")
    for mode, kw in (("synchronized", {"continuous": True}), ("band", {"skew": 0.6})):
        same_reports(*both(openarm, lambda: openarm.check(plan, mode=mode, **kw)))


def test_colliding_plans_get_the_reference_reports(tmp_path) -> None:
    """Plans that collide on time, between states and only in the band (the arms taking
    turns of test_replay): the same pairs, times, counts and first collision."""
    from test_replay import TURNS_T as t
    from test_replay import checker_for, out_and_back, plan_of, scene_config

    checker, _ = checker_for(scene_config(tmp_path, separation=0.55))
    turns = plan_of(out_and_back(0.1, 0.8), out_and_back(0.5, -0.8), t)
    meet = plan_of(out_and_back(0.1, 0.9), out_and_back(0.1, -0.9), t)
    verdicts = []
    for plan in (turns, meet):
        for mode, kw in (("synchronized", {"continuous": True}), ("band", {"skew": 0.4})):
            fast, ref = both(checker, lambda: checker.check(plan, mode=mode, **kw))
            same_reports(fast, ref)
            verdicts.append(ref.collision_free)
    assert verdicts == [True, False, False, False], verdicts   # turns: only its band collides


def test_wrong_arguments_are_named(openarm) -> None:
    c = openarm
    c.model, c.data, _ = c._models["near"]
    rows = np.tile(c.base_qpos, (3, 1))
    out, full = np.empty((3, c._ncat)), np.zeros(3, np.uint8)
    good = [c.model._address, c.data._address, rows, c._owner_rows, c._category_rows,
            c._allowed_u8, out, full]
    kernel = replay_checker.KERNEL
    kernel.clearances(*good)
    for k, bad, named in ((2, rows[:, :-1].copy(), "rows"),
                          (3, c._owner_rows.astype(np.int64), "owner"),
                          (5, c._allowed_u8[:-1], "allowed"),
                          (6, np.empty((3, c._ncat), np.float32), "out"),
                          (7, np.zeros(2, np.uint8), "overflow")):
        args = list(good)
        args[k] = bad
        with pytest.raises(ValueError, match=named):
            kernel.clearances(*args)
    owners = c._owner_rows.copy()
    owners[0] = 99
    with pytest.raises(ValueError, match="geom 0's owner 99"):
        kernel.clearances(*good[:3], owners, *good[4:])


def test_rows_split_over_threads_give_the_same_report(openarm) -> None:
    """The band's states split over 1, 2 and 3 threads (each on its own MjData): the same
    report whatever the split, and no thread left behind (the autouse fixture)."""
    plan = load_plan(share_dir() / "config/plans/openarm_crossing.yaml")
    workers = openarm.workers
    try:
        reports = []
        for n in (1, 2, 3):
            openarm.workers = n
            reports.append(openarm.check(plan, mode="band", skew=0.4))
    finally:
        openarm.workers = workers
    assert reports[0].states_checked > 3 * replay_checker.PARALLEL_ROWS   # split 3 ways
    for other in reports[1:]:
        same_reports(other, reports[0])


_ARENA_TOO_SMALL = r"""
import sys
sys.path.insert(0, sys.argv[1])
import mujoco, numpy as np
from mj_manipulator_ros.check.replay_checker import KERNEL
from mj_manipulator_ros.model.allowed_collisions import AllowedCollisionMatrix
from test_replay import crowded_checker

checker = crowded_checker('<geom type="box" size="0.05 0.05 0.05"/>', 7, "6K",
                          allowed=AllowedCollisionMatrix((), 0, 0.005, "none"))
rows = checker._qpos({"left": np.zeros((3, 1)), "right": np.zeros((3, 1))})
for kernel in (None, KERNEL, KERNEL):   # (twice: the thread's handler was put back)
    checker.kernel = kernel
    try:
        checker._clearances(rows)
        print("no error")
    except mujoco.FatalError as exc:
        print("FatalError", str(exc).splitlines()[0])
"""


def test_an_error_mujoco_reports_is_raised_as_the_reference_raises_it(tmp_path) -> None:
    """MuJoCo's own error (here its arena too small for the contacts) raises mujoco.FatalError
    from the kernel too, with the same message, and the process goes on (regression, found in
    review: MuJoCo's default handler ended the process). In a process of its own, so that a
    regression fails this test instead of ending a test worker."""
    import subprocess
    import sys

    here = str(Path(__file__).resolve().parent)
    done = subprocess.run([sys.executable, "-c", _ARENA_TOO_SMALL, here], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    said = done.stdout.splitlines()
    assert len(said) == 3 and said[0].startswith("FatalError mj_stackAlloc"), said
    assert said[1] == said[2] == said[0], said
