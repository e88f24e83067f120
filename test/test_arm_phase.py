"""Where an arm's part of an execution is (core/arm_phase.py): the table's rules, and the phases
a real arm's thread goes through in a real execution (tiny pair, real rclpy and DDS, real
MuJoCo): a plain run, a pause and a resume, a cancel, a controlled stop."""

from __future__ import annotations

import threading

import pytest

from mj_manipulator_ros.core.arm_phase import TRANSITIONS, ArmPhase, arm_transition
from mj_manipulator_ros.core.errors import IllegalTransitionError
from mj_manipulator_ros.core.report import ArmStatus, ExecutionStatus
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from factories import make_config, make_plan, wait_for_plan_time
from tiny_arm import swing, tiny_config

P = ArmPhase


def test_every_phase_but_done_and_replacing_can_end_and_done_is_final() -> None:
    """Replacing goes through stopping: the goal it replaces may still run."""
    ends = {p for p in ArmPhase if (p, P.DONE) in TRANSITIONS}
    assert ends == set(ArmPhase) - {P.DONE, P.REPLACING}
    assert (P.REPLACING, P.STOPPING) in TRANSITIONS
    assert not any(a is P.DONE for a, _ in TRANSITIONS)


@pytest.mark.parametrize("current, wanted", [
    (P.IDLE, P.RUNNING), (P.AT_GATE, P.RUNNING), (P.PAUSED, P.RUNNING), (P.PAUSED, P.STOPPING),
    (P.STOPPING, P.RUNNING), (P.DONE, P.DISCOVERING), (P.DISCOVERING, P.SENDING),
    (P.REPLACING, P.DONE)])
def test_an_illegal_transition_is_refused_by_name(current, wanted) -> None:
    with pytest.raises(IllegalTransitionError) as err:
        arm_transition(current, wanted, "test", "left")
    text = str(err.value)
    assert f"arm 'left' phase: no transition from {current.value} to {wanted.value}" in text
    assert "asked for: test" in text


def _phases(tiny_sim, ros, tmp_path, act=None, duration: float = 3.0):
    """Run the tiny pair's swing; ``act(executor)`` at plan time 1.0 s. Returns the report and
    each arm's phases in order."""
    tiny_sim()
    config = tiny_config(tmp_path, execution={"use_sim_time": True}).executor
    with MultiArmExecutor(config, context=ros.context) as executor:
        thread = None
        if act is not None:
            thread = threading.Thread(target=lambda: (wait_for_plan_time(executor, 1.0),
                                                      act(executor)))
            thread.start()
        report = executor.execute(swing(duration))
        if thread is not None:
            thread.join(30)
            assert not thread.is_alive()
        runs = executor.last_run.arms
    return report, {a: [p for p, _cause in r.phases] for a, r in runs.items()}


HEAD = [P.DISCOVERING, P.AT_GATE, P.SENDING, P.RUNNING]


def test_a_plain_run(tiny_sim, ros, tmp_path) -> None:
    report, phases = _phases(tiny_sim, ros, tmp_path)
    assert report.succeeded, report.summary()
    assert phases == {"left": HEAD + [P.DONE], "right": HEAD + [P.DONE]}


def test_a_pause_and_a_resume(tiny_sim, ros, tmp_path) -> None:
    def pause_then_resume(executor) -> None:
        assert executor.pause("test pause")
        deadline = 100
        while not all(r.paused for r in executor.last_run.arms.values()) and deadline:
            threading.Event().wait(0.05)
            deadline -= 1
        assert executor.resume()
    report, phases = _phases(tiny_sim, ros, tmp_path, pause_then_resume)
    assert report.succeeded, report.summary()
    pause = [P.REPLACING, P.RUNNING, P.PAUSED, P.REPLACING, P.RUNNING, P.DONE]
    assert phases == {"left": HEAD + pause, "right": HEAD + pause}


def test_a_cancel(tiny_sim, ros, tmp_path) -> None:
    report, phases = _phases(tiny_sim, ros, tmp_path, lambda ex: ex.abort("test abort"))
    assert report.status is ExecutionStatus.CANCELED, report.summary()
    assert phases == {"left": HEAD + [P.STOPPING, P.DONE],
                      "right": HEAD + [P.STOPPING, P.DONE]}


def test_a_controlled_stop(tiny_sim, ros, tmp_path) -> None:
    report, phases = _phases(tiny_sim, ros, tmp_path, lambda ex: ex.stop("test stop"))
    assert report.status is ExecutionStatus.STOPPED, report.summary()
    assert phases == {"left": HEAD + [P.REPLACING, P.RUNNING, P.DONE],
                      "right": HEAD + [P.REPLACING, P.RUNNING, P.DONE]}


