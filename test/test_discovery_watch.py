"""A server discovered long before the first goal: the first execution does not wait the
discovery settle again (the executor notices every arm's server as it appears, between
executions), and a goal right after a server appears waits until the server answers a probe,
not the whole settle."""

from __future__ import annotations

import time

from factories import make_config, make_plan
from mj_manipulator_ros.core.execution_phase import ExecutionPhase
from mj_manipulator_ros.ros.executor import MultiArmExecutor

SETTLE_S = 3.0   # long, so that waiting it or not cannot be mistaken


def config():
    return make_config(discovery_settle_s=SETTLE_S, server_wait_s=10.0)


def stamping_s(ex: MultiArmExecutor) -> float:
    return ex.phases.durations(time.monotonic())[ExecutionPhase.STAMPING.value]


def test_a_server_seen_long_before_the_first_goal_is_not_settled_for_again(ros, scripted) -> None:
    """Regression: the discovery time was taken when the first execution first looked, so the
    first goal after a node's start always waited the whole settle (0.5 s by default: the first
    goal's "stamping" in bench/goal_latency.py)."""
    scripted({"left": "succeed", "right": "succeed"})
    with MultiArmExecutor(config(), context=ros.context) as ex:
        time.sleep(SETTLE_S + 0.5)   # the servers have been there longer than the settle
        report = ex.execute(make_plan(duration=0.5))
        assert report.succeeded, report.summary()
        waited = stamping_s(ex)
    assert waited < SETTLE_S / 2, (
        f"the first execution waited {waited:.2f} s at the gate for servers up for "
        f"{SETTLE_S + 0.5:.1f} s: the discovery settle ({SETTLE_S} s) was counted again")


def test_a_goal_right_after_the_servers_appear_waits_for_their_answer_not_the_settle(
        ros, scripted) -> None:
    """Servers that appear just before the first goal: the arms wait until each answers a probe
    (its endpoints matched both ways), not the whole settle (3 s here), and every goal is still
    taken before the stamp."""
    with MultiArmExecutor(config(), context=ros.context) as ex:
        scripted({"left": "succeed", "right": "succeed"})
        report = ex.execute(make_plan(duration=0.5))
        assert report.succeeded, report.summary()
        waited = stamping_s(ex)
        settled = {a: getattr(ch, "settled_for", None) is not None for a, ch in ex.channels.items()}
    assert waited < SETTLE_S / 2, waited
    assert all(settled.values()), settled   # each server answered a probe before its goal
    for arm, r in report.arms.items():
        assert r.accepted_at < report.start_stamp, (arm, r)
