"""``mj-manipulator-ros``: the command-line entry point; one subcommand per tool.

Exit codes (the table in README.md, "Exit codes"): 0 success; 1 the operation ran and failed
(``execute``: goals were sent, an arm may have moved; ``check-plan``: a collision); 2 refused
before anything was sent, nothing moved (bad configuration, plan or arguments, validation, the
pre-flight check, start state, clocks, record space, or an execution that ended before any
controller accepted a goal); 4 the run succeeded but its record could not be written whole
(the report is saved elsewhere); 130 interrupted by Ctrl-C (arms stopped along the plan; a
second Ctrl-C: canceled; before anything was sent: nothing sent). Ctrl-Z pauses along the plan
(before the start: nothing is sent until Ctrl-Z again), Ctrl-Z again resumes.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
#: ``execute``: refused before any goal was sent (the same code as bad input: nothing moved)
EXIT_REFUSED = EXIT_BAD_INPUT
#: ``execute --record``: every arm succeeded, but the bag could not be written whole
EXIT_RECORD_FAILED = 4


def _selfcheck(_args: argparse.Namespace) -> int:
    from mj_manipulator_ros.ros.selfcheck import main

    return main()


def _init_config(args: argparse.Namespace) -> int:
    from mj_manipulator_ros.apps.init_config import init_config

    return init_config(args.model, args.out, driver_names=args.driver_names,
                       max_velocity=args.max_velocity)


def _make_plan(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mj_manipulator_ros.check.plan_maker import wave_plan
    from mj_manipulator_ros.check.preflight import scene_checker
    from mj_manipulator_ros.core.errors import MjManipulatorError
    from mj_manipulator_ros.core.plan_io import save_plan
    from mj_manipulator_ros.model.limits import load_config_with_model

    try:
        if Path(args.out).exists():
            raise MjManipulatorError(f"{args.out} exists: not overwritten")
        config = load_config_with_model(args.config)
        plan = wave_plan(config, scene_checker(config))
    except MjManipulatorError as exc:
        print(f"make-plan: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    save_plan(plan, args.out)
    print(f"make-plan: wrote {args.out}: arms {list(plan.arm_names)}, {plan.duration:.2f} s, "
          f"{plan[plan.arm_names[0]].times.size} waypoints each, collision-free synchronized, "
          "each arm alone and over the stop band")
    return EXIT_OK


def _execute(args: argparse.Namespace) -> int:
    import json
    import signal
    import threading
    from pathlib import Path

    # from the first line on, Ctrl-C never raises and Ctrl-Z never suspends: what comes while
    # the modules below are imported is noted, then handed to the real handlers
    early: list[int] = []
    noting = contextlib.ExitStack()
    note = noting.enter_context(_noted_signals(early))
    from mj_manipulator_ros.core.sync import INTERRUPTED, CancelScope, FailureReason, interrupts_cancel

    scope = CancelScope()
    made: list = []   # the executor, once made: the first Ctrl-C is its controlled stop
    # before anything is sent, Ctrl-C sends nothing (the run ends canceled, every arm not_sent,
    # exit 130); later it stops the arms along the plan (a second one cancels: every arm holds)
    pending_pause = [False]   # Ctrl-Z before the executor exists
    interrupted = []          # a Ctrl-C came (the exit code says so whatever the report)

    def first_ctrl_c() -> bool:
        interrupted.append(True)
        return bool(made) and made[0].stop(INTERRUPTED)
    # the real handlers replace the noting one directly: never a moment with Python's defaults
    # between them (Ctrl-Z there suspended the process with the arms' execution ahead of it)
    with noting, interrupts_cancel(scope, first=first_ctrl_c, over=(note,)), \
            _pause_on_ctrl_z(made, pending_pause):
        for signum in early:   # replayed in order, now that the handlers are in place
            signal.raise_signal(signum)
        from mj_manipulator_ros.check.preflight import preflight_for
        from mj_manipulator_ros.core import overrides
        from mj_manipulator_ros.core.config import ExecutionSettings
        from mj_manipulator_ros.core.errors import MjManipulatorError
        from mj_manipulator_ros.core.plan_io import load_plan
        from mj_manipulator_ros.core.report import ArmStatus, not_checked_lines
        from mj_manipulator_ros.core.validation import check_speed_factor, validate_plan
        from mj_manipulator_ros.model.limits import load_config_with_model
        from mj_manipulator_ros.core.heap import freeze_startup
        from mj_manipulator_ros.ros.executor import MultiArmExecutor

        config = plan = None
        try:
            config = load_config_with_model(args.config)
            config = config.with_execution(**overrides.check(
                ExecutionSettings, overrides.from_arguments(args, ExecutionSettings),
                "command line"))
            plan = load_plan(args.plan)
            if args.speed is not None:
                plan = plan.time_scaled(check_speed_factor(args.speed, config))
            validate_plan(plan, config)
            artifacts = {}
            if args.record and args.continue_plan:
                raise MjManipulatorError("--record with --continue: the continuation runs as "
                                         "up to three executions; record them with the black "
                                         "box (execution.black_box_s) or a bag of your own")
            if args.record:
                if Path(args.record).exists():
                    raise MjManipulatorError(f"--record {args.record}: exists; a bag is never "
                                             "overwritten (choose a new directory)")
                if "scene" in config.extra:
                    from mj_manipulator_ros.model.scene import scene_for
                    artifacts = scene_for(config).artifacts()
        except MjManipulatorError as exc:
            if scope.canceled:
                return _interrupted_before_sending(args, scope, config, plan)
            print(f"mj-manipulator-ros execute: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if scope.canceled:
            return _interrupted_before_sending(args, scope, config, plan)
        try:
            executor = MultiArmExecutor(config, preflight=preflight_for(config))
            executor.record_artifacts = artifacts
            if pending_pause[0]:
                executor.hold_next("paused (Ctrl-Z)")
            made.append(executor)
            freeze_startup()   # core/heap.py: no full collection scans these objects again
        except MjManipulatorError as exc:
            print(f"mj-manipulator-ros execute: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        continued = None
        try:
            if args.continue_plan:
                near = None if args.continue_near is None else \
                    {a: args.continue_near for a in plan.arm_names}
                continued = executor.continue_plan(plan, approach=args.approach, hints=near)
                report = continued.rest or continued.retrace or continued.approach
            else:
                report = executor.execute(plan, record=args.record, scope=scope,
                                          approach=args.approach)
        except MjManipulatorError as exc:  # refused (pre-flight, start state, clocks, record
            # space): nothing was sent
            print(f"mj-manipulator-ros execute: {exc}", file=sys.stderr)
            for line in not_checked_lines(executor.not_checked):
                if line.strip() not in str(exc):
                    print(line, file=sys.stderr)
            return EXIT_REFUSED
        finally:
            executor.close()
        if continued is not None:
            print(json.dumps(continued.to_dict(), indent=2) if args.json else continued.summary(),
                  flush=True)
        else:
            print(report.to_json() if args.json else report.summary(), flush=True)
        if report.record_error is not None:
            _save_report_elsewhere(report)
        # every arm has stopped and the report is out: from here the process only exits, and a
        # late Ctrl-C must not turn the exit status into "killed by SIGINT"
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    if report.succeeded:
        return EXIT_OK if report.record_error is None else EXIT_RECORD_FAILED
    f = report.first_failure
    if f is not None and f.reason is FailureReason.EXTERNAL_ABORT and \
            (f.error_string or "").startswith(INTERRUPTED):
        return EXIT_INTERRUPTED   # canceled by Ctrl-C (also where no controlled stop fitted)
    if f is None and report.stops and report.stops[-1].reason == INTERRUPTED or interrupted:
        return EXIT_INTERRUPTED   # stopped along the plan by Ctrl-C (also a paused run)
    if report.arms and all(r.status in (ArmStatus.NOT_SENT, ArmStatus.REJECTED)
                           for r in report.arms.values()):
        return EXIT_REFUSED   # no controller accepted a goal: nothing moved
    return EXIT_FAILED


@contextlib.contextmanager
def _noted_signals(early: list):
    """Note SIGINT and SIGTSTP in ``early`` instead of raising or suspending (main thread only);
    yields the noting handler, which the real handlers replace directly; on exit every signal
    still noted gets back the handler it had before."""
    import signal
    import threading

    def note(signum, _frame) -> None:
        early.append(signum)
    if threading.current_thread() is not threading.main_thread():
        yield note
        return
    names = [signal.SIGINT] + ([signal.SIGTSTP] if hasattr(signal, "SIGTSTP") else [])
    previous = {s: signal.signal(s, note) for s in names}
    try:
        yield note
    finally:
        for s, handler in previous.items():
            if signal.getsignal(s) is note:   # (unless the body set its own: SIG_IGN at the end)
                signal.signal(s, handler)


def _interrupted_before_sending(args, scope, config, plan) -> int:
    """Ctrl-C before the executor existed: the report of an execution canceled with every arm
    ``not_sent`` (the plan's arms, else the configuration's), printed as ``execute`` prints."""
    from mj_manipulator_ros.core.report import ArmReport, ArmStatus, ExecutionReport, ExecutionStatus

    arms = plan.arm_names if plan is not None else config.arm_names if config is not None else ()
    report = ExecutionReport(ExecutionStatus.CANCELED, None, scope.failure,
                             {a: ArmReport(ArmStatus.NOT_SENT, None,
                                           "interrupted before any goal was sent")
                              for a in arms})
    print(report.to_json() if args.json else report.summary(), flush=True)
    return EXIT_INTERRUPTED


@contextlib.contextmanager
def _pause_on_ctrl_z(made: list, pending: list):
    """Where a terminal can send it: Ctrl-Z (SIGTSTP) pauses the running execution along the
    plan instead of suspending the process (the arms would go on unattended); Ctrl-Z again, or
    SIGCONT, resumes it. Says so on stderr. Before the start (``made`` still empty: no executor
    yet; or the executor not yet running) it holds the execution: nothing is sent until Ctrl-Z
    again (``pending[0]`` until the executor exists). The handlers are restored on exit."""
    import signal
    import threading

    from mj_manipulator_ros.core.execution_phase import MotionPhase

    if not hasattr(signal, "SIGTSTP") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def toggle(resume_only: bool) -> None:
        try:
            if not made:   # no executor yet: remember it (applied once the executor exists)
                pending[0] = False if resume_only else not pending[0]
                said = ("held before the start: nothing is sent until Ctrl-Z again"
                        if pending[0] else "resumed")
                print(f"mj-manipulator-ros execute: {said}", file=sys.stderr, flush=True)
                return
            executor = made[0]
            if executor.speed.state is MotionPhase.PAUSED or executor.held_before_start:
                executor.resume()
                print("mj-manipulator-ros execute: resumed", file=sys.stderr, flush=True)
            elif not resume_only and (executor.pause("paused (Ctrl-Z)")
                                      or executor.hold_next("paused (Ctrl-Z)")):
                where = ("held before the start: nothing is sent until resumed"
                         if executor.held_before_start else "paused along the plan")
                print(f"mj-manipulator-ros execute: {where}; Ctrl-Z again (or kill -CONT) "
                      "resumes, Ctrl-C stops", file=sys.stderr, flush=True)
        except Exception as exc:  # noqa: BLE001 - a refused resume says why and stays paused
            print(f"mj-manipulator-ros execute: {'resume' if resume_only else 'Ctrl-Z'}: {exc}",
                  file=sys.stderr, flush=True)

    def on_tstp(_signum, _frame) -> None:
        threading.Thread(target=toggle, args=(False,), name="mjmr-sigtstp", daemon=True).start()

    def on_cont(_signum, _frame) -> None:
        threading.Thread(target=toggle, args=(True,), name="mjmr-sigcont", daemon=True).start()
    previous = (signal.signal(signal.SIGTSTP, on_tstp), signal.signal(signal.SIGCONT, on_cont))
    try:
        yield
    finally:
        signal.signal(signal.SIGTSTP, previous[0])
        signal.signal(signal.SIGCONT, previous[1])


def _save_report_elsewhere(report) -> None:
    """The record failed (a full disk): keep the report in the temporary directory too."""
    import tempfile
    import time
    from pathlib import Path

    path = Path(tempfile.gettempdir()) / f"mj_manipulator_report_{time.strftime('%Y%m%dT%H%M%S')}.json"
    try:
        path.write_text(report.to_json())
        print(f"mj-manipulator-ros execute: the record failed; report saved to {path}",
              file=sys.stderr)
    except OSError as exc:
        print(f"mj-manipulator-ros execute: the record failed, and so did saving the report to "
              f"{path} ({exc.strerror}); it is printed above", file=sys.stderr)


def _demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mj_manipulator_ros.apps.demo import DemoError, run_demo, summary
    from mj_manipulator_ros.core.errors import MjManipulatorError
    from mj_manipulator_ros.core.report import ExecutionStatus

    try:
        doc = run_demo(Path(args.config) if args.config else None,
                       Path(args.plan) if args.plan else None, Path(args.out), args.speed,
                       args.view, args.controller)
    except DemoError as exc:
        print(f"mj-manipulator-ros demo: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except MjManipulatorError as exc:
        print(f"mj-manipulator-ros demo: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(summary(doc))
    print(f"report written to {args.out}")
    succeeded = ExecutionStatus(doc["execution"]["status"]) is ExecutionStatus.SUCCEEDED
    return EXIT_OK if succeeded else EXIT_FAILED


def _sim(args: argparse.Namespace) -> int:
    from mj_manipulator_ros.sim.sim_node import run_sim

    return run_sim(args.config, ["mj-manipulator-ros", *args.ros_args], serve=args.serve,
                   record=args.record)


def _scene_info(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from mj_manipulator_ros.check.report import not_collidable_lines
    from mj_manipulator_ros.core.errors import MjManipulatorError
    from mj_manipulator_ros.core.config import load_config
    from mj_manipulator_ros.sim.sim_config import sim_config

    try:
        cfg = sim_config(load_config(args.config))
        if args.control_rate is not None:
            if not args.control_rate > 0:
                raise MjManipulatorError(f"--control-rate must be > 0 Hz, got {args.control_rate}")
            cfg = dataclasses.replace(cfg, sim=dataclasses.replace(
                cfg.sim, control_rate_hz=args.control_rate))
        if args.timestep is not None:
            if not args.timestep > 0:
                raise MjManipulatorError(f"--timestep must be > 0 s, got {args.timestep}")
            cfg = dataclasses.replace(cfg, scene=dataclasses.replace(cfg.scene, timestep=args.timestep))
        scene = cfg.build_scene()
        checker = _checker(args.config)
        allowed, hidden = checker.allowed, checker.not_collidable
    except MjManipulatorError as exc:
        print(f"scene-info: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    step = scene.step
    if args.json:
        print(json.dumps({"config": args.config, "control_rate_hz": cfg.sim.control_rate_hz,
                          "gravity_compensation": cfg.sim.gravity_compensation.value,
                          **step.to_dict(),
                          **({"cosim_exchange": scene.exchange.to_dict()} if scene.exchange
                             else {}), "allowed_collisions": allowed.to_dict(),
                          "not_collidable": {k: list(v) for k, v in hidden.items()}}, indent=2))
        return EXIT_OK
    if scene.exchange:
        print(scene.exchange.summary())
        for b in scene.exchange.bounds:
            print(f"  {b.joint:<28} r = M_ii / J = {b.ratio:7.3f}  needs >= "
                  f"{b.min_rate_hz:7.0f} Hz  {b.why}")
        print("(MuJoCo's integrator does not run under co-simulation; the step it would use:)")
    print(step.summary())
    gravity = ("the MIT controllers' feed-forward (co-simulation)" if scene.exchange
               else cfg.sim.gravity_compensation.value)
    print(f"gravity compensation: {gravity}; integrator "
          f"{cfg.scene.option.integrator}; {scene.model.nbody} bodies, {scene.model.njnt} joints, "
          f"{scene.model.nu} actuators")
    print(f"{'cap':<11} {'element':<52} {'max step ms':>11} {'ok':>3}  cost at this step")
    for c in sorted(step.caps, key=lambda c: (c.max_step, c.cap, c.element)):
        print(f"{c.cap:<11} {c.element[:52]:<52} {c.max_step * 1e3:>11.3f} "
              f"{'yes' if c.ok else 'NO':>3}  {c.cost}")
    print(allowed.table(include_filtered=args.all_pairs))
    for line in not_collidable_lines(hidden):
        print(line.strip())
    return EXIT_OK


def _checker(config_path: str):
    """The replay checker of a configuration (its kinematic scene, the default margin, the
    configuration's own allowed pairs): its ``allowed`` matrix and ``not_collidable`` bodies."""
    from mj_manipulator_ros.check.preflight import scene_checker
    from mj_manipulator_ros.model.limits import load_config_with_model

    return scene_checker(load_config_with_model(config_path))


def _held_at_reference(plan, checker):
    """The plan with every arm of the scene it leaves out standing still at the reference pose
    (the pre-flight check stands such an arm where it is measured), said on stderr."""
    from mj_manipulator_ros.check.preflight import with_held_arms

    left_out = {a: checker.base_qpos[b.qpos_adr] for a, b in checker.arms.items()
                if a not in plan.arm_names}
    for arm, q in left_out.items():
        print(f"check-plan: arm {arm!r} is not in the plan: it stands still at the reference "
              f"pose {[round(float(x), 4) for x in q]} (the pre-flight check stands it where "
              "it is measured)", file=sys.stderr)
    return with_held_arms(plan, left_out, checker.arms)


def _stop_table(args: argparse.Namespace) -> int:
    import time

    from mj_manipulator_ros.apps.stop_table import measured_table, write
    from mj_manipulator_ros.core.errors import MjManipulatorError
    from mj_manipulator_ros.core.plan_io import load_plan
    from mj_manipulator_ros.model.limits import load_config_with_model
    from mj_manipulator_ros.model.scene import scene_for
    from mj_manipulator_ros.sim.sim_config import sim_config

    try:
        config = sim_config(load_config_with_model(args.config))
        plan = load_plan(args.plan)
        kinds = [k for k in args.controllers.split(",") if k]
        unknown = [a for a in args.arm if a not in plan.arm_names]
        if unknown:
            raise MjManipulatorError(f"--arm {unknown}: not in the plan; its arms: "
                                     f"{list(plan.arm_names)}")
        t0 = time.monotonic()
        table = measured_table(config, plan, scene_for(config.executor), kinds,
                               args.payload_kg, args.arm or None,
                               say=lambda m: print(m, file=sys.stderr, flush=True))
        conditions = (f"{args.config}, {args.plan}; simulated (synchronous physics: simulated "
                      f"time); payload {args.payload_kg:g} kg at the hand; "
                      f"{time.monotonic() - t0:.0f} s to make")
        write(table, args.json, args.image, conditions)
        print(table.summary())
        return 0
    except (MjManipulatorError, ValueError) as exc:
        print(f"mj-manipulator-ros stop-table: {exc}", file=sys.stderr)
        return 2


def _check_plan(args: argparse.Namespace) -> int:
    import json
    import os
    from pathlib import Path

    os.environ.setdefault("MUJOCO_GL", "egl")
    from mj_manipulator_ros.check.preflight import scene_checker
    from mj_manipulator_ros.check.timeline import load_recording, timeline_from_recording
    from mj_manipulator_ros.core.errors import MjManipulatorError
    from mj_manipulator_ros.core.plan_io import load_plan
    from mj_manipulator_ros.core.validation import validate_plan
    from mj_manipulator_ros.model.limits import load_config_with_model

    try:
        config = load_config_with_model(args.config)
        skews, band = {}, None
        if args.mode == "band":
            if len(args.skew) != 1:
                raise MjManipulatorError("--mode band needs one --skew SECONDS (the widest "
                                         "plan-time difference between two arms)")
            try:
                band = float(args.skew[0])
            except ValueError:
                raise MjManipulatorError(f"--skew {args.skew[0]!r}: expected SECONDS") from None
        for item in args.skew if args.mode != "band" else ():
            arm, _, value = item.partition("=")
            try:
                skews[arm] = float(value)
            except ValueError:
                raise MjManipulatorError(f"--skew {item!r}: expected ARM=SECONDS") from None
        if skews and args.mode != "skewed":
            raise MjManipulatorError("--skew ARM=S needs --mode skewed")
        if args.every < 1:
            raise MjManipulatorError(f"--every must be >= 1, got {args.every}")
        checker = scene_checker(config, margin=args.margin)
        plan, timeline = None, None
        if args.mode == "recorded":
            joints = {a.name: a.joint_names for a in config.arms}
            timeline = timeline_from_recording(load_recording(args.plan), joints)
        else:
            plan = load_plan(args.plan)
            validate_plan(plan, config)
            plan = _held_at_reference(plan, checker)
        grippers = {}
        for item in args.gripper:
            joint, _, value = item.partition("=")
            try:
                grippers[joint] = float(value)
            except ValueError:
                raise MjManipulatorError(f"--gripper {item!r}: expected JOINT=POSITION") from None
        report = checker.check(plan, mode=args.mode, dt=args.dt, continuous=not args.discrete,
                               skews=skews, every=args.every, timeline=timeline, skew=band,
                               grippers=grippers)
    except (MjManipulatorError, ValueError, OSError) as exc:
        print(f"mj-manipulator-ros check-plan: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    stops = band_need = hold = None
    if args.stops and plan is not None:
        from mj_manipulator_ros.check.failure_band import failure_band
        from mj_manipulator_ros.check.stop_distances import plot_stops, stop_profile
        from mj_manipulator_ros.model.scene import scene_for

        try:
            stops = stop_profile(plan, config, scene_for(config))
            if len(plan.arm_names) > 1:
                band_need = failure_band(plan, config)
            if args.hold:
                from mj_manipulator_ros.sim.hold_overshoot import measure_hold
                from mj_manipulator_ros.sim.sim_config import sim_config

                import numpy as np

                requests = np.linspace(0.0, plan.duration, args.hold + 2)[1:-1]
                hold = measure_hold(sim_config(config), plan, requests)
        except (MjManipulatorError, ValueError) as exc:
            print(f"mj-manipulator-ros check-plan: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if args.stops_plot:
            plot_stops(stops, Path(args.stops_plot), hold)
    if args.json:
        doc = report.to_dict()
        if stops is not None:
            doc["stops"] = stops.to_dict()
        if band_need is not None:
            doc["stop_band"] = band_need.to_dict()
        if hold is not None:
            doc["hold"] = hold.to_dict()
        print(json.dumps(doc, indent=2))
    else:
        extra = [] if stops is None else [stops.summary()]
        if band_need is not None:
            extra.append(f"stop band the pre-flight gate certifies: {band_need.skew_s * 1e3:.0f} "
                         f"ms, set by {band_need.set_by}")
        if hold is not None:
            extra.append(hold.summary(config.execution.hold_overshoot_s))
        print("\n".join([report.summary(), *extra]))
    if args.image:
        from mj_manipulator_ros.check.render import render_worst
        render_worst(checker, report, timeline or plan, Path(args.image), skews)
    if args.plot:
        from mj_manipulator_ros.check.render import plot_clearance
        plot_clearance([report], Path(args.plot))
    return EXIT_OK if report.collision_free else EXIT_FAILED


def _hil(args: argparse.Namespace) -> int:
    from mj_manipulator_ros.hil.runner import run_hil, write_checklist

    if args.write_checklist:
        print(f"wrote {write_checklist()}")
        return EXIT_OK
    if not args.config:
        print("mj-manipulator-ros hil: --config is required", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.measure_load:
        if args.stage is not None or args.through is not None or args.force:
            print("mj-manipulator-ros hil: --measure-load runs alone (no --stage, --through or "
                  "--force)", file=sys.stderr)
            return EXIT_BAD_INPUT
        from mj_manipulator_ros.hil.load_run import run_load_measurement
        return run_load_measurement(args.config, sim=args.sim, yes=args.yes,
                                    results=args.results)
    return run_hil(args.config, sim=args.sim, stage=args.stage, through=args.through, yes=args.yes,
                   force=args.force, reason=args.reason, results=args.results)


def _execution_node(args: argparse.Namespace) -> int:
    from mj_manipulator_ros.apps.execution_node import run_node

    return run_node(["mj-manipulator-ros", *args.ros_args], config_path=args.config)


def build_parser() -> argparse.ArgumentParser:
    from mj_manipulator_ros.core import overrides
    from mj_manipulator_ros.core.config import ExecutionSettings

    parser = argparse.ArgumentParser(
        prog="mj-manipulator-ros",
        description="Synchronized multi-arm execution, MuJoCo simulation and HIL bring-up.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("selfcheck", help="two real nodes exchange a FollowJointTrajectory goal")
    p.set_defaults(func=_selfcheck)
    p = sub.add_parser("init-config", help="a starting configuration for a robot from its MJCF: "
                       "its arms, limits, ready pose, scene; says what to check")
    p.add_argument("model", help="the robot's MJCF file")
    p.add_argument("--out", required=True, help="the configuration file to write (never "
                   "overwritten)")
    p.add_argument("--driver-names", action="store_true",
                   help="each arm's driver publishes its joints without the arm's name prefix, "
                        "on its own topics (driver_joint_names)")
    p.add_argument("--max-velocity", type=float, default=1.0,
                   help="every arm joint's velocity limit, rad/s or m/s (MJCF has none)")
    p.set_defaults(func=_init_config)
    p = sub.add_parser("make-plan", help="a checked wave for every arm of a configuration, from "
                       "its ready pose (what the bring-up runs when no plan fits the robot)")
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True, help="the plan file to write (never overwritten)")
    p.set_defaults(func=_make_plan)
    p = sub.add_parser("demo", help="simulated OpenArm pair runs the crossing plan, synchronized")
    p.add_argument("--config", help="default: config/sim_openarm.yaml")
    p.add_argument("--plan", help="default: config/plans/openarm_crossing.yaml")
    p.add_argument("--out", default="demo_report.json")
    p.add_argument("--speed", type=float, default=1.0, help="speed factor (1 = as planned)")
    p.add_argument("--view", action="store_true", help="open the MuJoCo viewer (needs a display)")
    p.add_argument("--controller", choices=["position", "torque"],
                   help="every arm's simulated controller (default: the config's)")
    p.set_defaults(func=_demo)

    p = sub.add_parser("sim", help="simulated arms behind FollowJointTrajectory servers")
    p.add_argument("--config", required=True, help="configuration with arms, scene and sim")
    p.add_argument("--serve", nargs="+", metavar="ARM",
                   help="serve only these arms (one controller process per arm)")
    p.add_argument("--record", metavar="DIR", help="record joint states, /clock and the served arms' "
                   "action topics as a bag (rosbag2, MCAP) in this new directory, with the config "
                   "and the composed scene inside")
    p.add_argument("ros_args", nargs=argparse.REMAINDER, help="--ros-args ... (optional)")
    p.set_defaults(func=_sim)

    p = sub.add_parser("scene-info", help="the simulator's physics step, the cap that bound it, "
                                          "every cap record")
    p.add_argument("--config", required=True, help="configuration with arms, scene and sim")
    p.add_argument("--control-rate", type=float, metavar="HZ", help="instead of sim.control_rate_hz")
    p.add_argument("--timestep", type=float, metavar="S", help="pin the step (instead of scene.timestep)")
    p.add_argument("--json", action="store_true", help="print everything as JSON")
    p.add_argument("--all-pairs", action="store_true", help="also list the body pairs MuJoCo "
                   "itself never reports (the allowed-collision matrix's 'filtered' pairs)")
    p.set_defaults(func=_scene_info)

    p = sub.add_parser("execute", help="run a plan file on live controllers, synchronized")
    p.add_argument("plan", help="plan file (.yaml/.yml/.json), see docs/files.md")
    p.add_argument("--config", required=True, help="executor configuration (YAML)")
    p.add_argument("--speed", type=float, help="speed factor, e.g. 0.1 for 10 %% speed")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--record", metavar="DIR", help="record the execution as a bag (rosbag2, MCAP) "
                   "in this new directory: joint states, action feedback/status, goals, events; "
                   "plan, config, report and scene inside")
    p.add_argument("--approach", action="store_true",
                   help="if an arm is not at the plan's start, first move it there (slowly, "
                        "synchronized, replay-checked); with --continue, an arm off its plan is "
                        "first moved back to it")
    p.add_argument("--continue", dest="continue_plan", action="store_true",
                   help="continue the plan after a stop from where the arms stand: every arm "
                        "brought back along its own path to the earliest arm's plan time, then "
                        "the rest of the plan (each part checked); an arm off its plan is "
                        "refused by name (nothing moves) unless --approach")
    p.add_argument("--continue-near", type=float, metavar="SECONDS",
                   help="with --continue: the plan time the arms stopped near (s), where "
                        "their plan passes their pose more than once")
    overrides.add_arguments(p, ExecutionSettings)
    p.set_defaults(func=_execute)

    p = sub.add_parser("check-plan", help="replay a plan through the MuJoCo scene; check collisions")
    p.add_argument("plan", help="plan file; with --mode recorded a bag directory, an MCAP file "
                   "or (older records) JSON lines")
    p.add_argument("--config", required=True, help="configuration with arms and scene")
    p.add_argument("--mode", default="synchronized",
                   choices=["synchronized", "sequential", "skewed", "recorded", "band"])
    p.add_argument("--skew", action="append", default=[], metavar="ARM=S | S",
                   help="--mode skewed: ARM starts S seconds late (repeatable); --mode band: "
                        "every pair of arms up to S seconds apart in plan time")
    p.add_argument("--every", type=int, default=1, help="check every K-th state")
    p.add_argument("--dt", type=float, help="check on a uniform grid of this step (s)")
    p.add_argument("--discrete", action="store_true", help="skip the between-states check")
    p.add_argument("--margin", type=float, default=0.005, help="collision margin, m (5 mm)")
    p.add_argument("--gripper", action="append", default=[], metavar="JOINT=POSITION",
                   help="check with this gripper joint (arms[].gripper_joints) standing here, "
                        "rad or m, as the pre-flight stands it where it is measured; default: "
                        "the reference pose (scene.initial_positions)")
    p.add_argument("--arm-env", action="store_true",
                   help="accepted for old scripts: arm-environment pairs are checked by default")
    p.add_argument("--self", dest="self_collision", action="store_true",
                   help="accepted for old scripts: self-collision is checked by default")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--image", help="write a PNG of the worst state")
    p.add_argument("--plot", help="write a PNG of clearance against time")
    p.add_argument("--stops", action="store_true",
                   help="also: the controlled stop asked at every plan time (stop time, joint and "
                        "hand travel until rest; the worst printed)")
    p.add_argument("--stops-plot", metavar="PNG", help="with --stops: a PNG of them against the "
                                                       "plan time of the request")
    p.add_argument("--hold", type=int, default=0, metavar="N",
                   help="with --stops: also cancel every arm at N plan times in the "
                        "configuration's simulator and measure how far each runs on (against "
                        "execution.hold_overshoot_s)")
    p.set_defaults(func=_check_plan)

    p = sub.add_parser("stop-table", help="stop time and travel per arm, joint and speed "
                       "(ISO 10218-1 Annex B style): predicted, and measured in the simulator")
    p.add_argument("plan", help="plan file: its extended and folded poses of each arm")
    p.add_argument("--config", required=True, help="configuration with arms, scene and sim")
    p.add_argument("--arm", action="append", default=[], help="only this arm (repeatable)")
    p.add_argument("--controllers", default="position,torque,mit",
                   help="simulated controller kinds to measure with, comma-separated (position, "
                        "torque, mit); empty: predicted only")
    p.add_argument("--payload-kg", type=float, default=0.5,
                   help="each kind measured again with this mass at the hand (0: not)")
    p.add_argument("--json", help="write the table as JSON")
    p.add_argument("--image", help="write a PNG of it")
    p.set_defaults(func=_stop_table)

    p = sub.add_parser("hil", help="hardware-in-the-loop bring-up: staged, gated, recorded")
    p.add_argument("--config", help="the setup's configuration")
    p.add_argument("--sim", action="store_true", help="rehearse against the simulator")
    p.add_argument("--stage", type=int, help="run this stage only (gated)")
    p.add_argument("--through", type=int, help="run stages 0..N in order")
    p.add_argument("--yes", action="store_true", help="skip confirmations (only with --sim)")
    p.add_argument("--force", action="store_true", help="run a gated stage (needs --reason)")
    p.add_argument("--reason", help="why the gate is forced (recorded)")
    p.add_argument("--results", default="hil/results", help="records folder (default hil/results)")
    p.add_argument("--write-checklist", action="store_true",
                   help="regenerate hil/CHECKLIST.md from hil/stages.yaml and exit")
    p.add_argument("--measure-load", action="store_true",
                   help="measure each arm's load through a pose set and write the corrected "
                        "model (mass_overlay.json) to the run folder (moves the robot; stage 0 "
                        "passed, stage 1 failing on nothing but its load)")
    p.set_defaults(func=_hil)

    p = sub.add_parser("execution-node", help="serve the combined FollowJointTrajectory action")
    p.add_argument("--config", required=True, help="executor configuration (YAML)")
    p.add_argument("ros_args", nargs=argparse.REMAINDER, help="--ros-args ... (optional)")
    p.set_defaults(func=_execution_node)
    return parser


def main(argv: list[str] | None = None) -> int:
    import os

    os.environ.setdefault("MUJOCO_GL", "egl")  # offscreen pictures without a display
    parser = build_parser()
    argv, ros_args = split_ros_args(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if ros_args:
        if not hasattr(args, "ros_args"):
            parser.error(f"{args.command} takes no --ros-args (the sim and execution-node "
                         "subcommands do)")
        args.ros_args = [*args.ros_args, *ros_args]
    return int(args.func(args))


def split_ros_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the program's arguments, the ROS arguments): ROS arguments run from ``--ros-args`` to a
    lone ``--`` or the end, anywhere after the subcommand, as ``ros2 run`` users type them."""
    argv = list(argv)
    if "--ros-args" not in argv:
        return argv, []
    start = argv.index("--ros-args")
    end = argv.index("--", start) if "--" in argv[start:] else len(argv)
    return argv[:start] + argv[end + 1:], argv[start:end]


if __name__ == "__main__":
    sys.exit(main())
