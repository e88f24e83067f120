"""Co-simulation: an actuator twin owns the arm joints, MuJoCo is their inverse-dynamics load.

Two exchanges (``model/exchange.py``, ``docs/cosim.md``). The ``reference`` exchange (an
actuator-twin vendor's validated coupling contract), every ``ticks_per_exchange`` twin ticks
(exchange period ``dt``), at exchange k with the load of k-1:

1. advance every actuator together by ``ticks_per_exchange`` ticks with that load;
2. read the output shafts' q_k, v_k;
3. raw_a = (v_k - v_{k-1}) / dt; a_k = a_{k-1} + alpha (raw_a - a_{k-1}),
   alpha = 1 - exp(-2 pi 10 Hz dt) (v and a start at 0, or at the twin's start state);
4. write q_k, v_k into qpos/qvel; MuJoCo's position and velocity stages (kinematics, contacts,
   constraints: ``mj_fwdPosition``, ``mj_fwdVelocity``); MuJoCo's time is advanced by dt, its
   integrator never runs;
5. write a_k into qacc (the model has no actuators on those coordinates); ``mj_inverse``,
   skipping the stages step 4 computed (``mj_inverseSkip(mjSTAGE_VEL)``).
6. load = qfrc_inverse - qfrc_applied - J' xfrc_applied on the twin's coordinates: contact,
   constraint, passive, gravity, Coriolis, centrifugal and link inertia are in it;
7. that load drives the next exchange (one exchange of delay). Positive load opposes positive
   motion.

The ``mass_matrix`` exchange moves the links' inertia from the load into the twin: after step 6,
with M the twin coordinates' block of MuJoCo's joint-space inertia at q_k (``mj_fullM``), the
twin integrates ``(diag(J) + M) a = tau - R`` until the next exchange, and the exchanged load is
the rest ``R_k = L_k - M a_k`` (gravity, Coriolis, centrifugal, link damping, springs, contacts
and constraints: what is not the links' inertia). Its smooth part (all but ``qfrc_constraint``)
is held as the line through its values at k-1 and k (``S_k + (S_k - S_{k-1}) (t - t_k) / dt``,
flat before the second exchange); the constraint part (contacts, limits: they switch) is held
flat. Nothing inertial is delayed or filtered, so the link-to-rotor inertia ratio no longer
bounds the exchange.

Steps 4-5 give the load of ``mj_forward`` + ``mj_inverse`` to the last bit
(test_cosim.py checks it) at half the cost: ``mj_forward``'s acceleration stage would solve for a
qacc that step 5 overwrites.

Before the first exchange, :class:`CoSim` computes the load of the start state (step 5-6 with
the start acceleration): the twin starts against the real load, not a free shaft.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.exchange import CUTOFF_HZ, TICK_S, ExchangeMode
from mj_manipulator_ros.sim.actuator_twin import ActuatorTwin, TwinParams, default_resolution


class CoSim:
    """The exchange between one :class:`ActuatorTwin` and the MuJoCo model it loads.

    Args:
        model, data: the twin-owned model (no actuators, armature or joint friction on the
            coupled coordinates) and its data; this object then owns ``data``'s state.
        qpos_adr, dof_adr: the coupled coordinates, twin order (J,).
        twin: the actuators, its q/v the coordinates' start state.
        ticks_per_exchange: twin ticks per exchange.
        mode: what the exchange carries.

    Attributes:
        load: what drives the twin until the next exchange, N m (J,): the inverse-dynamics load
            (reference) or the rest without the links' inertia (mass_matrix).
        load_rate: mass_matrix: the held line's slope, N m/s (J,); reference: None.
        inverse_load: the links' whole inverse-dynamics load at the exchanged acceleration,
            N m (J,), in either mode.
        link_inertia: mass_matrix: the block of M the twin carries, kg m^2 (J, J); else None.
    """

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, qpos_adr: np.ndarray,
                 dof_adr: np.ndarray, twin: ActuatorTwin, ticks_per_exchange: int,
                 mode: ExchangeMode = ExchangeMode.MASS_MATRIX) -> None:
        if ticks_per_exchange < 1:
            raise ConfigError(f"co-simulation: ticks_per_exchange = {ticks_per_exchange}; "
                              "expected >= 1")
        self.model, self.data, self.twin = model, data, twin
        self.qpos_adr = np.asarray(qpos_adr, dtype=int)
        self.dof_adr = np.asarray(dof_adr, dtype=int)
        self.ticks = int(ticks_per_exchange)
        self.dt = self.ticks * TICK_S
        self.alpha = 1.0 - math.exp(-2 * math.pi * CUTOFF_HZ * self.dt)
        self.v_prev = twin.v.copy()
        self.accel = np.zeros(twin.params.size)
        self.exchanges = 0
        self.mode = ExchangeMode(mode)
        self._qfrc = np.zeros(model.nv)
        self._full = np.zeros((model.nv, model.nv))
        self._block = np.ix_(self.dof_adr, self.dof_adr)
        self.load_rate: np.ndarray | None = None
        self.link_inertia: np.ndarray | None = None
        self.inverse_load = np.zeros(twin.params.size)
        self.load: np.ndarray | None = None
        self._smooth: np.ndarray | None = None
        self._write_state()
        self.load = self._load()

    def exchange(self) -> None:
        """Steps 1-7 once."""
        twin = self.twin
        twin.advance(self.ticks, self.load, self.load_rate)                    # 1
        raw = (twin.v - self.v_prev) / self.dt                                  # 2, 3
        self.accel += self.alpha * (raw - self.accel)
        self.v_prev[:] = twin.v
        self.data.time += self.dt
        self._write_state()                                                     # 4
        self.load = self._load()                                                # 5, 6, 7
        self.exchanges += 1

    def _write_state(self) -> None:
        m, d = self.model, self.data
        d.qpos[self.qpos_adr] = self.twin.q
        d.qvel[self.dof_adr] = self.twin.v
        mujoco.mj_fwdPosition(m, d)
        mujoco.mj_fwdVelocity(m, d)

    def _load(self) -> np.ndarray:
        m, d = self.model, self.data
        d.qacc[self.dof_adr] = self.accel
        mujoco.mj_inverseSkip(m, d, mujoco.mjtStage.mjSTAGE_VEL, 0)
        load = d.qfrc_inverse[self.dof_adr] - d.qfrc_applied[self.dof_adr] \
            - self._body_forces()[self.dof_adr]
        d.qfrc_actuator[self.dof_adr] = self.twin.torque  # what /joint_states reports as effort
        self.inverse_load = load
        if self.mode is ExchangeMode.REFERENCE:
            return load
        mujoco.mj_fullM(m, d, self._full)
        inertia = self._carried(self._full[self._block])
        rest = load - inertia @ self.accel
        self.twin.carry(inertia)
        self.link_inertia = inertia
        # the smooth part (all but the constraint forces, which switch) follows the line
        # through its last two values (the start's: flat); the constraint part is held
        smooth = rest + d.qfrc_constraint[self.dof_adr]
        if self._smooth is not None:
            self.load_rate = (smooth - self._smooth) / self.dt
        self._smooth = smooth
        return rest

    def _carried(self, inertia: np.ndarray) -> np.ndarray:
        """The part of the links' inertia block (J, J) the twin carries (mass_matrix: all of it;
        a subclass may test a part, as ``bench/cosim_fixtures.DiagonalCoSim`` does)."""
        return inertia

    def _body_forces(self) -> np.ndarray:
        """J' xfrc_applied: the generalized force of the bodies' applied wrenches (nv,)."""
        m, d, out = self.model, self.data, self._qfrc
        out[:] = 0.0
        for b in np.flatnonzero(np.any(d.xfrc_applied != 0, axis=1)):
            mujoco.mj_applyFT(m, d, d.xfrc_applied[b, :3], d.xfrc_applied[b, 3:],
                              d.xipos[b], int(b), out)
        return out


def twin_params(scene, settings) -> TwinParams:
    """The twin of every arm joint of the twin-owned ``scene`` (arms in order), from what the
    robot file gave (``scene.twin``: the armature is the rotor inertia) and ``settings``
    (:class:`CosimSettings`)."""
    parts = [scene.twin[a] for a in scene.arms]
    inertia = np.concatenate([p.armature for p in parts])
    n = inertia.size
    counts = settings.encoder_counts_per_rev
    res = default_resolution(counts) if counts else 0.0
    return TwinParams(inertia, np.concatenate([p.torque_limit for p in parts]),
                      np.full(n, settings.viscous_friction),
                      np.concatenate([p.frictionloss for p in parts]),
                      np.full(n, 1.0 / (2 * math.pi * settings.current_loop_hz)), np.full(n, res))


def build_cosim(scene, settings, data: mujoco.MjData) -> "CoSim":
    """The co-simulation of a twin-owned ``scene`` (its exchange chosen at build:
    ``scene.exchange``) with ``settings`` (``SimSettings``) on ``data``."""
    params = twin_params(scene, settings.cosim)
    qpos_adr = np.concatenate([a.qpos_adr for a in scene.arms.values()])
    dof_adr = np.concatenate([a.dof_adr for a in scene.arms.values()])
    twin = ActuatorTwin(params, data.qpos[qpos_adr].copy(), data.qvel[dof_adr].copy())
    twin.command(twin.q, 0.0, 0.0, 0.0, 0.0)
    return CoSim(scene.model, data, qpos_adr, dof_adr, twin, scene.exchange.ticks_per_exchange,
                 scene.exchange.mode)
