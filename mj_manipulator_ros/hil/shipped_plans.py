"""The plans a setup is brought up for."""

from __future__ import annotations

from pathlib import Path

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.resources import share_dir


def shipped_plans(config: ExecutorConfig) -> dict[str, MultiArmPlan]:
    """The plans the setup is brought up for: ``hil.plans`` in the config (paths relative to the
    config file), else every plan in config/plans/ whose arms are all configured with the
    plan's joints (the shipped plans are the OpenArm's: another robot whose arms are also
    called left and right gets none of them, never a failure about joints it does not have)."""
    hil = config.extra.get("hil") or {}
    base = Path(config.source).resolve().parent if config.source else Path.cwd()
    if "plans" in hil:
        paths = [Path(p) if Path(p).is_absolute() else base / p for p in hil["plans"]]
    else:
        paths = sorted((share_dir() / "config" / "plans").glob("*.yaml"))
    plans = {}
    for p in paths:
        plan = load_plan(p)
        if "plans" in hil or _fits(plan, config):
            plans[p.stem] = plan
    return plans


def _fits(plan: MultiArmPlan, config: ExecutorConfig) -> bool:
    """Every arm of ``plan`` is configured, with the plan's joints."""
    arms = {a.name: set(a.joint_names) for a in config.arms}
    return all(a in arms and set(plan[a].joint_names) == arms[a] for a in plan.arm_names)
