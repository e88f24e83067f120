"""``mj-manipulator-ros hil --measure-load``: the arm's real load measured on the robot, when its
model's masses are too far off for the bring-up to go on.

Stage 1 weighs each arm at rest against its model; an arm heavier or lighter than the model
(openarm_ros2#72: its shoulder held 12-34 % short of the command; openarm_description#49) fails
``gravity_consistency`` there, named as a load ("explained by: the arm 0.50 kg heavier at its
last link"), and every gravity check after it would fail the same way. This procedure measures
the load so the model can carry it:

1. stage 1's checks run first (no motion); anything but a gravity failure explained as a load
   refuses the procedure by name: the load is measured on an arm wired as the model says;
2. after the typed confirmation (``--yes`` only with ``--sim``), each arm in turn visits
   ``load_poses`` poses picked to tell its links' masses and a payload apart (``load_poses``
   in ``hil/load_fit.py``: one or two joints turned by up to ``load_move_rad`` from the start
   pose, within the limits, clear of contact, each move replay-checked with the other arms
   holding), at the bring-up's slow speed, and rests ``load_settle_s`` at each; then it goes
   back;
3. each arm's load is fitted (``fit_load``: a mass factor per link with its prior, a payload at
   the last link, each joint's error at rest counting its static friction) and said with the
   standard errors; the corrected model is written as ``mass_overlay.json`` in the run folder.

Naming it as ``scene.mass_overlay`` puts the load in the model the checks, the simulator, the
actuator twin and the gravity feed-forward build from; stage 1 then weighs the arm with it.
The settings are ``hil/stages.yaml``'s (``settings.load_*``). Exit codes as ``hil``'s.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Callable, Optional

from mj_manipulator_ros.core.errors import MjManipulatorError
from mj_manipulator_ros.core.heap import FrozenHeap
from mj_manipulator_ros.hil.check_result import CheckStatus
from mj_manipulator_ros.hil.records import GateState, RunRecord, fingerprint
from mj_manipulator_ros.hil.runners.load_measure import OVERLAY_FILE
from mj_manipulator_ros.hil.runner import (EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NOT_RUN, EXIT_OK,
                                           EXIT_REFUSED, open_session)
from mj_manipulator_ros.hil.setup_thresholds import with_setup
from mj_manipulator_ros.hil.stages import load_protocol
from mj_manipulator_ros.model.limits import load_config_with_model

#: the procedure's name in the records and the summary
PROCEDURE = "Load measurement"


def is_load(result) -> bool:
    """A stage-1 gravity failure the model's masses explain and nothing else does (a joint
    fault that explains it too, said as "or by", leaves the wiring in doubt)."""
    return (result.name == "gravity_consistency" and "explained by: the arm " in result.detail
            and "; or by: " not in result.detail)


def run_load_measurement(config_path: str, sim: bool = False, yes: bool = False,
                         results: str = "hil/results", ask: Callable[[str], str] = input,
                         is_tty: Optional[bool] = None,
                         say: Callable[[str], None] = print) -> int:
    """The procedure of the module docstring; returns an exit code."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    if yes and not sim:
        say("hil: --yes is accepted only with --sim (on hardware the load measurement moves the "
            "robot: it needs a typed confirmation with the e-stop in reach)")
        return EXIT_REFUSED
    try:
        config = load_config_with_model(config_path)
        protocol = with_setup(load_protocol(), config.extra.get("hil"))
    except MjManipulatorError as exc:
        say(f"hil: {exc}")
        return EXIT_REFUSED
    if not sim and "scene" not in config.extra:
        say("hil: --measure-load needs the robot's model (a scene section): the load is what "
            "the model gets wrong")
        return EXIT_REFUSED
    target = "sim" if sim else "hardware"
    fp = fingerprint(config, target)
    root = Path(results)
    if GateState(root).last_passed(fp) < 0:
        say(f"hil: --measure-load moves the robot: stage 0 must pass first for this setup "
            f"(fingerprint {fp})")
        return EXIT_REFUSED
    is_tty = sys.stdin.isatty() if is_tty is None else is_tty
    record = RunRecord(root, {"config": str(Path(config_path).resolve()), "target": target,
                              "fingerprint": fp, "stages": [], "procedure": "measure_load"})
    say(f"hil: {target}, setup {fp}, the load measurement; records in {record.dir}")
    from mj_manipulator_ros.hil.session import Interrupted
    session = open_session(config, sim, protocol, record, ask, say, is_tty)
    heap = FrozenHeap()   # as run_hil: what is alive now kept out of the runs' collections
    previous = signal.getsignal(signal.SIGINT)
    prompting = [False]   # at the confirmation prompt: nothing runs, Ctrl-C leaves at once

    def on_sigint(_signum, _frame):
        session.interrupt()   # the running move canceled; no move is sent after it
        if prompting[0]:
            raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_sigint)
    outcome = "FAILED"
    try:
        heap.freeze()
        code = _measure(session, protocol, record, sim, yes, is_tty, ask, say, prompting)
        outcome = {EXIT_OK: "passed", EXIT_REFUSED: "refused",
                   EXIT_NOT_RUN: "not run: no confirmation"}.get(code, "FAILED")
    except (Interrupted, KeyboardInterrupt) as exc:
        report = getattr(exc, "report", None)
        unconfirmed = report.unconfirmed_arms if report is not None else []
        record.event("interrupted", detail="Ctrl-C: every arm canceled" + (
            f"; STOP NOT CONFIRMED for {unconfirmed}" if unconfirmed else ""))
        say("hil: interrupted; every arm was canceled" + (
            f"; STOP NOT CONFIRMED for {unconfirmed}" if unconfirmed else ""))
        code, outcome = EXIT_INTERRUPTED, "interrupted"
    except Exception as exc:  # noqa: BLE001 - recorded before leaving
        record.event("error", detail=f"{type(exc).__name__}: {exc}")
        say(f"hil: error: {type(exc).__name__}: {exc}")
        code = EXIT_FAILED
    finally:
        signal.signal(signal.SIGINT, previous)
        bags = session.bags
        session.close()
        heap.release()
        record.close([(1, PROCEDURE, outcome)], None, None, bags=bags)
    return code


