"""``mj-manipulator-ros hil``: run bring-up stages with gating, confirmation and records.

Exit codes: 0 every stage run passed; 1 a stage failed (a check failed or measured nothing);
2 refused before any stage ran (bad arguments, gate closed); 3 a stage did not run (its
confirmation was refused or impossible: no terminal); 130 interrupted (Ctrl-C; every arm
canceled, the record says whether each stop was confirmed).
"""

from __future__ import annotations

import dataclasses

import os
import signal
import sys
from pathlib import Path
from typing import Callable, Optional

from mj_manipulator_ros.core.errors import MjManipulatorError
from mj_manipulator_ros.core.heap import FrozenHeap
from mj_manipulator_ros.hil import runners
from mj_manipulator_ros.hil.check_result import CheckStatus
from mj_manipulator_ros.hil.records import GateState, RunRecord, fingerprint
from mj_manipulator_ros.hil.setup_thresholds import with_setup
from mj_manipulator_ros.hil.stages import load_protocol, render_checklist, stages_file
from mj_manipulator_ros.model.limits import load_config_with_model

EXIT_OK, EXIT_FAILED, EXIT_REFUSED, EXIT_NOT_RUN, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def run_hil(config_path: str, sim: bool = False, stage: Optional[int] = None,
            through: Optional[int] = None, yes: bool = False, force: bool = False,
            reason: Optional[str] = None, results: str = "hil/results",
            ask: Callable[[str], str] = input, is_tty: Optional[bool] = None,
            say: Callable[[str], None] = print) -> int:
    # the operator's pictures without a display (takes effect if MuJoCo has not chosen its GL
    # backend yet: the CLI and the tests set it before importing MuJoCo)
    os.environ.setdefault("MUJOCO_GL", "egl")
    protocol = load_protocol()
    numbers = [s.number for s in protocol.stages]
    if yes and not sim:
        say("hil: --yes is accepted only with --sim (on hardware every motion stage needs a "
            "typed confirmation with the e-stop in reach)")
        return EXIT_REFUSED
    if force and not reason:
        say("hil: --force needs --reason TEXT (it is recorded with the results)")
        return EXIT_REFUSED
    if stage is not None and through is not None:
        say("hil: give --stage N or --through N, not both")
        return EXIT_REFUSED
    for n in (stage, through):
        if n is not None and n not in numbers:
            say(f"hil: no stage {n}; stages are {numbers}")
            return EXIT_REFUSED
    try:
        config = load_config_with_model(config_path)
        protocol = with_setup(protocol, config.extra.get("hil"))
    except MjManipulatorError as exc:
        say(f"hil: {exc}")
        return EXIT_REFUSED
    target = "sim" if sim else "hardware"
    fp = fingerprint(config, target)
    root = Path(results)
    gate = GateState(root)
    last = gate.last_passed(fp)
    if stage is not None:
        todo = [stage]
    elif through is not None:
        todo = list(range(0, through + 1))
    else:
        todo = [min(last + 1, numbers[-1])]
    first = todo[0]
    if first > last + 1 and not force:
        say(f"hil: stage {first} is gated: stages up to {first - 1} must pass first for this setup "
            f"(fingerprint {fp}, last passed: {last if last >= 0 else 'none'}). Run them, or "
            "--force --reason TEXT.")
        return EXIT_REFUSED
    is_tty = sys.stdin.isatty() if is_tty is None else is_tty
    record = RunRecord(root, {"config": str(Path(config_path).resolve()), "target": target,
                              "fingerprint": fp, "stages": todo})
    if force and first > last + 1:
        record.event("forced", stage=first, reason=reason, last_passed=last)
    say(f"hil: {target}, setup {fp}, stages {todo}; records in {record.dir}")
    session = None
    heap = FrozenHeap()   # released when this returns: the caller's process may live on
    ran: list[tuple[int, str, str]] = []
    code = EXIT_OK
    previous = signal.getsignal(signal.SIGINT)
    interrupted = [False]
    prompting = [False]   # at a confirmation prompt: nothing runs, Ctrl-C leaves at once

    def on_sigint(_signum, _frame):
        interrupted[0] = True
        if session is not None:
            session.interrupt()
        if session is None or prompting[0]:
            raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_sigint)
    try:
        for number in todo:
            st = protocol.stage(number)
            prompting[0] = True
            try:
                go = not st.moves or confirm(st, protocol, sim, yes, is_tty, ask, say)
            finally:
                prompting[0] = False
            if not go:
                record.event("refused", stage=number, reason="no confirmation")
                ran.append((number, st.name, "not run: no confirmation"))
                code = EXIT_NOT_RUN
                break
            say(f"--- stage {number}: {st.name}")
            if st.runner_name in runners.OFFLINE_RUNNERS:
                results_ = runners.OFFLINE_RUNNERS[st.runner_name](config, st, protocol)
            else:
                if session is None:
                    session = open_session(config, sim, protocol, record, ask, say, is_tty)
                    if not session.wait_for_joint_states(timeout=config.execution.server_wait_s):
                        say("hil: no /joint_states for every arm; is the robot (or --sim) up?")
                session.stage = number
                # the simulator (--sim), the executor and this stage's measurements share this
                # process: what is alive now (models, checkers, records, the earlier stages'
                # results) is kept out of every full collection the stage would pause for
                # (core/heap.py; 100-290 ms pauses were late acceptances of a healthy arm)
                heap.freeze()
                results_ = runners.RUNNERS[st.runner_name](session, st, protocol)
            for r in results_:
                record.check(r)
                mark = {CheckStatus.PASSED: "pass", CheckStatus.FAILED: "FAIL",
                        CheckStatus.NOT_MEASURED: "NOT MEASURED",
                        CheckStatus.NOT_APPLICABLE: "n/a"}[r.status]
                shown_value = "-" if r.measured is None else f"{r.measured:.4g}"
                value = "" if r.threshold is None else f" {shown_value} (threshold {r.threshold:g} {r.unit})"
                shown = r.detail if r.detail and r.status is not CheckStatus.PASSED else ""
                say(f"  [{mark}] {r.name} {r.subject}{value}{'  ' + shown if shown else ''}")
            passed = bool(results_) and all(r.passed for r in results_)
            ran.append((number, st.name, "passed" if passed else "FAILED"))
            if passed:
                gate.record_pass(fp, number, record.dir, forced=force)
            else:
                say(f"stage {number} FAILED. {st.on_failure}")
                if session is not None and session.sim_node is not None:
                    # rehearsed: every figure above went through the simulator and this
                    # process's executor; how well it kept time belongs beside them
                    health = session.sim_node.shared.health()
                    target = session.sim_node.config.sim.real_time_factor
                    record.event("simulator_health", stage=number,
                                 target_real_time_factor=target, **dataclasses.asdict(health))
                    say(f"  rehearsed: every figure above went through the simulator (target "
                        f"{target:g}x real time): {health.summary()}")
                code = EXIT_FAILED
                break
    except Exception as exc:  # noqa: BLE001 - Interrupted, or a fault to record before leaving
        from mj_manipulator_ros.hil.session import Interrupted
        if isinstance(exc, Interrupted) or interrupted[0]:
            report = getattr(exc, "report", None)
            if report is None and session is not None and session.last_run is not None:
                report = session.last_run[1]
            unconfirmed = report.unconfirmed_arms if report is not None else []
            record.event("interrupted", detail="Ctrl-C: every arm canceled" + (
                f"; STOP NOT CONFIRMED for {unconfirmed}" if unconfirmed else ""),
                report=None if report is None else report.to_dict())
            say("hil: interrupted; every arm was canceled" + (
                f"; STOP NOT CONFIRMED for {unconfirmed}" if unconfirmed else ""))
            code = EXIT_INTERRUPTED
        else:
            record.event("error", detail=f"{type(exc).__name__}: {exc}")
            say(f"hil: error: {type(exc).__name__}: {exc}")
            code = EXIT_FAILED
    except KeyboardInterrupt:
        record.event("interrupted", detail="Ctrl-C with no motion running (before a stage or "
                                           "at its confirmation prompt)")
        say("hil: interrupted; no motion was running")
        code = EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGINT, previous)
        timeline = None
        if session is not None and session.sim_node is not None and \
                session.sim_node.shared.error is not None:   # stopped after the last run
            error = session.sim_node.shared.error
            record.event("simulator_stopped", detail=f"{type(error).__name__}: {error}")
            say(f"hil: the simulator stopped: {type(error).__name__}: {error}")
        if session is not None:
            timeline = session.last_synchronized_run or session.last_run
            session.close()
        heap.release()   # what this run left in reference cycles is collectable again
        record.close(ran, timeline, {a.name: a.joint_names for a in config.arms},
                     bags=[] if session is None else session.bags)
    say(f"hil: {'all stages passed' if code == EXIT_OK else 'stopped'}; summary: {record.dir / 'summary.md'}")
    return code


