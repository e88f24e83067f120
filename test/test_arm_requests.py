"""core/arm_requests.py: the rule for which request to an arm's thread wins, on the value
itself (the forced interleaving against the running executor is test_retime_requests.py)."""

from __future__ import annotations

import threading

import numpy as np

from mj_manipulator_ros.core.arm_requests import ArmRequests, Replacement
from mj_manipulator_ros.core.goal_kind import GoalKind
from mj_manipulator_ros.core.plan import ArmTrajectory
from mj_manipulator_ros.core.sync import StartStamp


def replacement(n: int, kind: GoalKind = GoalKind.SPEED) -> Replacement:
    trajectory = ArmTrajectory(("j",), np.array([0.0, 1.0]), np.array([[0.0], [float(n)]]))
    return Replacement(trajectory, StartStamp(n * 1_000_000), kind, n * 1e-3)


def test_the_latest_replacement_wins_and_the_displaced_one_is_counted() -> None:
    requests = ArmRequests("left")
    assert requests.take() is None and not requests.pending
    first, second = replacement(1), replacement(2, GoalKind.STOP)
    assert requests.replace(first) is None
    assert requests.replace(second) is first
    assert requests.pending and requests.displaced == 1
    assert requests.take() is second
    assert not requests.pending and requests.take() is None


def test_end_stays_once_asked_and_leaves_the_slot_alone() -> None:
    requests = ArmRequests("left")
    waiting = replacement(1, GoalKind.RESUME)
    requests.replace(waiting)
    requests.end()
    assert requests.end_requested and requests.pending
    assert requests.take() is waiting
    assert requests.end_requested


def test_no_request_is_lost_between_puts_and_takes_on_two_threads() -> None:
    """One thread puts 20,000 numbered replacements while another takes as fast as it can:
    every put is either taken once or displaced (counted), and the last put is always taken."""
    requests = ArmRequests("left")
    n = 20_000
    taken: list[int] = []
    done = threading.Event()

    def taker() -> None:
        while not done.is_set() or requests.pending:
            r = requests.take()
            if r is not None:
                taken.append(int(r.trajectory.positions[-1][0]))

    thread = threading.Thread(target=taker, name="test-taker")
    thread.start()
    for k in range(n):
        requests.replace(replacement(k))
    done.set()
    thread.join(30.0)
    assert not thread.is_alive()
    assert len(taken) + requests.displaced == n, (len(taken), requests.displaced)
    assert len(set(taken)) == len(taken) and taken == sorted(taken)
    assert taken[-1] == n - 1