def _measure(session, protocol, record, sim: bool, yes: bool, is_tty: bool, ask, say,
             prompting: list) -> int:
    from mj_manipulator_ros.hil import runners

    if not session.wait_for_joint_states(timeout=session.config.execution.server_wait_s):
        say("hil: no /joint_states for every arm; is the robot (or --sim) up?")
        return EXIT_FAILED
    connected = protocol.stage(1)
    session.stage = connected.number
    checks = runners.RUNNERS[connected.runner_name](session, connected, protocol)
    for r in checks:
        record.check(r)
    blocking = [r for r in checks if r.status in (CheckStatus.FAILED, CheckStatus.NOT_MEASURED)
                and not is_load(r)]
    if blocking:
        for r in blocking:
            say(f"  [{r.status.value}] {r.name} {r.subject}  {r.detail}")
        say("hil: the load is measured on an arm wired as its model says: stage 1 failed on "
            "more than its load (above); fix that first")
        return EXIT_REFUSED
    settings = protocol.settings
    word = settings["confirm_word"]
    if not (sim and yes):
        if not is_tty and not sim:
            say("hil: the load measurement moves the robot and needs a typed confirmation, but "
                "there is no interactive terminal: refusing")
            return EXIT_NOT_RUN
        say(f"The load measurement moves each arm in turn through {settings['load_poses']} poses, "
            f"up to {settings['load_move_rad']:g} rad of one or two joints from where it stands, "
            "slowly, resting at each; then back.")
        prompting[0] = True
        try:
            answer = ask(f"E-stop in reach? Type '{word}' to start: ")
        except EOFError:
            return EXIT_NOT_RUN
        finally:
            prompting[0] = False
        if answer.strip() != word:
            return EXIT_NOT_RUN
    from mj_manipulator_ros.hil.runners.joint_jog import gravity_models
    from mj_manipulator_ros.hil.runners.load_measure import fit_rests, visit_load_poses

    session.stage = 2
    models = gravity_models(session)
    fitted = {}
    for arm in session.config.arm_names:
        rests = visit_load_poses(session, arm, models.get(arm), settings, say)
        if isinstance(rests, str):
            record.event("load_measurement_failed", arm=arm, detail=rests)
            say(f"hil: {arm}: {rests}")
            return EXIT_FAILED
        fitted[arm] = rests
    overlay, lines = fit_rests(models, fitted)
    path = record.dir / OVERLAY_FILE
    path.write_text(json.dumps(overlay, indent=1))
    for arm, line in lines.items():
        record.event("load_fit", arm=arm, detail=line)
        say(f"  {arm}: {line}")
    record.event("mass_overlay", path=str(path))
    say(f"hil: the corrected model: {path}; name it in the configuration (scene: "
        "{mass_overlay: <that file>}) and run stage 1 again")
    return EXIT_OK
