"""The compiled follower (``sim/_follow_kernel.c``) against the Python follower, its reference
implementation: one scene driven twice, synchronously, the same script of goals, cancels,
preemptions, tolerance failures and faults applied at the same cycles; every cycle's commands
and positions, and every goal's feedback and outcome, must agree."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mj_manipulator_ros.sim import trajectory_follower
from mj_manipulator_ros.core.tolerances import JointTolerance
from mj_manipulator_ros.sim.goal import GoalRequest, check_goal
from mj_manipulator_ros.sim.shared_model import SharedModel
from tiny_arm import tiny_config

#: rounding: the C loop and numpy's product may sum the six terms in another order
ROUNDING = 1e-12


def test_the_compiled_follower_is_built() -> None:
    assert trajectory_follower.KERNEL is not None, (
        "sim/_follow_kernel.c is not built: `make setup` compiles it (pip install -e .)")


def _goal(sim, arm, times, positions, velocities=(), stamp=0.0, **kw):
    joints = tuple(sim.controllers[arm].joint_names)
    req = GoalRequest(joints, list(times), [list(p) for p in positions],
                      [list(v) for v in velocities] or [[] for _ in times],
                      [[] for _ in times], stamp, **kw)
    reason, g = check_goal(req, joints, sim.controller_time(), sim.settings.tolerances)
    assert reason is None, reason
    return sim.controllers[arm].submit(g)


def _script(sim) -> dict:
    """Cycle -> what happens then (the same for both runs; tickets kept by name)."""
    tickets: dict = {}

    def submit(name, arm, *args, future=0.0, **kw):
        def act():
            stamp = sim.controller_time() + future if future else 0.0
            tickets[name] = _goal(sim, arm, *args, stamp=stamp, **kw)
        return act

    def stay(name, arm):   # a goal to where the arm is: within tolerance the cycle it ends
        def act():
            here = sim.snapshot().arms[arm].positions
            tickets[name] = _goal(sim, arm, [0.5], [here])
        return act

    def cancel(name, arm):
        return lambda: sim.controllers[arm].cancel(tickets[name])

    def faults(arm, **changes):
        def act():
            c = sim.controllers[arm]
            c.faults = dataclasses.replace(c.faults, **changes)
        return act

    tight = (JointTolerance("right_j1", position=1e-4), JointTolerance("right_j2", position=1e-4))
    slow = (JointTolerance("left_j1", velocity=0.1), JointTolerance("left_j2", velocity=0.1))
    exact = (JointTolerance("left_j1", position=1e-7), JointTolerance("left_j2", position=1e-7))
    return tickets, {
        # a future stamp: the move to the first point, then three points
        0: [submit("a", "left", [0.2, 0.8, 1.4], [[0.3, -0.2], [0.6, 0.4], [0.2, 0.1]],
                   [[0.5, 0.5], [0.0, 0.5], [0, 0]], future=0.3),
            submit("b", "right", [0.5, 1.5], [[0.4, 0.3], [-0.3, 0.5]])],
        150: [cancel("b", "right")],
        200: [submit("c", "right", [1.0], [[0.5, -0.5]])],
        300: [submit("d", "left", [1.0, 2.0], [[-0.4, 0.2], [0.1, -0.3]])],   # preempts "a"
        420: [faults("left", stall=True)],           # a fault the compiled cycles lack
        470: [faults("left", stall=False)],
        900: [submit("e", "right", [0.6], [[-0.5, 0.6]], path_tolerance=tight)],   # violated
        2000: [submit("f", "left", [0.3], [[0.3, 0.3]], goal_tolerance=exact,
                      goal_time_tolerance=0.05)],                                  # goal -5
        2300: [submit("g", "left", [0.0], [[0.0, 0.1]])],   # one point at time 0
        2800: [stay("h", "right")],
        3000: [submit("i", "left", [0.5, 1.0], [[0.3, 0.0], [0.5, -0.2]], [[0.6, -0.3], [0, 0]],
                      path_tolerance=slow)],   # velocity -4, mid-course
    }


def _run(compiled: bool, tmp_path, cycles: int = 3400):
    tmp_path.mkdir(exist_ok=True)
    sim = SharedModel.from_config(tiny_config(tmp_path, sim={"arms": {
        "left": {"controller": "position"}, "right": {"controller": "position"}}}),
        compiled=compiled)
    followers = [c.follower for c in sim.controllers.values()]
    counts = {"python": 0}
    for f in followers:   # count the cycles the Python follower runs
        update = f._update

        def counted(*args, _update=update):
            counts["python"] += 1
            return _update(*args)
        f._update = counted
    tickets, script = _script(sim)
    ctrl, qpos = np.zeros((cycles, sim.model.nu)), np.zeros((cycles, sim.model.nq))
    feedback: dict = {}
    finished: dict = {}   # ticket -> the cycle it finished in
    for k in range(cycles):
        for act in script.get(k, ()):
            act()
        sim.step_cycle()
        ctrl[k], qpos[k] = sim.data.ctrl, sim.data.qpos
        for name, t in tickets.items():
            feedback.setdefault(name, []).append(t.feedback.copy())
            if t.done.is_set():
                finished.setdefault(name, k)
    return sim, tickets, ctrl, qpos, feedback, finished, counts["python"], \
        len(followers) * cycles


def test_every_cycle_agrees_with_the_python_reference(tmp_path) -> None:
    sim, fast, ctrl, qpos, fb, finished, python_cycles, arm_cycles = _run(True, tmp_path / "c")
    assert all(f._kernel is not None for f in (c.follower for c in sim.controllers.values())), \
        "the compiled follower was not bound to the tiny arms"
    ref_sim, ref, ref_ctrl, ref_qpos, ref_fb, ref_finished, ref_python, _ = _run(
        False, tmp_path / "p")
    assert ref_python == arm_cycles   # the reference runs every cycle in Python
    # the compiled run hands back only the events' cycles (and the stall's 50 cycles)
    assert python_cycles < 0.15 * arm_cycles, (python_cycles, arm_cycles)
    worst = np.abs(ctrl - ref_ctrl).max()
    assert worst <= ROUNDING, f"commands differ by {worst:.3g} (cycle " \
        f"{int(np.unravel_index(np.abs(ctrl - ref_ctrl).argmax(), ctrl.shape)[0])})"
    assert np.abs(qpos - ref_qpos).max() <= ROUNDING
    outcomes = {n: (t.outcome, t.error_code, t.error_string) for n, t in fast.items()}
    assert outcomes == {n: (t.outcome, t.error_code, t.error_string) for n, t in ref.items()}
    # every event of the script happened (else the comparison proves less than it says)
    assert outcomes["a"][0] == "aborted" and "preempted" in outcomes["a"][2]
    assert outcomes["b"][0] == "canceled" and outcomes["c"][0] == "succeeded"
    assert outcomes["d"][0] == "succeeded"
    assert outcomes["e"][1] == -4 and outcomes["f"][1] == -5 and outcomes["g"][0] == "succeeded"
    # at its end (250 cycles; one more when the sum of time steps rounds below it)
    assert outcomes["h"][0] == "succeeded" and 2800 + 250 <= finished["h"] <= 2800 + 251
    assert outcomes["i"][1] == -4 and "velocity error" in outcomes["i"][2]
    assert finished == ref_finished   # each goal ended in the same cycle
    for name, t in fast.items():
        r = ref[name]
        assert (t.motion_onset, t.picked_up_at, t.started_at) == \
            (r.motion_onset, r.picked_up_at, r.started_at), name
        assert t.final_error == pytest.approx(r.final_error, abs=ROUNDING), name
        rows, ref_rows = np.array(fb[name]), np.array(ref_fb[name])
        assert np.allclose(rows, ref_rows, atol=ROUNDING, rtol=0, equal_nan=True), \
            (name, np.nanmax(np.abs(rows - ref_rows)))
    for arm, c in sim.controllers.items():
        assert np.allclose(c.follower.position, ref_sim.controllers[arm].follower.position,
                           atol=ROUNDING)


def test_bad_bindings_are_refused_by_name(tmp_path) -> None:
    kernel = trajectory_follower.KERNEL
    sim = SharedModel.from_config(tiny_config(tmp_path), compiled=False)
    d = sim.data
    with pytest.raises(ValueError, match="do not fit"):
        kernel.Follow(d.qpos, d.qvel, d.ctrl, sim.model.nq - 1, 0, 0, np.zeros(2))
    with pytest.raises(ValueError, match="command must be contiguous float64"):
        kernel.Follow(d.qpos, d.qvel, d.ctrl, 0, 0, 0, np.zeros(2, dtype=np.float32))
    f = kernel.Follow(d.qpos, d.qvel, d.ctrl, 0, 0, 0, np.zeros(2))
    with pytest.raises(ValueError, match="hold must be contiguous float64 values \\(2 expected\\)"):
        f.hold(np.zeros(3))
    with pytest.raises(TypeError, match="item 0 is a str, expected a Follow or None"):
        kernel.cycle(0.0, ("left",))
