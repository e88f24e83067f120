"""How far an arm's joints travel along a path of poses: the one rule behind a stop's travel,
wherever it is computed (a controlled stop's prediction from the plan, the measured stop from
joint states, the gate's stopping distances).

An arm's *travel* is the largest, over its joints, of the path length each joint covers: the
sum of its absolute position changes from pose to pose (rad for a revolute joint, m for a
prismatic one). A joint that turns back counts both ways; the endpoints alone would hide it.
"""

from __future__ import annotations

import numpy as np


def cumulative_joint_paths(positions: np.ndarray) -> np.ndarray:
    """(N, J) poses -> (N, J): each joint's path length from the first pose to each pose
    (the first row zeros)."""
    q = np.asarray(positions, dtype=float)
    if q.ndim != 2:
        raise ValueError(f"poses must be (N, J), got shape {q.shape}")
    return np.vstack([np.zeros((1, q.shape[1])), np.cumsum(np.abs(np.diff(q, axis=0)), axis=0)])


def joint_travel(positions: np.ndarray) -> float:
    """(N, J) poses -> the largest joint path length over them (0.0 for fewer than two poses
    or no joints)."""
    q = np.asarray(positions, dtype=float)
    if q.ndim != 2:
        raise ValueError(f"poses must be (N, J), got shape {q.shape}")
    if q.shape[0] < 2 or q.shape[1] == 0:
        return 0.0
    return float(np.abs(np.diff(q, axis=0)).sum(axis=0).max())
