"""An open actuator digital twin: the joint motors of an arm, integrated at 20 kHz.

Each joint is a motor with its gearbox, seen at the output shaft (SI units, rad, N m, s):

    J a = tau_m - b v - f_c tanh(v / v_s) - L                       (L: the load, see below)
    tau_m' = (tau_cmd - tau_m) / tau_i                            (the current loop, first order)
    tau_cmd = clip(kp (q_ref - q_enc) + kd (v_ref - v) + tau_ff, -tau_max, tau_max)   (MIT mode)
    q_enc = resolution * round(q / resolution)                    (encoder quantization)

- J: rotor and gearbox inertia at the output, kg m^2 (default: the model's armature);
- b, f_c: viscous (N m s/rad) and Coulomb (N m) drivetrain friction, the Coulomb term smooth
  below ``v_s`` (rad/s);
- tau_i: the current (torque) loop's time constant, s; tau_max: the driver's torque limit;
- L: the load the rest of the world puts on the output shaft, N m, **positive opposing positive
  motion** (the torque the motor must supply to move the links as they move: see
  ``sim/cosim.py``).

One tick (:data:`TICK_S` = 50 us) is semi-implicit Euler: the current loop first (implicit, so
any tau_i is stable), then v from the acceleration, then q from the new v. The velocity the MIT
law reads is the true one (the driver's velocity observer is taken as ideal); its position is
the encoder's. Every operation is vectorized over the joints (J,).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.twin_model import TICK_S  # s: the twin's step (20 kHz)


@dataclass(frozen=True)
class TwinParams:
    """Per-joint actuator parameters, each shape (J,) (see the module's equations)."""

    inertia: np.ndarray                        # J, kg m^2, > 0
    torque_limit: np.ndarray                   # tau_max, N m, > 0 (inf: none)
    viscous: np.ndarray                        # b, N m s / rad, >= 0
    coulomb: np.ndarray                        # f_c, N m, >= 0
    current_time_constant: np.ndarray          # tau_i, s, >= 0
    encoder_resolution: np.ndarray             # rad per count, >= 0 (0: exact)
    coulomb_velocity: float = field(default=0.01)  # v_s, rad/s, > 0

    def __post_init__(self) -> None:
        n = np.asarray(self.inertia).size
        checks = {"inertia": (0.0, False), "torque_limit": (0.0, False), "viscous": (0.0, True),
                  "coulomb": (0.0, True), "current_time_constant": (0.0, True),
                  "encoder_resolution": (0.0, True)}
        for name, (low, equal_ok) in checks.items():
            value = np.asarray(getattr(self, name), dtype=float)
            if value.shape != (n,):
                raise ConfigError(f"actuator twin: {name} has shape {value.shape}; expected ({n},)")
            bad = np.flatnonzero(~((value >= low) if equal_ok else (value > low)))
            if bad.size:
                k = int(bad[0])
                raise ConfigError(f"actuator twin: {name}[{k}] = {value[k]}; expected "
                                  f"{'>=' if equal_ok else '>'} {low}")
            object.__setattr__(self, name, value)
        if not self.coulomb_velocity > 0:
            raise ConfigError(f"actuator twin: coulomb_velocity = {self.coulomb_velocity}; "
                              "expected > 0 rad/s")

    @property
    def size(self) -> int:
        return int(self.inertia.size)


class ActuatorTwin:
    """The motors of the coupled joints, vectorized. Owned by one thread (the physics owner).

    Attributes:
        q, v: output-shaft positions (rad) and velocities (rad/s), (J,).
        torque: the motor torque tau_m the current loop delivers, N m (J,).
        acceleration: the acceleration of the last tick, rad/s^2 (J,).
        q_ref, v_ref, kp, kd, tau_ff: the MIT command (J,) each, held until the next
            :meth:`command`; kp = kd = tau_ff = 0 is "motor off".
        ticks: ticks integrated since construction.
    """

    def __init__(self, params: TwinParams, q0: np.ndarray, v0: np.ndarray | None = None) -> None:
        self.params = params
        n = params.size
        self.q = np.array(q0, dtype=float).reshape(n)
        self.v = np.zeros(n) if v0 is None else np.array(v0, dtype=float).reshape(n)
        self.torque = np.zeros(n)
        self.acceleration = np.zeros(n)
        self.q_ref, self.v_ref = self.q.copy(), np.zeros(n)
        self.kp, self.kd, self.tau_ff = np.zeros(n), np.zeros(n), np.zeros(n)
        self.ticks = 0
        p = params
        self._inv_j = 1.0 / p.inertia
        self._beta = TICK_S / (p.current_time_constant + TICK_S)
        self._res = p.encoder_resolution.copy()
        self._quantized = bool((self._res > 0).any())
        self._inv_res = np.divide(1.0, self._res, out=np.zeros(n), where=self._res > 0)
        self._res[self._res == 0] = 1.0   # exact joints: their reading is copied from q in advance()
        self._exact = p.encoder_resolution == 0
        self._viscous = bool((p.viscous > 0).any())
        self._coulomb = bool((p.coulomb > 0).any())
        self._inv_vs = 1.0 / p.coulomb_velocity
        self._tmp, self._tmp2, self._q_enc = np.zeros(n), np.zeros(n), np.zeros(n)

    def command(self, q_ref, v_ref, kp, kd, tau_ff) -> None:
        """The MIT-mode command (each (J,) or a scalar), held until the next one."""
        n = self.params.size
        for name, value in (("q_ref", q_ref), ("v_ref", v_ref), ("kp", kp), ("kd", kd),
                            ("tau_ff", tau_ff)):
            getattr(self, name)[:] = np.broadcast_to(np.asarray(value, dtype=float), (n,))

    def advance(self, ticks: int, load: np.ndarray) -> None:
        """Integrate ``ticks`` ticks with the load ``load`` (N m, (J,), positive opposing
        positive motion) held constant."""
        p = self.params
        lim, neg_lim = p.torque_limit, -p.torque_limit
        # the MIT law's parts that stay constant over the call: kp q_ref + kd v_ref + tau_ff
        drive = self.kp * self.q_ref + self.kd * self.v_ref + self.tau_ff
        minus_load = -np.asarray(load, dtype=float)
        kp, kd, q, v, tau, tmp, tmp2, q_enc = self.kp, self.kd, self.q, self.v, self.torque, \
            self._tmp, self._tmp2, self._q_enc
        beta, res, inv_res = self._beta, self._res, self._inv_res
        dt_over_j = TICK_S * self._inv_j
        quantized, some_exact = self._quantized, bool(self._exact.any())
        coulomb, viscous, inv_vs = p.coulomb, p.viscous, self._inv_vs
        use_coulomb, use_viscous = self._coulomb, self._viscous
        multiply, subtract, rint, minimum, maximum, tanh = \
            np.multiply, np.subtract, np.rint, np.minimum, np.maximum, np.tanh
        for _ in range(ticks):
            if quantized:                                # the encoder
                multiply(q, inv_res, out=q_enc)
                rint(q_enc, out=q_enc)
                q_enc *= res
                if some_exact:
                    np.copyto(q_enc, q, where=self._exact)
                multiply(kp, q_enc, out=tmp)
            else:
                multiply(kp, q, out=tmp)
            subtract(drive, tmp, out=tmp)
            multiply(kd, v, out=tmp2)
            tmp -= tmp2
            minimum(tmp, lim, out=tmp)
            maximum(tmp, neg_lim, out=tmp)               # tau_cmd, within the torque limit
            tmp -= tau
            tmp *= beta
            tau += tmp                                   # the current loop (implicit)
            np.add(tau, minus_load, out=tmp)
            if use_coulomb:
                multiply(v, inv_vs, out=tmp2)
                tanh(tmp2, out=tmp2)
                tmp2 *= coulomb
                tmp -= tmp2
            if use_viscous:
                multiply(viscous, v, out=tmp2)
                tmp -= tmp2
            tmp *= dt_over_j                             # the velocity change of this tick
            v += tmp
            multiply(v, TICK_S, out=tmp2)
            q += tmp2
        if ticks:
            np.divide(tmp, TICK_S, out=self.acceleration)
        self.ticks += ticks

    def kinetic_energy(self) -> float:
        """The rotors' kinetic energy at the output, J (joules)."""
        return float(0.5 * np.sum(self.params.inertia * self.v**2))


def default_resolution(counts_per_rev: int = 1 << 16) -> float:
    """rad per count of an encoder with ``counts_per_rev`` counts per output revolution."""
    return 2 * math.pi / counts_per_rev
