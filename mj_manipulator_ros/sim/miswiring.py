"""Miswiring between an arm's controller and its physical joints (injected faults).

What goes wrong when real arms are wired up (``sim.faults.<arm>``: ``swap_joints``,
``sign_flip``, ``zero_offset``, ``scale``; ``sim.faults.crossed_arms``) is a map between the
joints a controller believes it drives and the joints that move. For controller joint ``i``
(the arm's joint order), wired to physical joint ``p[i]`` with sign ``s[i]``, gear error
``k[i]`` (the joint moves ``k`` times what it is commanded) and zero offset ``o[i]``:

- reported (the controller's and ``/joint_states``' view)::

    q[i] = s[i] q_phys[p[i]] / k[i] + o[i],  qd[i] = s[i] qd_phys[p[i]] / k[i],
    effort[i] = s[i] k[i] effort_phys[p[i]]

- commanded, by controller kind: a position target ``c`` drives ``p[i]`` to
  ``k s (c - o)``; a torque ``c`` (``torque``) becomes ``s c / k`` on ``p[i]``; an MIT row
  (``mit``: ``q_ref, v_ref, kp, kd, tau_ff``) is mapped as a position (``q_ref``, ``v_ref``),
  its gains divided by ``k^2`` and its feed-forward as a torque, so the torque the twin applies
  is the one the controller meant, on the wrong joint, reversed or geared wrong.

A dead wire (``dead_wire``: still or echo) cuts the commands: the physical joints keep the first
command the wiring passed on (what the motors held when the arm was enabled), whatever the
controller commands after; with echo the reported positions are the controller's own latest
position command (one control cycle late, as a driver that echoes its command does), the
velocity its difference over the cycle, the effort the motors' own.

A swap, sign flip or scale is consistent in commands and states, as a motor's CAN id carries
both: the controller sees nothing wrong in joint space; only the physics (gravity load on the
wrong joint, the wrong sign) or an eye on the robot can. ``crossed_arms`` wires each arm's
controller to the other arm's joints (the SharedModel swaps their indices); the per-arm faults
apply on top.

Shapes: (J,) per arm.
"""

from __future__ import annotations

import numpy as np

from mj_manipulator_ros.sim.sim_config import ArmFaults, DeadWire

#: the ArmFaults fields read here (wired when the simulator starts)
WIRING_FAULTS = ("swap_joints", "sign_flip", "zero_offset", "scale", "dead_wire")


class Wiring:
    """Args:
        joint_names: the arm's joints, controller order (J,).
        faults: the arm's injected faults (only the miswiring fields are read).
    """

    def __init__(self, joint_names, faults: ArmFaults) -> None:
        names = list(joint_names)
        n = len(names)
        self.p = np.arange(n)
        if faults.swap_joints:
            a, b = (names.index(j) for j in faults.swap_joints)
            self.p[a], self.p[b] = b, a
        self.s = np.array([-1.0 if j in faults.sign_flip else 1.0 for j in names])
        self.k = np.array([float(faults.scale.get(j, 1.0)) for j in names])
        self.o = np.array([float(faults.zero_offset.get(j, 0.0)) for j in names])
        self.dead = faults.dead_wire != DeadWire.NONE
        self.echo = faults.dead_wire == DeadWire.ECHO
        #: the control period, s (set by the physics owner: the echoed velocity's step)
        self.cycle_s: float | None = None
        self._held: dict[str, np.ndarray] = {}   # dead: per command kind, the first one passed
        self._echoed: tuple[np.ndarray, np.ndarray] | None = None   # echo: (latest, previous)
        self.identity = (np.array_equal(self.p, np.arange(n)) and np.all(self.s == 1.0)
                         and np.all(self.k == 1.0) and np.all(self.o == 0.0)
                         and not self.dead)

    def report(self, q: np.ndarray, qd: np.ndarray, effort: np.ndarray | None = None):
        """Physical state (J,) -> what the controller reads: (q, qd, effort or None)."""
        s, k, p = self.s, self.k, self.p
        out_q = s * q[p] / k + self.o
        out_qd = s * qd[p] / k
        out_e = None if effort is None else s * k * effort[p]
        if self.echo and self._echoed is not None:
            latest, previous = self._echoed
            out_q = latest.copy()
            out_qd = (latest - previous) / self.cycle_s if self.cycle_s else 0.0 * latest
        return out_q, out_qd, out_e

    def _cut(self, kind: str, physical: np.ndarray, position: np.ndarray | None) -> np.ndarray:
        """A dead wire: what reaches the joints is the first ``kind`` command ever passed on;
        ``position`` (controller joints) is what an echo reports next."""
        if not self.dead:
            return physical
        held = self._held.setdefault(kind, physical.copy())
        if position is not None:
            latest = np.array(position, dtype=float)
            self._echoed = (latest, latest if self._echoed is None else self._echoed[0])
        return held.copy()

    def position_command(self, c: np.ndarray) -> np.ndarray:
        """Position targets (J,), controller joints -> physical joints."""
        out = np.empty_like(c)
        out[self.p] = self.k * self.s * (c - self.o)
        return self._cut("position", out, c)

    def torque_command(self, c: np.ndarray, position: np.ndarray | None = None) -> np.ndarray:
        """Torques (J,), controller joints -> physical joints (``position``: the controller's
        position reference, for an echo)."""
        out = np.empty_like(c)
        out[self.p] = self.s * c / self.k
        return self._cut("torque", out, position)

    def mit_command(self, rows: np.ndarray) -> np.ndarray:
        """MIT rows (5, J) ``[q_ref, v_ref, kp, kd, tau_ff]`` -> physical joints."""
        out = np.empty_like(rows)
        ks = self.k * self.s
        out[0, self.p] = ks * (rows[0] - self.o)
        out[1, self.p] = ks * rows[1]
        out[2, self.p] = rows[2] / self.k ** 2
        out[3, self.p] = rows[3] / self.k ** 2
        out[4, self.p] = self.s * rows[4] / self.k
        return self._cut("mit", out, rows[0])

    def hold(self, q_phys: np.ndarray) -> np.ndarray:
        """The reported positions of a physical pose: what a controller starts holding."""
        return self.s * q_phys[self.p] / self.k + self.o
