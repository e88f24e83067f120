"""How large may the physics step be? Five caps, each evaluated per element of the robot files.

With ``dt`` the step, ``REFERENCE_STEP`` (1.25 ms) the step the caps compare against, and I a
joint's inertia (the diagonal of the joint-space inertia matrix at the start pose, armature
included):

============  ==========================================================  ====================
cap           holds when                                                  largest passing dt
============  ==========================================================  ====================
servo         omega*dt <= max(1, zeta); omega = sqrt(kp/I),               max(1, zeta)/omega
              zeta = (kv + damping)/(2 sqrt(kp I))
damping       1 + dt*b/I <= 1.25 (1 + dt_ref*b/I), b = kv + damping       0.25 I/b + 1.25 dt_ref
              (implicit damping adds dt*b to the inertia a contact
              pushes against: the link sinks that much deeper)
solref        dt <= tau/2 for every contact geom, joint limit and         tau/2
              equality of the robot (MuJoCo raises a smaller tau to 2 dt:
              the rows get (tau/2dt)^2 as stiff)
link_gap      v*dt <= contact gap; v the speed of the farthest collision  gap/v
              point below a joint at min(2 rad/s, its velocity limit)
              (0.5 m/s for a slide)
loose_body    a free body's contacts no softer than at dt_ref:            max(tau/2, dt_ref)
              max(tau, 2 dt) <= max(tau, 2 dt_ref)
============  ==========================================================  ====================

:func:`step_caps` returns one :class:`StepCap` record per (cap, element) at a step;
:func:`choose_step` picks ``timestep: auto`` (the largest ``control_period / 2**j`` passing every
cap) or takes a pinned step and warns once per broken cap, naming the element and the cost.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from typing import Iterable, Mapping, Optional

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.arm_binding import ActuatorKind, ArmBinding
from mj_manipulator_ros.model.collidable import active_geoms

log = logging.getLogger(__name__)

REFERENCE_STEP = 0.00125    # s: the step the damping, solref and loose_body costs compare against
CONTACT_GAP = 0.005         # m: default largest travel of a collision point per step
LINK_SPEED = 2.0            # rad/s: the joint speed link_gap assumes (lower velocity limits win)
SLIDE_SPEED = 0.5           # m/s: the same for a slide joint
CAPS = ("servo", "damping", "solref", "link_gap", "loose_body")
_TOL = 1e-9                 # relative slack on comparisons (2.5 ms == 5 ms / 2 exactly)


@dataclass(frozen=True)
class StepCap:
    """One cap on one element at one step.

    Attributes:
        cap: one of :data:`CAPS`.
        element: what it is about ("joint openarm_left_joint5", "geom link1_collision", ...).
        value: the capped quantity at the step (omega*dt, damping ratio, dt (s), travel (m)).
        limit: its bound (same unit).
        max_step: the largest step passing this cap, s.
        cost: what breaking it costs at the step, in words ("" when it holds).
    """

    cap: str
    element: str
    value: float
    limit: float
    max_step: float
    cost: str

    @property
    def ok(self) -> bool:
        return self.value <= self.limit * (1 + _TOL)

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


@dataclass(frozen=True)
class StepChoice:
    """The physics step of a scene and why.

    Attributes:
        timestep: s.
        pinned: the configuration fixed it (otherwise ``timestep: auto`` chose it).
        control_period: s.
        binding: the cap with the smallest ``max_step`` (None when nothing caps below the control
            period).
        caps: every cap record at ``timestep``.
    """

    timestep: float
    pinned: bool
    control_period: float
    binding: Optional[StepCap]
    caps: tuple[StepCap, ...]

    @property
    def broken(self) -> tuple[StepCap, ...]:
        return tuple(c for c in self.caps if not c.ok)

    def summary(self) -> str:
        how = "pinned" if self.pinned else "auto"
        bound = (f"bound by {self.binding.cap} ({self.binding.element}: <= "
                 f"{self.binding.max_step * 1e3:.3g} ms)" if self.binding else
                 "no cap below the control period")
        broken = f"; {len(self.broken)} cap(s) broken" if self.broken else ""
        return (f"physics step {self.timestep * 1e3:.4g} ms ({how}, control period "
                f"{self.control_period * 1e3:.4g} ms), {bound}{broken}")

    def to_dict(self) -> dict:
        return {"timestep_s": self.timestep, "pinned": self.pinned,
                "control_period_s": self.control_period,
                "binding": self.binding.to_dict() if self.binding else None,
                "broken": [c.to_dict() for c in self.broken],
                "caps": [c.to_dict() for c in self.caps]}


def step_caps(model: mujoco.MjModel, arms: Iterable[ArmBinding], qpos: np.ndarray, dt: float,
              speeds: Mapping[str, float] | None = None, gap: float = CONTACT_GAP,
              reference: float = REFERENCE_STEP) -> list[StepCap]:
    """Every cap record at step ``dt`` (s) for the start pose ``qpos`` (nq,).

    Args:
        speeds: joint name -> velocity limit (rad/s or m/s) where known (link_gap uses the lower
            of it and :data:`LINK_SPEED` / :data:`SLIDE_SPEED`).
        gap: the contact gap, m.
        reference: the reference step, s.
    """
    arms = list(arms)
    speeds = speeds or {}
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, full)
    out: list[StepCap] = []
    for arm in arms:
        for k, name in enumerate(arm.joint_names):
            out += _joint_caps(model, data, full, arm, k, name, dt, speeds.get(name), gap, reference)
    out += _solref_caps(model, dt, reference)
    return out


def _joint_caps(model, data, full, arm: ArmBinding, k: int, name: str, dt: float,
                speed_limit: Optional[float], gap: float, ref: float) -> list[StepCap]:
    out = []
    dof, jid = int(arm.dof_adr[k]), int(arm.joint_ids[k])
    inertia = float(full[dof, dof])
    servos = [a for a in arm.actuators[k] if a.kind is ActuatorKind.POSITION]
    kp, kv = sum(a.kp for a in servos), sum(a.kv for a in arm.actuators[k])
    b = kv + float(model.dof_damping[dof])
    element = f"joint {name}"
    if kp > 0:
        omega = math.sqrt(kp / inertia)
        zeta = b / (2.0 * math.sqrt(kp * inertia))
        limit = max(1.0, zeta)
        bad = omega * dt > limit * (1 + _TOL)
        out.append(StepCap("servo", element, omega * dt, limit, limit / omega,
                           f"servo rings or diverges (omega*dt {omega * dt:.3g} > {limit:.3g})"
                           if bad else ""))
    if b > 0:
        x = b / inertia
        ratio = (1 + dt * x) / (1 + ref * x)
        cost = (f"a link's contact sinks {ratio:.3g}x as deep as at {ref * 1e3:.3g} ms"
                if ratio > 1.25 * (1 + _TOL) else "")
        out.append(StepCap("damping", element, ratio, 1.25, 0.25 / x + 1.25 * ref, cost))
    v = _farthest_point_speed(model, data, jid, speed_limit)
    if v is not None:
        speed, geom = v
        travel = speed * dt
        cost = (f"geom {geom} travels {travel * 1e3:.3g} mm per step at {speed:.3g} m/s (gap "
                f"{gap * 1e3:.3g} mm): contacts can be stepped through" if travel > gap * (1 + _TOL)
                else "")
        out.append(StepCap("link_gap", element, travel, gap, gap / speed, cost))
    return out


def _farthest_point_speed(model, data, jid: int, speed_limit: Optional[float]):
    """(speed m/s, geom name) of the collision point below joint ``jid`` that moves fastest, or
    None when no collision geom is below it."""
    jtype = int(model.jnt_type[jid])
    if jtype not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
        return None
    body = model.jnt_bodyid[jid]
    below = _subtree(model, body)
    geoms = [int(g) for g in np.flatnonzero(active_geoms(model))
             if model.geom_bodyid[g] in below]
    if not geoms:
        return None
    if jtype == int(mujoco.mjtJoint.mjJNT_SLIDE):
        speed = min(SLIDE_SPEED, speed_limit) if speed_limit else SLIDE_SPEED
        return speed, model.geom(geoms[0]).name or str(geoms[0])
    w = min(LINK_SPEED, speed_limit) if speed_limit else LINK_SPEED
    axis, anchor = data.xaxis[jid], data.xanchor[jid]
    rel = data.geom_xpos[geoms] - anchor
    radial = np.linalg.norm(rel - np.outer(rel @ axis, axis), axis=1) + model.geom_rbound[geoms]
    far = int(np.argmax(radial))
    g = geoms[far]
    return w * float(radial[far]), model.geom(g).name or str(g)


def _subtree(model, root: int) -> set:
    out = {root}
    for b in range(root + 1, model.nbody):  # parents come before children in MuJoCo
        if model.body_parentid[b] in out:
            out.add(b)
    return out


def _solref_caps(model: mujoco.MjModel, dt: float, ref: float) -> list[StepCap]:
    """solref for the robot's contact geoms, joint limits and equalities; loose_body for the
    contact geoms of free bodies. Elements with direct (negative) solref are not time constants
    and are skipped."""
    free = set()
    for j in range(model.njnt):
        if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            free |= _subtree(model, int(model.jnt_bodyid[j]))
    out = []
    for g in map(int, np.flatnonzero(active_geoms(model))):
        name = f"geom {model.geom(g).name or g}"
        tau = float(model.geom_solref[g, 0])
        if tau <= 0:
            continue
        if model.geom_bodyid[g] in free:
            out.append(_loose(name, tau, dt, ref))
        else:
            out.append(_solref(name, "contacts", tau, dt, ref))
    for j in range(model.njnt):
        if model.jnt_limited[j] and model.jnt_solref[j, 0] > 0:
            out.append(_solref(f"joint {model.joint(j).name} limit", "limit", float(model.jnt_solref[j, 0]),
                               dt, ref))
    for e in range(model.neq):
        if model.eq_solref[e, 0] > 0:
            out.append(_solref(f"equality {model.eq(e).name or e}", "equality",
                               float(model.eq_solref[e, 0]), dt, ref))
    return out


def _stiffness_ratio(tau: float, dt: float, ref: float) -> float:
    """How stiff a row of time constant tau is at dt relative to at ref (MuJoCo clamps tau to
    >= 2 dt)."""
    return (max(tau, 2 * ref) / max(tau, 2 * dt)) ** 2


def _solref(element: str, what: str, tau: float, dt: float, ref: float) -> StepCap:
    bad = dt > tau / 2 * (1 + _TOL)
    cost = (f"{what} {_stiffness_ratio(tau, dt, ref):.3g}x as stiff as at {ref * 1e3:.3g} ms "
            f"(time constant {tau * 1e3:.3g} ms raised to {2 * dt * 1e3:.3g} ms)" if bad else "")
    return StepCap("solref", element, dt, tau / 2, tau / 2, cost)


def _loose(element: str, tau: float, dt: float, ref: float) -> StepCap:
    limit = max(tau / 2, ref)
    bad = dt > limit * (1 + _TOL)
    cost = (f"free body contacts {_stiffness_ratio(tau, dt, ref):.3g}x as stiff as at "
            f"{ref * 1e3:.3g} ms" if bad else "")
    return StepCap("loose_body", element, dt, limit, limit, cost)


def choose_step(model: mujoco.MjModel, arms: Iterable[ArmBinding], qpos: np.ndarray,
                control_period: float, pinned: Optional[float] = None,
                speeds: Mapping[str, float] | None = None, gap: float = CONTACT_GAP,
                max_halvings: int = 8) -> StepChoice:
    """The physics step: ``pinned`` as given (a warning per broken cap; it must divide the control
    period, else :class:`ConfigError`), or the largest
    ``control_period / 2**j`` (j <= max_halvings) passing every cap (a warning per broken cap if
    even the smallest does not)."""
    arms = list(arms)
    probe = step_caps(model, arms, qpos, control_period, speeds, gap)
    binding = min(probe, key=lambda c: c.max_step, default=None)
    if binding is not None and binding.max_step >= control_period * (1 - _TOL):
        binding = None
    if pinned is not None:
        dt = float(pinned)
        per_cycle = control_period / dt
        if round(per_cycle) < 1 or abs(per_cycle - round(per_cycle)) > 1e-6:
            raise ConfigError(f"scene.timestep: {dt} s must divide the control period "
                              f"{control_period} s (a whole number of physics steps per control "
                              f"cycle); for example {control_period / max(1, math.ceil(per_cycle))} s")
    else:
        bound = binding.max_step if binding else control_period
        j = 0
        while j < max_halvings and control_period / 2**j > bound * (1 + _TOL):
            j += 1
        dt = control_period / 2**j
    caps = probe if dt == control_period else step_caps(model, arms, qpos, dt, speeds, gap)
    choice = StepChoice(dt, pinned is not None, control_period, binding, tuple(caps))
    warn_broken(choice)
    return choice


def warn_broken(choice: StepChoice) -> None:
    """One warning per broken cap, naming its worst element, the cost and the others."""
    by_cap: dict[str, list[StepCap]] = {}
    for c in choice.broken:
        by_cap.setdefault(c.cap, []).append(c)
    for cap, records in by_cap.items():
        worst = min(records, key=lambda c: c.max_step)
        others = [c.element for c in records if c is not worst]
        more = f"; also {len(others)} more: {', '.join(others[:12])}" if others else ""
        log.warning("physics step %.4g ms breaks the %s cap: %s: %s (passes up to %.3g ms)%s",
                    choice.timestep * 1e3, cap, worst.element, worst.cost, worst.max_step * 1e3,
                    more)
