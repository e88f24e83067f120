"""Inline fixtures of the co-simulation's validations (bench/cosim_bench.py and the tests):
a single pendulum, a double pendulum, a link driven into a box; a coupled run and the
references it is held to (a standalone twin, a monolithic MuJoCo model with the twin's inertia
as armature, a finer exchange).

Every fixture is a hinge about y; gravity (when on) along -z, the link hanging at q = 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import mujoco
import numpy as np

from mj_manipulator_ros.model.exchange import ExchangeMode
from mj_manipulator_ros.sim.actuator_twin import TICK_S, ActuatorTwin, TwinParams
from mj_manipulator_ros.sim.cosim import CoSim

MASS, REFERENCE = ExchangeMode.MASS_MATRIX, ExchangeMode.REFERENCE
DIAGONAL = "diagonal"   # a candidate measured and rejected: the twin carries M's diagonal only


class DiagonalCoSim(CoSim):
    """The mass_matrix exchange with only M's diagonal carried by the twin (the off-diagonal
    coupling crosses the exchange, filtered and delayed): the issue's first candidate, kept to
    show why it was not chosen (docs/cosim.md)."""

    def _carried(self, inertia: np.ndarray) -> np.ndarray:
        return np.diag(np.diag(inertia))


def make_cosim(mode, *args) -> CoSim:
    """A :class:`CoSim` of ``mode`` (an :class:`ExchangeMode` or :data:`DIAGONAL`)."""
    if mode == DIAGONAL:
        return DiagonalCoSim(*args, MASS)
    return CoSim(*args, ExchangeMode(mode))

CONTROL_S = 0.002  # commands change at 500 Hz, as the simulator's control cycle
SAMPLE_S = 0.01    # runs are sampled every 10 ms (a whole number of exchanges at 100 Hz and up)


def pendulum_xml(mass=1.0, length=0.25, gravity=True, box_at: Optional[float] = None,
                 energy=False) -> str:
    """A single link: point-like mass ``mass`` kg at ``length`` m below a hinge about y
    (I = m l^2 + 1e-4). ``box_at``: a box the link's tip meets at that angle (rad)."""
    box = ""
    if box_at is not None:
        # hinge about +y: the tip is at (-l sin q, 0, -l cos q) and moves along (-cos q, 0, sin q)
        # as q rises; the box's face touches the tip sphere (radius 0.02) at q = box_at
        c, s = math.cos(box_at), math.sin(box_at)
        reach = 0.02 + 0.05
        bx, bz = -length * s - reach * c, -length * c + reach * s
        box = (f'<body name="box" pos="{bx} 0 {bz}" euler="0 {math.degrees(box_at)} 0"><geom '
               f'type="box" size="0.05 0.05 0.05" solimp="0.5 0.5 0.001" solref="0.02 1"/></body>')
    flags = '<flag energy="enable"/>' if energy else ""
    return f"""<mujoco><option gravity="0 0 {-9.81 if gravity else 0}">{flags}</option>
<worldbody>{box}
  <body name="link"><joint name="j1" type="hinge" axis="0 1 0"/>
    <inertial pos="0 0 {-length}" mass="{mass}" diaginertia="1e-4 1e-4 1e-4"/>
    <geom name="tip" type="sphere" pos="0 0 {-length}" size="0.02" contype="1" conaffinity="1"
          mass="0"/>
  </body>
</worldbody></mujoco>"""


def double_pendulum_xml(gravity=False) -> str:
    """Two links of 1 kg, 0.3 m, about parallel y axes (a planar double pendulum)."""
    return f"""<mujoco><option gravity="0 0 {-9.81 if gravity else 0}"/>
<worldbody>
  <body name="l1"><joint name="j1" type="hinge" axis="0 1 0"/>
    <inertial pos="0 0 -0.15" mass="1" diaginertia="0.0075 0.0075 1e-4"/>
    <body name="l2" pos="0 0 -0.3"><joint name="j2" type="hinge" axis="0 1 0"/>
      <inertial pos="0 0 -0.15" mass="1" diaginertia="0.0075 0.0075 1e-4"/>
    </body>
  </body>
</worldbody></mujoco>"""


def params(inertia, limit=50.0, coulomb=0.0, viscous=0.0, current_s=0.0, resolution=0.0,
           n: int = 1) -> TwinParams:
    full = lambda x: np.full(n, float(x)) if np.isscalar(x) else np.asarray(x, float)  # noqa: E731
    return TwinParams(full(inertia), full(limit), full(viscous), full(coulomb), full(current_s),
                      full(resolution))


@dataclass
class Run:
    """A coupled (or reference) run sampled every control period."""

    t: list = field(default_factory=list)
    q: list = field(default_factory=list)
    v: list = field(default_factory=list)
    load: list = field(default_factory=list)
    torque: list = field(default_factory=list)
    accel: list = field(default_factory=list)
    energy: list = field(default_factory=list)
    extra: list = field(default_factory=list)

    def arrays(self) -> "Run":
        return Run(*[np.asarray(getattr(self, k)) for k in self.__dataclass_fields__])


Command = Callable[[float], tuple]  # t -> (q_ref, v_ref, kp, kd, tau_ff)


