"""The twin-MuJoCo exchange: its modes, and the stability pre-check that chooses its rate.

Under co-simulation (``sim/cosim.py``) an actuator twin integrates the arm joints and MuJoCo
computes their load once per exchange. What crosses the exchange, and so what arrives one
exchange late, depends on the mode (derivations in ``docs/cosim.md``):

- ``reference`` (the seed's validated contract): the twin integrates its rotors alone,
  ``J a = tau - L``; the load L carries the links' inertia as ``M a`` with ``a`` a 10 Hz
  filtered, one-exchange-old acceleration. With ``r = M_ii / J > 1`` that delayed inertia
  loop is unstable above ``arccos(-1/r) / (omega_c sqrt(r^2 - 1))`` (omega_c = 2 pi 10 Hz),
  and below it the filter's lag still costs fidelity at every rate.
- ``mass_matrix``: the twin integrates the rotors *with* the links' joint-space inertia,
  ``(diag(J) + M(q_k)) a = tau - R``, M frozen over the exchange; the exchanged load is only
  the rest, ``R = L - M a`` (gravity, Coriolis, link damping, springs, contacts), held as a line
  through the last two exchanges (second order). No inertia crosses the exchange: r no longer
  bounds the rate. What does is the rest's own feedback through one exchange, per joint with
  ``I = J + M_ii``: link damping b (the line's mean over an exchange is ``1.5 R_k - 0.5 R_k-1``,
  Adams-Bashforth 2, stable for ``T < I / b``) and the stiffness k of gravity and springs
  (``omega = sqrt(k / I)``): the line amplifies an undamped swing by about ``(omega T)^4 / 6``
  per exchange, ``exp(pi (omega T)^3 / 3)`` per swing period; the bound is the period at which
  that reaches 1 % per swing, ``T = (3 ln 1.01 / pi)^(1/3) / omega = 0.212 / omega``.

The pre-check allows half of the tightest bound (:data:`SAFETY`) at the start pose.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Optional, Sequence

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import ConfigError

SAFETY = 0.5      # the exchange period may use this fraction of the stability bound
SWING_GROWTH = 0.01  # mass_matrix: the growth per swing period at a stiffness's bound
TICK_S = 50e-6    # s: the actuator twin's integration step (20 kHz)
CUTOFF_HZ = 10.0  # the exchange's acceleration filter cutoff: part of the validated scheme


class ExchangeMode(str, enum.Enum):
    """What the twin integrates and what the exchanged load carries (module docstring)."""

    MASS_MATRIX = "mass_matrix"   # the twin carries J + M(q); the load is the rest
    REFERENCE = "reference"       # the seed's contract: the load carries M a, filtered, delayed


@dataclass(frozen=True)
class ExchangeBound:
    """One joint's stability bound on the exchange period.

    Attributes:
        joint: its name.
        ratio: r = M_ii / J_twin at the pose (the links' inertia over the rotor's).
        bound_s: the period at which the exchange goes unstable or stops resolving the motion
            (inf: none).
        max_period_s: the period allowed (``SAFETY`` x the bound).
        why: what sets the bound, with its figure (e.g. ``"r = M_ii / J = 40.0"``).
    """

    joint: str
    ratio: float
    bound_s: float
    max_period_s: float
    why: str = ""

    @property
    def min_rate_hz(self) -> float:
        return 0.0 if math.isinf(self.max_period_s) else 1.0 / self.max_period_s


def _reference_bound(name: str, r: float, omega_c: float) -> ExchangeBound:
    bound = (math.acos(-1.0 / r) / (omega_c * math.sqrt(r * r - 1.0))) if r > 1 else math.inf
    return ExchangeBound(name, r, bound, SAFETY * bound, f"r = M_ii / J = {r:.1f}")


def _mass_matrix_bound(name: str, r: float, inertia: float, damping: float,
                       stiffness: float) -> ExchangeBound:
    by_damping = inertia / damping if damping > 0 else math.inf
    resolve = (3 * math.log1p(SWING_GROWTH) / math.pi) ** (1 / 3)   # omega T at the bound
    by_stiffness = resolve * math.sqrt(inertia / stiffness) if stiffness > 0 else math.inf
    if by_damping <= by_stiffness:
        bound, why = by_damping, f"link damping b / (J + M_ii) = {damping / inertia:.3g} /s"
    else:
        bound, why = by_stiffness, (f"gravity and spring stiffness omega = sqrt(k / (J + M_ii)) "
                                    f"= {1 / by_stiffness:.3g} rad/s")
    return ExchangeBound(name, r, bound, SAFETY * bound, why if math.isfinite(bound) else "")


def exchange_stability(model: mujoco.MjModel, qpos: np.ndarray, dofs: Sequence[int],
                       twin_inertia: np.ndarray, mode: ExchangeMode = ExchangeMode.MASS_MATRIX,
                       cutoff_hz: float = CUTOFF_HZ) -> list[ExchangeBound]:
    """The bound of each twin-owned coordinate ``dofs`` (J,) at ``qpos`` (nq,), at rest, with the
    twin's inertias ``twin_inertia`` (J,) kg m^2, for ``mode``; ``cutoff_hz``: the reference
    exchange's acceleration filter."""
    mode = ExchangeMode(mode)
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, full)
    stiffness = _bias_stiffness(model, data) if mode is ExchangeMode.MASS_MATRIX else None
    out = []
    for k, (dof, j_twin) in enumerate(zip(dofs, twin_inertia)):
        name = model.joint(int(model.dof_jntid[dof])).name
        m_ii = float(full[dof, dof] - model.dof_armature[dof])
        r = m_ii / float(j_twin)
        if mode is ExchangeMode.REFERENCE:
            out.append(_reference_bound(name, r, 2 * math.pi * cutoff_hz))
        else:
            out.append(_mass_matrix_bound(name, r, m_ii + float(j_twin),
                                          float(model.dof_damping[dof]), float(stiffness[dof])))
    return out