# -- the rest of the table, each transition forced against scripted controllers ------------
# (real action servers in this process: ``ros/scripted_controller.py``; no joint states, so
# the start-state and clock checks are off: ``factories.make_config``)

def _scripted_phases(ros, scripted, behaviors: dict, act=None, act_at: float = 0.3,
                     duration: float = 2.0, serve=None, **execution):
    """Run ``make_plan`` on scripted controllers (``behaviors``; only the arms in ``serve``,
    default all, get one); ``act(executor)`` at plan time ``act_at``. Returns the report, each
    arm's phases in order, and the controllers."""
    arms = tuple(behaviors)
    controllers = scripted({a: b for a, b in behaviors.items() if serve is None or a in serve})
    config = make_config(arms, **execution)
    with MultiArmExecutor(config, context=ros.context) as executor:
        thread = None
        if act is not None:
            thread = threading.Thread(target=lambda: (wait_for_plan_time(executor, act_at),
                                                      act(executor)))
            thread.start()
        report = executor.execute(make_plan(arms, duration=duration))
        if thread is not None:
            thread.join(30)
            assert not thread.is_alive()
        runs = executor.last_run.arms
    return report, {a: [p for p, _ in r.phases] for a, r in runs.items()}, controllers


def test_no_action_server_ends_discovering_and_its_peer_at_the_gate(ros, scripted) -> None:
    """discovering -> done, at_gate -> done. (An arm name no other test serves: a server
    another test of this worker made may still be in the DDS graph after its participant
    left.)"""
    report, phases, ctl = _scripted_phases(
        ros, scripted, {"left": "succeed", "never_served_a": "succeed"}, serve=("left",),
        server_wait_s=1.5)
    assert report.status is ExecutionStatus.FAILED, report.summary()
    assert report.first_failure.arm == "never_served_a"
    assert "not available" in report.first_failure.error_string
    assert phases == {"left": [P.DISCOVERING, P.AT_GATE, P.DONE],
                      "never_served_a": [P.DISCOVERING, P.DONE]}
    assert not ctl["left"].goals   # nothing sent


def test_a_rejected_goal_ends_sending_and_a_peer_in_flight_stops_there(ros, scripted) -> None:
    """sending -> done (rejected); sending -> stopping (canceled with the goal in flight: the
    peer's controller answers after 1 s), then its goal, accepted, is canceled."""
    report, phases, ctl = _scripted_phases(
        ros, scripted, {"left": "reject", "right": ("slow_accept", 1.0)})
    assert report.status is ExecutionStatus.FAILED, report.summary()
    assert report.first_failure.arm == "left" and "rejected" in report.first_failure.error_string
    assert phases == {"left": [P.DISCOVERING, P.AT_GATE, P.SENDING, P.DONE],
                      "right": [P.DISCOVERING, P.AT_GATE, P.SENDING, P.STOPPING, P.DONE]}
    right = report.arms["right"]
    assert right.status is ArmStatus.CANCELED and right.stop_confirmed, right
    assert ctl["right"].cancel_requests >= 1 and ctl["right"].outcomes[-1][1] == "canceled"


def test_a_rejected_replacement_and_one_in_flight_both_stop(ros, scripted) -> None:
    """replacing -> stopping, both ways: the left controller rejects the pause's goal 0.5 s
    after it came (the plan goal it still runs is canceled); the right one answers its pause
    goal only after 1.5 s, and the execution has failed meanwhile (canceled in flight;
    accepted, then canceled)."""
    report, phases, ctl = _scripted_phases(
        ros, scripted, {"left": ("reject", 0.5, 2), "right": ("slow_accept", 1.5, 2)},
        act=lambda ex: ex.pause("test pause"), duration=3.0)
    assert report.status is ExecutionStatus.FAILED, report.summary()
    assert report.first_failure.arm == "left" and "pause goal rejected" in report.first_failure.error_string
    tail = [P.REPLACING, P.STOPPING, P.DONE]
    assert phases == {"left": HEAD + tail, "right": HEAD + tail}
    for arm in ("left", "right"):
        assert report.arms[arm].stop_confirmed, report.arms[arm]
        assert report.arms[arm].cancel_requested_at is not None, report.arms[arm]
    # left: its plan goal canceled; right: the plan goal preempted by the pause goal taken
    # late, which the cancel ended, or which had ended by itself when the cancel came (then
    # answered "terminated"; which one is the machine's timing: a scripted goal does not move)
    assert ctl["left"].outcomes == [(ctl["left"].goals[0].stamp_ns, "canceled")]
    outcome = dict(ctl["right"].outcomes)
    assert outcome[ctl["right"].goals[0].stamp_ns] == "preempted", outcome
    assert outcome[ctl["right"].goals[1].stamp_ns] in ("canceled", "succeeded"), outcome
    assert len(ctl["left"].goals) == 2 and len(ctl["right"].goals) == 2