def cosim_run(xml: str, twin_params: TwinParams, rate_hz: float, seconds: float,
              q0=0.0, command: Optional[Command] = None,
              setup: Optional[Callable[[mujoco.MjModel, mujoco.MjData], None]] = None,
              probe: Optional[Callable[[mujoco.MjModel, mujoco.MjData, CoSim], object]] = None,
              mode=MASS) -> Run:
    """Couple ``twin_params`` to every joint of ``xml`` at ``rate_hz`` exchanges per second,
    with the exchange ``mode``."""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    if setup:
        setup(m, d)
    n = m.nv
    twin = ActuatorTwin(twin_params, np.broadcast_to(np.asarray(q0, float), (n,)))
    ticks = int(round(1.0 / (rate_hz * TICK_S)))
    cosim = make_cosim(mode, m, d, m.jnt_qposadr.copy(), m.jnt_dofadr.copy(), twin, ticks)
    energy = bool(m.opt.enableflags & mujoco.mjtEnableBit.mjENBL_ENERGY)
    if energy:  # the energy above the lowest pose (q = 0): the first sample is the start's
        rest = mujoco.MjData(m)
        mujoco.mj_forward(m, rest)
        bottom = float(rest.energy[0])
    per_control = max(1, int(round(CONTROL_S / (ticks * TICK_S))))
    per_sample = int(round(SAMPLE_S / (ticks * TICK_S)))
    out = Run()
    if energy:
        mujoco.mj_energyPos(m, d)
        mujoco.mj_energyVel(m, d)
        out.energy.append(float(d.energy.sum()) + twin.kinetic_energy() - bottom)
    steps = int(round(seconds / (ticks * TICK_S)))
    for k in range(steps):
        t = k * ticks * TICK_S
        if command and k % per_control == 0:
            twin.command(*command(t))
        cosim.exchange()
        if (k + 1) % per_sample == 0:
            out.t.append(t + ticks * TICK_S)
            out.q.append(twin.q.copy())
            out.v.append(twin.v.copy())
            out.load.append(cosim.inverse_load.copy())
            out.torque.append(twin.torque.copy())
            out.accel.append(cosim.accel.copy())
            if energy:
                mujoco.mj_energyPos(m, d)
                mujoco.mj_energyVel(m, d)
                out.energy.append(float(d.energy.sum()) + twin.kinetic_energy() - bottom)
            if probe:
                out.extra.append(probe(m, d, cosim))
    return out.arrays()


def monolithic_run(xml: str, twin_params: TwinParams, seconds: float, q0=0.0,
                   command: Optional[Command] = None) -> Run:
    """The reference: one MuJoCo model with the twin's inertia as armature, stepped at the
    twin's tick (RK4), the MIT law and the current loop evaluated each step on MuJoCo's state
    (applied through ``qfrc_applied``); drivetrain friction and torque limits as the twin's."""
    m = mujoco.MjModel.from_xml_string(xml)
    cycles = int(round(seconds / CONTROL_S))
    commands = None if command is None else (command(k * CONTROL_S) for k in range(cycles))
    return monolithic_replay(m, twin_params, np.broadcast_to(np.asarray(q0, float), (m.nq,)),
                             commands, cycles, SAMPLE_S)


def monolithic_replay(m: mujoco.MjModel, twin_params: TwinParams, qpos0: np.ndarray, commands,
                      cycles: int, sample_s: float = CONTROL_S, contacts: bool = True) -> Run:
    """:func:`monolithic_run` on the twin-owned model ``m`` (edited in place: the twin's inertia
    as armature, the tick as RK4 step) from ``qpos0`` (nq,): ``commands`` yields one MIT command
    (q_ref, v_ref, kp, kd, tau_ff) per control period, ``cycles`` of them (None: motor off);
    the encoder quantized as the twin's. Sampled every ``sample_s``. ``contacts=False``: contact
    disabled (only for a run known to touch nothing: a third of the cost)."""
    m.opt.timestep = TICK_S
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    if not contacts:
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    m.dof_armature[:] = twin_params.inertia
    d = mujoco.MjData(m)
    d.qpos[:] = qpos0
    mujoco.mj_forward(m, d)
    p = twin_params
    beta = TICK_S / (p.current_time_constant + TICK_S)
    res = p.encoder_resolution
    quantized = bool(np.any(res > 0))
    safe_res = np.where(res > 0, res, 1.0)
    tau = np.zeros(m.nv)
    per_control = int(round(CONTROL_S / TICK_S))
    per_sample = int(round(sample_s / TICK_S))
    commands = iter(commands) if commands is not None else None
    q_ref = v_ref = kp = kd = ff = np.zeros(m.nv)
    out = Run()
    for k in range(cycles * per_control):
        if commands is not None and k % per_control == 0:
            q_ref, v_ref, kp, kd, ff = (np.broadcast_to(np.asarray(c, float), (m.nv,)).copy()
                                        for c in next(commands))
        q_enc = np.where(res > 0, np.rint(d.qpos / safe_res) * res, d.qpos) if quantized \
            else d.qpos
        tau_cmd = np.clip(kp * (q_ref - q_enc) + kd * (v_ref - d.qvel) + ff, -p.torque_limit,
                          p.torque_limit)
        tau += beta * (tau_cmd - tau)
        d.qfrc_applied[:] = tau - p.coulomb * np.tanh(d.qvel / p.coulomb_velocity) \
            - p.viscous * d.qvel
        mujoco.mj_step(m, d)
        if (k + 1) % per_sample == 0:
            out.t.append((k + 1) * TICK_S)
            out.q.append(d.qpos.copy())
            out.v.append(d.qvel.copy())
    return out.arrays()