def open_session(config, sim: bool, protocol, record: RunRecord, ask, say, is_tty: bool):
    """The bring-up's session for one run, its records in ``record``'s folder (bags, pictures,
    the black box, the scene, whatever a stage writes)."""
    from mj_manipulator_ros.hil.session import HilSession
    session = HilSession(config, sim=sim,
                         real_time_factor=protocol.settings["sim_real_time_factor"],
                         joint_states_keep_s=protocol.settings["joint_states_keep_s"],
                         black_box_dir=str(record.dir / "black_box"))
    _attach_scene(record, session, config)
    session.bags_dir = record.dir / "bags"
    session.pictures_dir = record.dir / "pictures"
    session.records_dir = record.dir
    session.ask, session.say, session.is_tty = ask, say, is_tty
    return session


def confirm(stage, protocol, sim: bool, yes: bool, is_tty: bool, ask, say) -> bool:
    if sim and yes:
        return True
    if not is_tty and not sim:
        say(f"hil: stage {stage.number} moves the robot and needs a typed confirmation, but there "
            "is no interactive terminal: refusing")
        return False
    word = protocol.settings["confirm_word"]
    say(f"Stage {stage.number} ({stage.name}) moves the robot. {stage.operator}")
    try:
        answer = ask(f"E-stop in reach? Type '{word}' to start stage {stage.number}: ")
    except EOFError:
        return False
    return answer.strip() == word


def write_checklist(path: Optional[Path] = None) -> Path:
    path = path or stages_file().parent / "CHECKLIST.md"
    path.write_text(render_checklist(load_protocol()))
    return path


def _attach_scene(record: RunRecord, session, config) -> None:
    """The simulated scene (with --sim), else the replay check's scene when the config has one."""
    if session.sim_node is not None:
        record.attach_scene(session.sim_node.scene, "simulation")
    elif "scene" in config.extra:
        from mj_manipulator_ros.model.scene import scene_for
        scene = scene_for(config)
        record.attach_scene(scene, "replay check")
        session.executor.record_artifacts = scene.artifacts()
