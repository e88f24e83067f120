"""A controlled stop requested while an arm is taking up a speed change is never lost: the
arm's thread takes a pending request (a speed change, a stop, a pause, a resume) in one step
under the arm's lock, so a request written meanwhile stays for its next turn.

The interleaving is forced, not waited for: a trace function stops the arm's thread between
reading the speed change and clearing it, and the stop is requested right there."""

from __future__ import annotations

import inspect
import threading

from mj_manipulator_ros.core.arm_requests import ArmRequests
from mj_manipulator_ros.core.report import ExecutionStatus, StopKind
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from openarm_stop_driver import _after_stamp
from test_execution_watch import swing_plan
from tiny_arm import tiny_config


#: the stamps' lead here, s. The left arm's thread is held (up to 0.1 s) inside the speed
#: change while the stop is requested; the stop's stamp is fixed then, and that thread sends the
#: speed change's goal, reads its answer and only then the stop's goal, all within the lead, its
#: every call traced. On a loaded machine the stop's goal reached the simulator 0.67 s after the
#: request, past its own end at the default 0.25 s (rejected: "trajectory ends in the past")
CHAINED_LEAD_S = 1.0


def _clearing_line() -> int:
    """The line of ``ArmRequests.take`` that clears the slot it has read."""
    lines, first = inspect.getsourcelines(ArmRequests.take)
    return first + next(k for k, text in enumerate(lines) if "self._slot = None" in text)


def test_a_stop_requested_while_a_speed_change_is_taken_stops_every_arm(tiny_sim, ros,
                                                                       tmp_path) -> None:
    """At 1 s into a 4 s swing the speed drops to 0.5; as the left arm's thread has read that
    change and not yet cleared it, a controlled stop is requested. Both arms end stopped by
    the controlled stop (regression: the left arm's stop was overwritten, it ran the slowed
    plan to its end while the right arm stopped: the arms apart in plan time)."""
    tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True,
                                              "start_lead_s": CHAINED_LEAD_S}).executor
    code, line = ArmRequests.take.__code__, _clearing_line()
    fired, stop_done, outcome = threading.Event(), threading.Event(), {}
    executor = MultiArmExecutor(config, context=ros.context)

    def request_stop() -> None:
        outcome["stopped"] = executor.stop("stop during the speed change")
        stop_done.set()

    def local(frame, event, _arg):
        if event == "line" and frame.f_lineno == line and not fired.is_set() \
                and frame.f_locals["self"].arm == "left":
            fired.set()
            threading.Thread(target=request_stop, name="test-stop").start()
            stop_done.wait(0.1)   # done at once (~10 ms), unless the arm's lock holds it back
        return local

    def tracer(frame, event, _arg):
        return local if frame.f_code is code else None

    def operator() -> None:
        _after_stamp(executor, 1.0)
        outcome["slowed"] = executor.set_speed(0.5)

    with executor:
        t = threading.Thread(target=operator, name="test-operator")
        t.start()
        threading.settrace(tracer)   # the arm threads started by execute() are traced
        try:
            report = executor.execute(swing_plan(duration=4.0, amplitude=0.8))
        finally:
            threading.settrace(None)
        t.join(10)
        stop_done.wait(10)
    assert fired.is_set(), "the left arm never took up the speed change"
    assert outcome.get("slowed") and outcome.get("stopped"), outcome
    assert report.status is ExecutionStatus.STOPPED, report.summary()
    for arm, r in report.arms.items():
        assert r.stop is StopKind.CONTROLLED, (arm, report.summary())
    ends = {round(s.plan_time_end, 3) for s in report.stops if s.plan_time_end is not None}
    assert len(ends) == 1, report.summary()
