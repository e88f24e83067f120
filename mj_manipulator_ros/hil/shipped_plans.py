"""The plans a setup is brought up for."""

from __future__ import annotations

import json
from pathlib import Path

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.plan_io import load_plan
from mj_manipulator_ros.resources import share_dir

#: the name of the plan made for a robot none of the shipped plans fits
GENERATED = "generated_wave"
#: generated plans, by what they are made from (arms, joints, limits, scene)
_made: dict[str, MultiArmPlan] = {}


def shipped_plans(config: ExecutorConfig) -> dict[str, MultiArmPlan]:
    """The plans the setup is brought up for: ``hil.plans`` in the config (paths relative to the
    config file), else every plan in config/plans/ whose arms are all configured with the
    plan's joints (the shipped plans are the OpenArm's: another robot whose arms are also
    called left and right gets none of them, never a failure about joints it does not have),
    else one plan made for the configuration (``check/plan_maker.py``: every arm waving out of
    its ready pose and back, checked collision-free), named ``generated_wave``.

    Raises:
        PlanMakerError: no plan given or shipped fits, and none can be made.
    """
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
    if not plans and "plans" not in hil:
        plans[GENERATED] = _generated(config)
    return plans


def _fits(plan: MultiArmPlan, config: ExecutorConfig) -> bool:
    """Every arm of ``plan`` is configured, with the plan's joints."""
    arms = {a.name: set(a.joint_names) for a in config.arms}
    return all(a in arms and set(plan[a].joint_names) == arms[a] for a in plan.arm_names)


def _generated(config: ExecutorConfig) -> MultiArmPlan:
    """The wave for ``config``, made once per arms, limits and scene (every stage asks)."""
    from mj_manipulator_ros.check.plan_maker import wave_plan
    from mj_manipulator_ros.check.preflight import scene_checker

    key = json.dumps({"arms": [{"name": a.name, "joints": list(a.joint_names),
                                "limits": {j: vars(l) for j, l in a.joint_limits.items()}}
                               for a in config.arms],
                      "scene": config.extra.get("scene"), "source": config.source,
                      "stop_skew_s": config.execution.stop_skew_s}, sort_keys=True, default=str)
    if key not in _made:
        _made[key] = wave_plan(config, scene_checker(config))
    return _made[key]
