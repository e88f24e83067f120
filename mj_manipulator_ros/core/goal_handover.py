"""Where a controller joins a replacement goal, and what its reference did there.

A speed change, a controlled stop, a pause and a resume each replace an arm's running goal by a
retimed one (``core/plan_speed.py``). The new goal follows the running one (a lead-in, or the
pose the arm stands at) until its ramp begins, ``departs_s`` on the controllers' clock; from
there the two differ. A controller (joint_trajectory_controller, and the simulator as it does)
samples a goal it takes at the time it takes it: taken before ``departs_s`` the handover is
seamless; taken after it, the reference jumps from where the running goal was to where the new
one already is, in position and in velocity. That jump is what :func:`handover_jump` measures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mj_manipulator_ros.core.interpolation import sample
from mj_manipulator_ros.core.plan import ArmTrajectory


@dataclass(frozen=True)
class HandoverJump:
    """The reference's jump where a controller took a replacement goal.

    Attributes:
        position_joint, position: the joint with the largest |position jump| and that jump
            (new - running; rad or m).
        velocity_joint, velocity: the joint with the largest |velocity jump| and that jump
            (rad/s or m/s).
    """

    position_joint: str
    position: float
    velocity_joint: str
    velocity: float

    def text(self) -> str:
        return (f"its reference jumped {self.position:+.4f} at joint {self.position_joint!r} "
                f"and {self.velocity:+.3f}/s in velocity at joint {self.velocity_joint!r}")


def _state(traj: ArmTrajectory, stamp_s: float, at_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Position and velocity (J,) a controller commands at ``at_s`` for ``traj`` started at
    ``stamp_s``: held at the first point before it and at the last after it (at rest there)."""
    t = float(at_s - stamp_s)
    if t >= traj.duration:
        p, _, _ = sample(traj, [traj.duration])
        return p[0], np.zeros(p.shape[1])
    p, v, _ = sample(traj, [max(t, 0.0)])
    return p[0], (v[0] if t >= 0.0 else np.zeros(p.shape[1]))


def handover_jump(running: tuple[ArmTrajectory, float], new: tuple[ArmTrajectory, float],
                  taken_s: float, joint_names: Sequence[str]) -> HandoverJump:
    """The jump of the reference where a controller running ``running`` (trajectory, start
    stamp in s) took ``new`` at ``taken_s`` (s, the controllers' clock). ``joint_names`` name
    the columns of both trajectories, which must match."""
    p0, v0 = _state(*running, taken_s)
    p1, v1 = _state(*new, taken_s)
    dp, dv = p1 - p0, v1 - v0
    i, k = int(np.argmax(np.abs(dp))), int(np.argmax(np.abs(dv)))
    return HandoverJump(joint_names[i], float(dp[i]), joint_names[k], float(dv[k]))
