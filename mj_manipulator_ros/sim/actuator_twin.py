"""An open actuator digital twin: the joint motors of an arm, integrated at 20 kHz.

Each joint is a motor with its gearbox, seen at the output shaft (SI units, rad, N m, s):

    J a = tau_m - b v - f_c tanh(v / v_s) - L                       (L: the load, see below)
    tau_m' = (tau_cmd - tau_m) / tau_i                            (the current loop, first order)
    tau_cmd = clip(kp (q_ref - q_enc) + kd (v_ref - v) + tau_ff, -tau_max, tau_max)   (MIT mode)
    q_enc = resolution * round(q / resolution)                    (encoder quantization)

or, when the twin carries the links' joint-space inertia M (J, J) (:meth:`ActuatorTwin.carry`,
the ``mass_matrix`` exchange), all joints together in the first line:

    (diag(J) + M) a = tau_m - b v - f_c tanh(v / v_s) - L

- J: rotor and gearbox inertia at the output, kg m^2 (default: the model's armature);
- b, f_c: viscous (N m s/rad) and Coulomb (N m) drivetrain friction, the Coulomb term smooth
  below ``v_s`` (rad/s);
- tau_i: the current (torque) loop's time constant, s; tau_max: the driver's torque limit;
- L: the load the rest of the world puts on the output shaft, N m, **positive opposing positive
  motion** (the torque the motor must supply to move the links as they move: see
  ``sim/cosim.py``); held over an :meth:`ActuatorTwin.advance`, or a line with a given rate.

One tick (:data:`TICK_S` = 50 us) is semi-implicit Euler: the current loop first (implicit, so
any tau_i is stable), then v from the acceleration, then q from the new v. The velocity the MIT
law reads is the true one (the driver's velocity observer is taken as ideal); its position is
the encoder's. The tick loop runs in C (``sim/_twin_kernel.c``, built by ``make setup``;
without the GIL); the numpy loop here is its reference implementation and the fallback when
the extension is not built (one warning). They agree to rounding (``test_cosim.py``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.exchange import TICK_S  # s: the twin's step (20 kHz)

log = logging.getLogger(__name__)
try:
    from mj_manipulator_ros.sim import _twin_kernel as KERNEL
except ImportError as exc:  # not built: the numpy reference runs (about 25x slower)
    KERNEL = None
    _KERNEL_MISSING = str(exc)


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

    def __init__(self, params: TwinParams, q0: np.ndarray, v0: np.ndarray | None = None,
                 kernel: bool = True) -> None:
        """``kernel``: run the ticks in C when the extension is built (False: the numpy
        reference loop)."""
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
        self._load = np.zeros(n)
        self._step_matrix: np.ndarray | None = None   # TICK_S (diag(J) + M)^-1 when carried
        if kernel and KERNEL is None:
            log.warning("actuator twin: the C tick loop is not built (%s); running the numpy "
                        "loop (run make setup)", _KERNEL_MISSING)
        self.kernel = bool(kernel and KERNEL is not None)
        self._dt_over_j = TICK_S * self._inv_j
        self._c_res = np.ascontiguousarray(p.encoder_resolution, dtype=float)
        self._limit = np.ascontiguousarray(p.torque_limit, dtype=float)
        self._coulomb_c = np.ascontiguousarray(p.coulomb, dtype=float)
        self._viscous_c = np.ascontiguousarray(p.viscous, dtype=float)
        self._drive = np.zeros(n)

    def carry(self, link_inertia: np.ndarray | None) -> None:
        """Integrate the rotors together with the links' joint-space inertia ``link_inertia``
        (J, J) kg m^2, symmetric positive semi-definite (held until the next call); None: the
        rotors alone (the load then carries the links' inertia)."""
        if link_inertia is None:
            self._step_matrix = None
            return
        total = np.array(link_inertia, dtype=float)
        n = self.params.size
        if total.shape != (n, n):
            raise ConfigError(f"actuator twin: link inertia of shape {total.shape}; expected "
                              f"({n}, {n})")
        total[np.diag_indices(n)] += self.params.inertia
        self._step_matrix = TICK_S * np.linalg.inv(total)

    def command(self, q_ref, v_ref, kp, kd, tau_ff) -> None:
        """The MIT-mode command (each (J,) or a scalar), held until the next one."""
        n = self.params.size
        for name, value in (("q_ref", q_ref), ("v_ref", v_ref), ("kp", kp), ("kd", kd),
                            ("tau_ff", tau_ff)):
            getattr(self, name)[:] = np.broadcast_to(np.asarray(value, dtype=float), (n,))

    def advance(self, ticks: int, load: np.ndarray, load_rate: np.ndarray | None = None) -> None:
        """Integrate ``ticks`` ticks with the load ``load`` (N m, (J,), positive opposing
        positive motion) held constant, or, with ``load_rate`` (N m/s, (J,)), on the line
        ``load + load_rate (t - t0)`` (each tick's load taken at the tick's start)."""
        # the MIT law's parts that stay constant over the call: kp q_ref + kd v_ref + tau_ff
        drive = self._drive
        np.multiply(self.kp, self.q_ref, out=drive)
        drive += self.kd * self.v_ref
        drive += self.tau_ff
        np.negative(load, out=self._load)
        load_step = None if load_rate is None else np.asarray(load_rate, dtype=float) * TICK_S
        if self.kernel:
            KERNEL.advance(int(ticks), TICK_S, self.q, self.v, self.torque, self.acceleration,
                           self._load, drive, self.kp, self.kd, self._limit, self._beta,
                           self._dt_over_j, self._coulomb_c, self._inv_vs, self._viscous_c,
                           self._c_res, self._inv_res, load_step, self._step_matrix)
        else:
            self._advance_numpy(int(ticks), drive, load_step)
        self.ticks += ticks

    def _advance_numpy(self, ticks: int, drive: np.ndarray, load_step: np.ndarray | None) -> None:
        """The reference implementation of the tick loop (the C kernel's twin)."""
        p = self.params
        lim, neg_lim = p.torque_limit, -p.torque_limit
        minus_load = self._load
        step_matrix, dot, copyto = self._step_matrix, np.dot, np.copyto
        kp, kd, q, v, tau, tmp, tmp2, q_enc = self.kp, self.kd, self.q, self.v, self.torque, \
            self._tmp, self._tmp2, self._q_enc
        beta, res, inv_res = self._beta, self._res, self._inv_res
        dt_over_j = self._dt_over_j
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
            if step_matrix is None:
                tmp *= dt_over_j                         # the velocity change of this tick
            else:
                dot(step_matrix, tmp, out=tmp2)
                copyto(tmp, tmp2)
            v += tmp
            if load_step is not None:
                minus_load -= load_step
            multiply(v, TICK_S, out=tmp2)
            q += tmp2
        if ticks:
            np.divide(tmp, TICK_S, out=self.acceleration)

    def kinetic_energy(self) -> float:
        """The rotors' kinetic energy at the output, J (joules)."""
        return float(0.5 * np.sum(self.params.inertia * self.v**2))


def default_resolution(counts_per_rev: int = 1 << 16) -> float:
    """rad per count of an encoder with ``counts_per_rev`` counts per output revolution."""
    return 2 * math.pi / counts_per_rev