def _bias_stiffness(model: mujoco.MjModel, data: mujoco.MjData, step: float = 1e-6) -> np.ndarray:
    """|d(qfrc_bias - qfrc_passive)_i / dq_i| at rest (nv,): each joint's own gravity and spring
    stiffness, N m / rad, by central differences on a copy of ``data``."""
    work = mujoco.MjData(model)
    out = np.zeros(model.nv)
    for dof in range(model.nv):
        adr = int(model.jnt_qposadr[model.dof_jntid[dof]])
        sides = []
        for sign in (1.0, -1.0):
            work.qpos[:] = data.qpos
            work.qvel[:] = 0.0
            work.qpos[adr] += sign * step
            mujoco.mj_forward(model, work)
            sides.append(work.qfrc_bias[dof] - work.qfrc_passive[dof])
        out[dof] = abs(sides[0] - sides[1]) / (2 * step)
    return out


@dataclass(frozen=True)
class ExchangeChoice:
    """The exchange chosen for a control period, and why.

    Attributes:
        ticks_per_exchange: twin ticks per exchange.
        exchanges_per_cycle: exchanges per control period.
        rate_hz: the exchange rate.
        bounds: each coupled joint's stability bound at the start pose.
        binding: the joint that set the minimum rate (None if any rate is stable).
        how: "auto" or "configured".
        mode: the exchange mode.
    """

    ticks_per_exchange: int
    exchanges_per_cycle: int
    rate_hz: float
    bounds: tuple[ExchangeBound, ...]
    binding: Optional[str]
    how: str = "auto"
    mode: ExchangeMode = ExchangeMode.MASS_MATRIX

    def summary(self) -> str:
        worst = next((b for b in self.bounds if b.joint == self.binding), None)
        why = (f"bound by {worst.joint} ({worst.why} needs >= {worst.min_rate_hz:.0f} Hz)"
               if worst else "every joint stable at any rate")
        return (f"co-simulation: actuator twin at {1 / TICK_S / 1e3:g} kHz, {self.mode.value} "
                f"exchange {self.rate_hz:g} Hz ({self.how}, {self.exchanges_per_cycle} per "
                f"control period), {why}")

    def to_dict(self) -> dict:
        return {"mode": self.mode.value, "rate_hz": self.rate_hz, "how": self.how,
                "ticks_per_exchange": self.ticks_per_exchange,
                "exchanges_per_cycle": self.exchanges_per_cycle, "binding_joint": self.binding,
                "joints": [{"joint": b.joint, "ratio": round(b.ratio, 3),
                            "min_rate_hz": round(b.min_rate_hz, 1), "why": b.why}
                           for b in self.bounds]}


