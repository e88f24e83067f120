"""The HIL session's joint-state buffer as it was before ``hil/joint_state_rows.py`` (issue 40),
without ROS: the independent reference for ``test_joint_state_rows.py`` and
``bench/joint_state_buffer_bench.py``. Every call rebuilds arrays from every row kept since the
session began (Python lists), so its cost grows with the session's length.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mj_manipulator_ros.hil.analysis import JointSamples


class ReferenceRows:
    """Rows as the old ``JointStateBuffer._on_msg`` kept them; :meth:`samples` is its
    algorithm unchanged, with the row filter also taking ``received_since``."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, float, tuple, list, list, list | None]] = []

    def append(self, stamp: float, received: float, names: Sequence[str],
               positions: Sequence[float], velocities: Sequence[float] = (),
               efforts: Sequence[float] = ()) -> None:
        self.rows.append((stamp, received, tuple(names), list(positions),
                          list(velocities) or [0.0] * len(names),
                          list(efforts) if len(efforts) == len(names) else None))

    def samples(self, since: float = -np.inf, received_since: float = -np.inf) -> JointSamples:
        rows = [r for r in self.rows if r[0] >= since and r[1] >= received_since]
        names: list[str] = []
        for r in rows:
            names.extend(n for n in r[2] if n not in names)
        index = {n: k for k, n in enumerate(names)}
        pos = np.full((len(rows), len(names)), np.nan)
        vel = np.full((len(rows), len(names)), np.nan)
        eff = np.full((len(rows), len(names)), np.nan)
        for i, (_, _, n, p, v, e) in enumerate(rows):
            cols = [index[x] for x in n]
            pos[i, cols] = p
            vel[i, cols] = v
            if e is not None:
                eff[i, cols] = e
        order = np.argsort([r[0] for r in rows], kind="stable")
        return JointSamples(np.array([r[0] for r in rows])[order], np.array([r[1] for r in rows])[order],
                            tuple(names), pos[order], vel[order], eff[order])

    def pose(self, joints: Sequence[str]) -> np.ndarray | None:
        """The old ``HilSession.pose``: the whole history's samples, the arm's, the last row."""
        s = self.samples().arm(joints)
        return s.positions[-1].copy() if len(s) else None
