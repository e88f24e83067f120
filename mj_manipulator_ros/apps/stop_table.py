"""``mj-manipulator-ros stop-table``: the Annex-B-style stop table of a configuration's arms,
predicted (``check/stop_table.py``) and measured in the simulator per controller kind, with and
without a payload at the hand (``sim/stop_trial.py``), as JSON and as a picture.

Controller kinds: ``position`` (MuJoCo's position servos), ``torque`` (torque control of the
joints), ``mit`` (MIT commands to the actuator twin: ``sim.physics: cosim``); each replaces the
configuration's own for every arm. The prediction is the configuration's (its allowances for its
own controllers): the measured columns say how each kind compares with it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Sequence

from mj_manipulator_ros.check.stop_table import StopTable, plot_table, stop_table
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.time_scaling import config_bounds
from mj_manipulator_ros.sim.sim_config import SimConfig
from mj_manipulator_ros.sim.stop_trial import ArmStop, measure_stop

KINDS = ("position", "torque", "mit")


def with_controllers(config: SimConfig, kind: str) -> SimConfig:
    """``config`` with every arm's simulated controller of ``kind`` (``mit``: under the actuator
    twin, ``sim.physics: cosim``)."""
    if kind not in KINDS:
        raise ValueError(f"controller kind {kind!r}: expected one of {', '.join(KINDS)}")
    arms = {a.name: dataclasses.replace(config.sim.arm(a.name), controller=kind)
            for a in config.executor.arms}
    physics = "cosim" if kind == "mit" else "mujoco"
    return dataclasses.replace(config, sim=dataclasses.replace(config.sim, arms=arms,
                                                               physics=physics))


def measured_table(config: SimConfig, plan: MultiArmPlan, scene, kinds: Sequence[str],
                   payload_kg: float, arms=None, say=print) -> StopTable:
    """The predicted table of ``plan``'s arms with a measured column per kind (and per kind
    with ``payload_kg`` at the hand, when it is not 0)."""
    from mj_manipulator_ros.check.preflight import preflight_for

    ex = config.executor
    gate = preflight_for(ex)
    table, runs = stop_table(plan, ex, scene, arms,
                             gate=None if gate is None else lambda p, held: gate(p, held))
    for kind in kinds:
        sim = with_controllers(config, kind)
        for payload in ((0.0, payload_kg) if payload_kg else (0.0,)):
            name = kind if not payload else f"{kind}+{payload:g}kg"
            figures = {}
            for i, (row_plan, request, others) in runs.items():
                arm = table.rows[i].arm
                m = measure_stop(sim, row_plan, config_bounds(row_plan, ex), request,
                                 {arm: ArmStop.CONTROLLED}, ex.execution.start_lead_s,
                                 payload_kg=payload, others=others)[arm]
                figures[i] = (m.time_s, m.joint_travel, m.hand_travel_m)
            table = table.with_measured(name, figures)
            say(f"stop-table: measured {len(figures)} stops with {name}")
    return table


def write(table: StopTable, json_path: str | None, image_path: str | None,
          conditions: str) -> None:
    if json_path:
        Path(json_path).write_text(json.dumps({"conditions": conditions, **table.to_dict()},
                                              indent=1) + "\n")
    if image_path:
        plot_table(table, Path(image_path))
