"""Stage 3's stop table: the rows of ``check/stop_table.py`` run on the arms through the
executor, each stopped along its path where the table asks, its time to rest and travel
measured on the joint states: the table's measured column (``robot``; ``rehearsal`` with --sim),
written with the predicted one as ``stop_table.json`` and ``stop_table.png`` in the run folder.

Stage 3's params: ``table`` (off by default: every joint at full speed is the bring-up's
most demanding motion), and the rows: ``table_speeds`` (fractions of the velocity limits, of
``check/stop_table.SPEEDS``), ``table_poses`` (``extended``, ``folded``), ``table_arms`` and
``table_joints`` (empty: all).
Before each row every arm is moved slowly where the row starts (the arm stopped at its run-up's
start, the others at the plan's pose), that move replay-checked first. Each row's figures
against its prediction (check ``stop_table_row``): judged where a stop limit is set for the arm
(the gate counts on the prediction), otherwise recorded.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from mj_manipulator_ros.check.preflight import preflight_for
from mj_manipulator_ros.check.stop_fit import fit_stop_limits
from mj_manipulator_ros.check.stop_table import plot_table, stop_table
from mj_manipulator_ros.hil import analysis as A
from mj_manipulator_ros.hil.check_result import CheckResult, check
from mj_manipulator_ros.hil.motions import with_holds
from mj_manipulator_ros.hil.shipped_plans import shipped_plans
from mj_manipulator_ros.hil.stages import Protocol, Stage
from mj_manipulator_ros.model.scene import scene_for
from mj_manipulator_ros.sim.stop_trial import hand_path

if TYPE_CHECKING:  # the session imports rclpy
    from mj_manipulator_ros.hil.session import HilSession


def table_rows(session: "HilSession", stage: Stage, protocol: Protocol, run_and_stop
               ) -> list[CheckResult]:
    """Run the rows stage 3's params ask for; ``run_and_stop(session, plan, fraction,
    controlled=True)`` runs a plan and stops it at that fraction of its duration."""
    p = stage.params
    if not p.get("table"):
        return []
    speeds = [float(x) for x in p.get("table_speeds") or ()]
    config = session.config
    if "scene" not in config.extra:
        return [check(stage, "stop_table_row", "all", None, "no scene in the configuration: "
                      "the table's poses and predictions need the robot's model")]
    poses = set(p.get("table_poses") or ("extended", "folded"))
    arms = set(p.get("table_arms") or config.arm_names)
    joints_asked = set(p.get("table_joints") or ())
    threshold = protocol.settings["speed_threshold_rad_s"]
    name, plan = next(iter(shipped_plans(config).items()))
    scene = scene_for(config)
    gate = preflight_for(config)
    table, runs = stop_table(plan, config, scene,
                             gate=None if gate is None else lambda pl, held: gate(pl, held))
    label = "rehearsal" if session.sim_node is not None else "robot"
    out, figures = [], {}
    start = {a: session.pose(a) for a in config.arm_names}
    for i, (row_plan, request, others) in runs.items():
        row = table.rows[i]
        if row.pose not in poses or row.arm not in arms or \
                (joints_asked and row.joint not in joints_asked) or \
                not any(abs(row.speed - s) < 1e-9 for s in speeds):
            continue
        subject = f"{row.arm} {row.joint} {row.pose} {row.speed:.0%}"
        arm = row.arm
        fitted = fit_stop_limits(row_plan, config, scene)   # as the gate will fit it
        if fitted.slowed:   # the table is of the arm at the row's speed
            out.append(check(stage, "stop_table_row", subject, 0.0,
                             f"not run: the stop limits slow it ({fitted.summary()}); the "
                             "table measures the arm at the row's own speed: make it with no "
                             "stop limit set", passed=True))
            continue
        order = [list(row_plan[arm].joint_names).index(j)
                 for j in config.arm(arm).joint_names]
        targets = {arm: row_plan[arm].positions[0][order], **others}
        error = _move(session, targets)
        if error is not None:
            out.append(check(stage, "stop_table_row", subject, None, error))
            continue
        report, samples = run_and_stop(session, row_plan, request / row_plan.duration,
                                       controlled=True)
        joints = config.arm(arm).joint_names
        s = samples.arm(joints)
        asked = report.stops[0].requested_at if report.stops else None
        if asked is None or len(s) == 0:
            out.append(check(stage, "stop_table_row", subject, None,
                             "no stop was asked, or no joint states: " + report.summary()))
            continue
        after = s.window(asked, np.inf)
        t = A.stop_time(s, asked, threshold)
        j = list(joints).index(row.joint)
        travel = float(np.abs(np.diff(after.positions[:, j])).sum()) if len(after) > 1 else 0.0
        hand = hand_path(scene, arm, joints, after.positions) if len(after) > 1 else 0.0
        figures[i] = (t, travel, hand)
        within = t <= row.time + 1e-9 and hand <= row.hand_travel + 1e-9
        detail = (f"{row.stop} stop at {row.velocity:.2f}/s: measured {t:.3f} s, hand "
                  f"{hand * 1e3:.1f} mm; predicted {row.time:.3f} s, {row.hand_travel * 1e3:.1f}"
                  " mm")
        if any(v is not None for v in config.stop_limits(arm)):
            out.append(check(stage, "stop_table_row", subject, float(within),
                             detail + " (a stop limit is set: the gate counts on it)",
                             passed=within))
        else:
            out.append(check(stage, "stop_table_row", subject, float(within),
                             detail + ("" if within else "; over the prediction: raise the "
                                       "allowances before setting a stop limit"), passed=True))
    _move(session, start)
    table = table.with_measured(label, figures)
    folder = session.bags_dir.parent if session.bags_dir is not None else None
    if folder is not None:
        (folder / "stop_table.json").write_text(json.dumps(
            {"conditions": f"{label}, stage 3, plan {name}; speeds {speeds}, poses "
                           f"{sorted(poses)}", **table.to_dict()}, indent=1) + "\n")
        plot_table(table, folder / "stop_table.png")
    return out


def _move(session: "HilSession", targets) -> str | None:
    """Move the arms slowly to ``targets``, one arm at a time (the others holding; each move
    replay-checked first, and by the executor's gate: arms moving together would also have to
    pass the stop band), in the first order in which every move is collision-free. An error
    text, or None."""
    from itertools import permutations

    from mj_manipulator_ros.core.errors import ExecutionRefusedError

    arms = [a for a in targets
            if np.max(np.abs(session.pose(a) - np.asarray(targets[a])), initial=0.0) > 1e-3]
    why = "nothing to move"
    for order in permutations(arms) if arms else [()]:
        for arm in order:
            move = session.move_plan({arm: targets[arm]})
            report = session.checker.check(timeline=with_holds(session, move), mode="recorded")
            if not report.collision_free:
                why = (f"moving {arm!r} there would collide: "
                       f"{report.summary().splitlines()[0]}")
                break
            try:
                report, _ = session.run(move, settle=0.2)
            except ExecutionRefusedError as exc:
                why = f"moving {arm!r} there was refused: {str(exc).splitlines()[0]}"
                break
            if not report.succeeded:
                return f"could not move {arm!r} there: {report.summary()}"
        else:
            return None
    return why
