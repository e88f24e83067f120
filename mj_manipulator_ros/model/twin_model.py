"""The twin-owned model variant (MjSpec edits) and the exchange-rate stability pre-check.

Under co-simulation with an actuator twin (``sim/cosim.py``) the twin integrates every arm
joint; MuJoCo only computes the load. So the model must not model what the twin does:
:func:`make_twin_owned` records, per arm joint, what the file gave (armature, drivetrain friction,
force range, the position servo's gains: the twin's and the MIT controller's defaults), then
removes from the model the armature, the joint friction (``frictionloss``), every actuator and
every gravity compensation, and welds the joints inside the arms' subtrees that no arm owns (the
fingers: their joints, equalities and sensors deleted). Link inertia, link damping, springs,
contacts, constraints and gravity stay. A joint outside the arms (a free object, another robot)
would be a coordinate left for MuJoCo to integrate: refused.

:func:`exchange_stability` is the pre-check of the exchange: the link inertia reaches the twin
through an acceleration delayed one exchange and filtered at ``cutoff_hz``; with
``r = M_ii / J`` (``M`` of the twin-owned model: no armature) the exchange period T must stay
well under ``arccos(-1/r) / (omega_c sqrt(r^2 - 1))`` for r > 1 (any T for r <= 1). The bound
used is half of that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.arm_binding import ActuatorKind, ArmBinding
from mj_manipulator_ros.model.torque_drive import force_range

SAFETY = 0.5      # the exchange period may use this fraction of the stability bound
TICK_S = 50e-6    # s: the actuator twin's integration step (20 kHz)
CUTOFF_HZ = 10.0  # the exchange's acceleration filter cutoff: part of the validated scheme


@dataclass(frozen=True)
class TwinJoints:
    """What the robot file gave an arm's joints before the twin took them, each (J,).

    Attributes:
        armature: kg m^2 (the rotor and gearbox inertia: the twin's default J).
        frictionloss: N m (drivetrain Coulomb friction: the twin's default).
        torque_limit: N m (the joint's actuator force range, or its servos': +inf if none).
        kp, kv: the joint's position servo gains, N m/rad and N m s/rad (0 without a servo):
            the MIT controller's default gains.
    """

    armature: np.ndarray
    frictionloss: np.ndarray
    torque_limit: np.ndarray
    kp: np.ndarray
    kv: np.ndarray


def make_twin_owned(spec: mujoco.MjSpec, model: mujoco.MjModel,
                    arms: Mapping[str, ArmBinding]) -> dict[str, TwinJoints]:
    """Edit ``spec`` (``model`` its compiled form, arms bound on it) into the twin-owned variant.

    Returns:
        arm name -> what its joints had (see :class:`TwinJoints`).

    Raises:
        ConfigError: a joint that is neither an arm's nor inside an arm's subtree (MuJoCo would
            have to integrate it), or a tendon through a welded joint.
    """
    owned = {int(j) for a in arms.values() for j in a.joint_ids}
    roots = {int(model.jnt_bodyid[j]) for j in owned}
    weld, refuse = [], []
    for j in range(model.njnt):
        if j in owned:
            continue
        body = int(model.jnt_bodyid[j])
        while body not in roots and body != 0:
            body = int(model.body_parentid[body])
        (weld if body in roots else refuse).append(model.joint(j).name)
    if refuse:
        raise ConfigError(
            f"sim.physics cosim: joint(s) {refuse} are outside every arm: MuJoCo would have to "
            f"integrate them next to the twin; the co-simulation takes fixed-base arms only (arm "
            f"joints: {sorted(model.joint(j).name for j in owned)})")
    out = {}
    for name, arm in arms.items():
        fields = {k: [] for k in ("armature", "frictionloss", "torque_limit", "kp", "kv")}
        for k, jid in enumerate(arm.joint_ids):
            dof = int(model.jnt_dofadr[jid])
            lo, hi = force_range(model, int(jid), [a.id for a in arm.actuators[k]])
            servo = next((a for a in arm.actuators[k] if a.kind is ActuatorKind.POSITION), None)
            fields["armature"].append(float(model.dof_armature[dof]))
            fields["frictionloss"].append(float(model.dof_frictionloss[dof]))
            fields["torque_limit"].append(float(max(abs(lo), abs(hi))))
            fields["kp"].append(servo.kp if servo else 0.0)
            fields["kv"].append(servo.kv if servo else 0.0)
            joint = spec.joint(model.joint(int(jid)).name)
            joint.armature = 0.0
            joint.frictionloss = 0.0
            joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_FALSE
            joint.actgravcomp = False
        out[name] = TwinJoints(**{k: np.array(v) for k, v in fields.items()})
    welded = set(weld)
    for tendon in spec.tendons:
        if any(getattr(w, "target", None) in welded for w in getattr(tendon, "path", [])):
            raise ConfigError(f"sim.physics cosim: tendon {tendon.name!r} runs through a welded "
                              "joint")
    for eq in list(spec.equalities):
        if eq.type == mujoco.mjtEq.mjEQ_JOINT and (eq.name1 in welded or eq.name2 in welded):
            spec.delete(eq)
    for sensor in list(spec.sensors):
        if sensor.objtype == mujoco.mjtObj.mjOBJ_JOINT and sensor.objname in welded:
            spec.delete(sensor)
        elif sensor.objtype == mujoco.mjtObj.mjOBJ_ACTUATOR:
            spec.delete(sensor)
    for actuator in list(spec.actuators):
        spec.delete(actuator)
    for name in weld:
        spec.delete(spec.joint(name))
    for body in spec.bodies:
        body.gravcomp = 0.0
    return out


def check_twin_owned(model: mujoco.MjModel, arms: Mapping[str, ArmBinding]) -> None:
    """Every degree of freedom belongs to an arm joint, and nothing drives or pads them.

    Raises:
        ConfigError: naming the first coordinate left to MuJoCo, or what was not removed.
    """
    owned = {int(d) for a in arms.values() for d in a.dof_adr}
    left = [model.joint(int(model.dof_jntid[d])).name for d in range(model.nv) if d not in owned]
    if left:
        raise ConfigError(f"sim.physics cosim: coordinate(s) of joint(s) {sorted(set(left))} "
                          "are left for MuJoCo to integrate; every coordinate must be the twin's")
    dofs = sorted(owned)
    for what, values in (("armature", model.dof_armature[dofs]),
                         ("frictionloss", model.dof_frictionloss[dofs])):
        if np.any(values != 0):
            raise ConfigError(f"sim.physics cosim: twin-owned joints keep {what} {values.tolist()}"
                              "; the twin models it")
    if model.nu:
        raise ConfigError(f"sim.physics cosim: the twin-owned model keeps {model.nu} actuator(s)")


@dataclass(frozen=True)
class ExchangeBound:
    """One joint's stability bound on the exchange period.

    Attributes:
        joint: its name.
        ratio: r = M_ii / J_twin at the pose.
        bound_s: the period at which the exchange goes unstable (inf for r <= 1).
        max_period_s: the period allowed (``SAFETY`` x the bound).
    """

    joint: str
    ratio: float
    bound_s: float
    max_period_s: float

    @property
    def min_rate_hz(self) -> float:
        return 0.0 if math.isinf(self.max_period_s) else 1.0 / self.max_period_s


def exchange_stability(model: mujoco.MjModel, qpos: np.ndarray, dofs: Sequence[int],
                       twin_inertia: np.ndarray, cutoff_hz: float = 10.0) -> list[ExchangeBound]:
    """The bound of each twin-owned coordinate ``dofs`` (J,) at ``qpos`` (nq,), with the twin's
    inertias ``twin_inertia`` (J,) kg m^2 and the acceleration filter's cutoff (Hz)."""
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, full)
    omega = 2 * math.pi * cutoff_hz
    out = []
    for dof, j_twin in zip(dofs, twin_inertia):
        r = float(full[dof, dof] - model.dof_armature[dof]) / float(j_twin)
        bound = (math.acos(-1.0 / r) / (omega * math.sqrt(r * r - 1.0))) if r > 1 else math.inf
        out.append(ExchangeBound(model.joint(int(model.dof_jntid[dof])).name, r, bound,
                                 SAFETY * bound))
    return out


@dataclass(frozen=True)
class ExchangeChoice:
    """The exchange rate chosen for a control period, and why.

    Attributes:
        ticks_per_exchange: twin ticks per exchange.
        exchanges_per_cycle: exchanges per control period.
        rate_hz: the exchange rate.
        bounds: each coupled joint's stability bound at the start pose.
        binding: the joint that set the minimum rate (None if any rate is stable).
    """

    ticks_per_exchange: int
    exchanges_per_cycle: int
    rate_hz: float
    bounds: tuple[ExchangeBound, ...]
    binding: Optional[str]
    how: str = "auto"

    def summary(self) -> str:
        worst = next((b for b in self.bounds if b.joint == self.binding), None)
        why = (f"bound by {worst.joint} (r = M_ii / J = {worst.ratio:.1f} needs >= "
               f"{worst.min_rate_hz:.0f} Hz)" if worst else "every joint stable at any rate")
        return (f"co-simulation: actuator twin at {1 / TICK_S / 1e3:g} kHz, exchange "
                f"{self.rate_hz:g} Hz ({self.how}, {self.exchanges_per_cycle} per control "
                f"period), {why}")

    def to_dict(self) -> dict:
        return {"rate_hz": self.rate_hz, "how": self.how, "ticks_per_exchange": self.ticks_per_exchange,
                "exchanges_per_cycle": self.exchanges_per_cycle, "binding_joint": self.binding,
                "joints": [{"joint": b.joint, "ratio": round(b.ratio, 3),
                            "min_rate_hz": round(b.min_rate_hz, 1)} for b in self.bounds]}


def choose_exchange(control_period: float, bounds: Sequence[ExchangeBound],
                    exchange_hz: float | str = "auto") -> ExchangeChoice:
    """The exchange for ``control_period`` (s): a whole number of ticks that divides the control
    period's ticks; with ``"auto"`` the lowest rate every joint's bound allows.

    Raises:
        ConfigError: the control period is not a whole number of ticks; ``exchange_hz`` does not
            divide it, or is above what a joint's stability bound allows (naming joint, r and
            the rate needed).
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
                f"sim.cosim.exchange_hz: {rate:g} Hz is unstable for joint {worst.joint!r} "
                f"(r = M_ii / J = {worst.ratio:.2f} at the start pose: the exchange period must be "
                f"<= {worst.max_period_s * 1e3:.3f} ms, half the bound "
                f"{worst.bound_s * 1e3:.3f} ms); needs >= {needed:.0f} Hz (or 'auto')")
    return ExchangeChoice(n, cycle_ticks // n, 1.0 / (n * TICK_S), tuple(bounds), binding,
                          "auto" if exchange_hz == "auto" else "configured")