def choose_exchange(control_period: float, bounds: Sequence[ExchangeBound],
                    exchange_hz: float | str = "auto",
                    mode: ExchangeMode = ExchangeMode.MASS_MATRIX) -> ExchangeChoice:
    """The exchange for ``control_period`` (s): a whole number of ticks that divides the control
    period's ticks; with ``"auto"`` the lowest rate every joint's bound (``bounds``, computed for
    ``mode``) allows.

    Raises:
        ConfigError: the control period is not a whole number of ticks; ``exchange_hz`` does not
            divide it, or is above what a joint's stability bound allows (naming the joint, what
            bounds it and the rate needed).
    """
    cycle_ticks = control_period / TICK_S
    if abs(cycle_ticks - round(cycle_ticks)) > 1e-6:
        raise ConfigError(f"sim.physics cosim: the control period {control_period * 1e3:g} ms is "
                          f"not a whole number of {TICK_S * 1e6:g} us twin ticks")
    cycle_ticks = int(round(cycle_ticks))
    options = [n for n in range(1, cycle_ticks + 1) if cycle_ticks % n == 0]
    worst = max(bounds, key=lambda b: b.min_rate_hz, default=None)
    needed = worst.min_rate_hz if worst else 0.0
    binding = worst.joint if worst and needed > 0 else None
    if exchange_hz == "auto":
        passing = [n for n in options if 1.0 / (n * TICK_S) >= needed - 1e-9]
        if not passing:
            raise ConfigError(
                f"sim.cosim.exchange_hz auto: joint {worst.joint!r} ({worst.why}) needs >= "
                f"{needed:.0f} Hz under the {ExchangeMode(mode).value} exchange; the fastest is "
                f"{1.0 / TICK_S:.0f} Hz")
        n = max(passing)
    else:
        rate = float(exchange_hz)
        n = int(round(1.0 / (rate * TICK_S)))
        if n < 1 or abs(n * TICK_S * rate - 1.0) > 1e-6 or cycle_ticks % n:
            rates = [round(1.0 / (k * TICK_S), 3) for k in options]
            raise ConfigError(f"sim.cosim.exchange_hz: {rate:g} Hz is not a whole number of "
                              f"{TICK_S * 1e6:g} us ticks dividing the control period; "
                              f"available: {rates}")
        if rate < needed - 1e-9:
            raise ConfigError(
                f"sim.cosim.exchange_hz: {rate:g} Hz is unstable for joint {worst.joint!r} under "
                f"the {ExchangeMode(mode).value} exchange ({worst.why} at the start pose: the "
                f"exchange period must be <= {worst.max_period_s * 1e3:.3f} ms, half the bound "
                f"{worst.bound_s * 1e3:.3f} ms); needs >= {needed:.0f} Hz (or 'auto')")
    return ExchangeChoice(n, cycle_ticks // n, 1.0 / (n * TICK_S), tuple(bounds), binding,
                          "auto" if exchange_hz == "auto" else "configured", ExchangeMode(mode))