def test_a_replacement_never_answered_leaves_the_stop_unconfirmed(ros, scripted) -> None:
    """The right controller takes its pause goal 3 s after it came, past the accept and cancel
    waits: the plan goal it replaced is canceled and its result read, but the replacement may
    be running: the arm's stop is not confirmed (regression: the old goal's result confirmed it,
    CANCELED, while the controller then ran the new goal)."""
    report, phases, ctl = _scripted_phases(
        ros, scripted, {"left": "succeed", "right": ("slow_accept", 3.0, 2)},
        act=lambda ex: ex.pause("test pause"), duration=3.0, accept_wait_s=0.4,
        cancel_wait_s=0.6)
    assert report.status is not ExecutionStatus.SUCCEEDED, report.summary()
    right = report.arms["right"]
    assert right.status is ArmStatus.UNCONFIRMED_STOP and not right.stop_confirmed, right
    assert "pause goal sent but never answered" in right.error_string, right.error_string
    assert phases["right"] == HEAD + [P.REPLACING, P.STOPPING, P.DONE]


def test_an_arm_thread_that_cannot_start_ends_idle_and_nothing_is_sent(
        ros, scripted, monkeypatch) -> None:
    """idle -> done: the process cannot start the right arm's thread (a container's thread
    limit: CPython's "can't start new thread"): the execution fails by name before anything is
    sent, the left arm's thread ends, and none is left behind (regression: the exception left
    ``execute`` with the left arm's thread waiting at the gate)."""
    real_start = threading.Thread.start

    def start(thread):
        if thread.name == "mjmr-arm-right":
            raise RuntimeError("can't start new thread")
        return real_start(thread)
    monkeypatch.setattr(threading.Thread, "start", start)
    report, phases, ctl = _scripted_phases(ros, scripted, {"left": "succeed", "right": "succeed"})
    monkeypatch.undo()
    assert report.status is ExecutionStatus.FAILED, report.summary()
    assert report.first_failure.arm == "right", report.first_failure
    assert "its thread could not be started: can't start new thread" in \
        report.first_failure.error_string
    assert phases["right"] == [P.DONE]
    assert phases["left"][-1] is P.DONE and P.SENDING not in phases["left"]
    assert report.arms["right"].status is ArmStatus.NOT_SENT
    assert not ctl["left"].goals and not ctl["right"].goals
    assert not [t.name for t in threading.enumerate() if t.name.startswith("mjmr-arm-")]


def test_a_stop_while_paused_ends_the_paused_arms(ros, scripted) -> None:
    """paused -> done: once both arms stand after a pause, a stop ends their parts there
    (STOPPED, controlled, confirmed) without another goal."""
    def pause_then_stop(executor) -> None:
        assert executor.pause("test pause")
        for _ in range(200):
            if all(r.paused for r in executor.last_run.arms.values()):
                break
            threading.Event().wait(0.05)
        assert executor.stop("test stop")
    report, phases, ctl = _scripted_phases(
        ros, scripted, {"left": "succeed", "right": "succeed"}, act=pause_then_stop,
        duration=3.0)
    assert report.status is ExecutionStatus.STOPPED, report.summary()
    tail = [P.REPLACING, P.RUNNING, P.PAUSED, P.DONE]
    assert phases == {"left": HEAD + tail, "right": HEAD + tail}
    assert all(len(c.goals) == 2 for c in ctl.values())   # the plan's and the pause's


def test_every_transition_of_the_table_is_forced_by_a_test_here() -> None:
    """The transitions these tests see, listed, against the table: a new row needs a test."""
    seen = {
        # a plain run, a pause and a resume, a cancel, a controlled stop (tiny pair)
        (P.IDLE, P.DISCOVERING), (P.DISCOVERING, P.AT_GATE), (P.AT_GATE, P.SENDING),
        (P.SENDING, P.RUNNING), (P.RUNNING, P.DONE), (P.RUNNING, P.REPLACING),
        (P.REPLACING, P.RUNNING), (P.RUNNING, P.PAUSED), (P.PAUSED, P.REPLACING),
        (P.RUNNING, P.STOPPING), (P.STOPPING, P.DONE),
        # scripted: no server; a rejection and one in flight; replacements; no thread
        (P.DISCOVERING, P.DONE), (P.AT_GATE, P.DONE), (P.SENDING, P.DONE),
        (P.SENDING, P.STOPPING), (P.REPLACING, P.STOPPING), (P.IDLE, P.DONE),
        (P.PAUSED, P.DONE),
    }
    assert seen == set(TRANSITIONS)
