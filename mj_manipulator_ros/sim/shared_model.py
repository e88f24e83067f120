"""SharedModel: the one owner of the simulation's MjModel/MjData, and its physics thread.

THE RULE (MuJoCo is not thread-safe):

1. Exactly one thread — the physics thread started by :meth:`SharedModel.start` — writes the
   shared ``MjData``: it runs the arms' controllers once per control period and steps physics at
   the model timestep.
2. Every other thread (action callbacks, joint-state publishing, replay checks, a viewer) reads
   the shared data only under :attr:`SharedModel.lock`, through :meth:`snapshot` or
   :meth:`read`, and never keeps references to its arrays.
3. Commands never go into ``MjData`` from other threads: action callbacks hand goals and cancels
   to each arm's simulated controller (``sim/controllers``) through its locked slot; the physics
   thread takes them at the next control cycle and writes the controller's command to the
   actuators it drives.
4. Work that needs its own kinematics (a replay check) uses its own ``MjData`` on the shared
   ``MjModel`` (the model is only read after construction).

Observers (e.g. /joint_states and /clock publishers) are called by the physics thread at their
rates in simulated time, with a snapshot copied under the lock and the lock released.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import errno
import math
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

import mujoco
import numpy as np

from mj_manipulator_ros.core.config import ExecutionSettings
from mj_manipulator_ros.core.errors import ConfigError, SimulationDivergedError
from mj_manipulator_ros.model.scene import Scene
from mj_manipulator_ros.model.exchange import ExchangeChoice
from mj_manipulator_ros.sim.controllers import SimulatedController, make_controller
from mj_manipulator_ros.sim.cosim import CoSim, build_cosim
from mj_manipulator_ros.sim.lag_warning import LagThreshold, LagWarnings, warn_lag_s
from mj_manipulator_ros.sim.sim_clock import SimClock, SimHealth
from mj_manipulator_ros.sim.miswiring import Wiring
from mj_manipulator_ros.sim.model_mismatch import apply_mismatch, has_mismatch
from mj_manipulator_ros.sim.sim_config import ArmFaults, SimConfig, SimSettings
from mj_manipulator_ros.sim.trajectory_follower import KERNEL as FOLLOW_KERNEL


@dataclass(frozen=True)
class ArmState:
    """Positions (rad/m), velocities (/s), efforts (N m / N) of one arm's joints, shape (J,),
    then of its gripper joints (``gripper_joints``; shape (G,), as physics has them: the
    miswiring faults act on the arm's joints)."""

    positions: np.ndarray
    velocities: np.ndarray
    efforts: np.ndarray
    gripper: tuple[np.ndarray, np.ndarray, np.ndarray] = ()

    def with_gripper(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Positions, velocities and efforts of the arm's joints then its gripper's, (J + G,)."""
        arm = (self.positions, self.velocities, self.efforts)
        if not self.gripper:
            return arm
        return tuple(np.concatenate([a, g]) for a, g in zip(arm, self.gripper))


@dataclass(frozen=True)
class Snapshot:
    sim_time: float                  # s of simulated time
    controller_time: float           # s on the controllers' clock
    arms: dict[str, ArmState]


#: MuJoCo's warnings that mean it reset a diverged state
DIVERGENCE_WARNINGS = tuple(int(w) for w in (mujoco.mjtWarning.mjWARN_BADQACC,
                                             mujoco.mjtWarning.mjWARN_BADQPOS,
                                             mujoco.mjtWarning.mjWARN_BADQVEL))

#: an arm joint faster than this (rad/s, or m/s) is a diverged integration, not physics (the
#: co-simulation's twin integrates itself: MuJoCo's own checks never see it)
DIVERGED_SPEED = 1e3

#: with use_sim_time, a pacing deficit beyond this (s) is dropped: physics is the clock; on
#: the system clock, idle, a deficit beyond it is dropped even while an arm moves
PACING_SLACK_S = 0.5

#: this many control cycles in a row run behind real time without waiting, the physics thread
#: leaves SCHED_FIFO until a cycle waits again (catching up must not take the machine)
FIFO_BEHIND_CYCLES = 3

#: idle, every arm joint slower than this (rad/s or m/s) stands: a deficit of physics time is
#: then dropped at once (nothing a stamp could show changes while it stands)
REST_SPEED = 1e-3

#: after aborting for lag, how long (s, wall) physics waits for the action servers to return
#: the results before it steps on
RESULT_FIRST_S = 0.25


class _SwitchInterval:
    """The process's Python thread switch interval, lowered while any physics thread runs
    (``sim.switch_interval_s``) and put back when the last one stops."""

    _lock = threading.Lock()
    _holders: list[float] = []
    _saved: Optional[float] = None

    @classmethod
    def hold(cls, interval: float) -> bool:
        if interval <= 0:
            return False
        with cls._lock:
            if not cls._holders:
                cls._saved = sys.getswitchinterval()
            cls._holders.append(interval)
            sys.setswitchinterval(min(min(cls._holders), cls._saved))
        return True

    @classmethod
    def release(cls, interval: float) -> None:
        with cls._lock:
            cls._holders.remove(interval)
            sys.setswitchinterval(min(cls._holders + [cls._saved]))
            if not cls._holders:
                cls._saved = None


class SharedModel:
    """Args:
        scene: the compiled scene with its arms.
        settings: the ``sim`` section (control rate, pacing, each arm's controller and faults).
        clock: the controllers' clock given the physics time (``sim/sim_clock.py``); default:
            physics time itself (use_sim_time).
        compiled: run the position controllers' steady cycles in C (``sim/_follow_kernel.c``)
            when it is built; False: every cycle in Python, the reference implementation (tests
            and benchmarks compare the two).
        warn_lag: the lag that warns with a goal active (``sim/lag_warning.py``); default:
            from ``settings`` and the default execution settings.
    """

    def __init__(self, scene: Scene, settings: SimSettings = SimSettings(),
                 clock: Optional[SimClock] = None, compiled: bool = True,
                 warn_lag: Optional[LagThreshold] = None) -> None:
        if has_mismatch(settings.faults):   # the simulated arm's load, not the model's
            scene = dataclasses.replace(scene, model=copy.deepcopy(scene.model))
            apply_mismatch(scene.model, scene, settings.faults)
        self.scene = scene
        self.model = scene.model
        self.data = scene.initial_data()
        self.lock = threading.Lock()
        self.clock = clock or SimClock(settings.real_time_factor, use_sim_time=True)
        self._clock = self.clock
        self.settings = settings
        self.control_period = 1.0 / settings.control_rate_hz
        self.steps_per_cycle = max(1, int(round(self.control_period / self.model.opt.timestep)))
        # miswiring faults (sim/miswiring.py): which arm's joints each controller is wired to,
        # and how (None: straight through, the fast path)
        self.physical = _physical_arms(scene, settings)
        drives = {self.physical[n]: n for n in scene.arms}   # physical arm -> its controller
        #: controller -> the force limits (joint id, N m) of the arm it drives, applied at its
        #: first activation: an arm whose controller starts inactive is held until then (a
        #: brake, a stand), and its motors take the load when it is activated
        self._braked: dict[str, list[tuple[int, float]]] = {}
        for name, arm in scene.arms.items():   # sim.faults.<arm>.force_limit
            limits = [(int(arm.joint_ids[list(arm.joint_names).index(joint)]), float(limit))
                      for joint, limit in
                      (settings.faults.get(name) or ArmFaults()).force_limit.items()]
            if limits and not settings.arm(drives[name]).start_active:
                self._braked[drives[name]] = limits
                continue
            self._limit(limits)
        self.controllers: dict[str, SimulatedController] = {}
        self.wirings: dict[str, Optional[Wiring]] = {}
        for name, arm in scene.arms.items():
            faults = settings.faults.get(name) or ArmFaults()
            wiring = Wiring(arm.joint_names, faults)
            wired_to = scene.arms[self.physical[name]]
            self.wirings[name] = None if wiring.identity and wired_to is arm else wiring
            wiring.cycle_s = self.control_period
            self.controllers[name] = make_controller(
                settings.arm(name).controller, arm,
                wiring.hold(self.data.qpos[wired_to.qpos_adr]), faults, settings.arm(name), scene)
            self.controllers[name].follower.activated = settings.arm(name).start_active
        for name, wiring in self.wirings.items():
            if wiring is not None and getattr(self.controllers[name], "_null", None):
                raise ConfigError(f"sim.faults.{name}: miswiring faults with a torque controller "
                                  "need sim.arms.<arm>.nulling: disable (the nulled servos "
                                  "are not rewired)")
        # per arm, what its joint states read: (name, the joints it is wired to, its wiring)
        self._views = [(n, scene.arms[self.physical[n]], self.wirings[n]) for n in scene.arms]
        #: every arm joint's qpos / dof address: checked finite whenever a snapshot is taken
        self._arm_qpos = np.concatenate([np.asarray(a.qpos_adr) for a in scene.arms.values()])
        self._arm_dofs = np.concatenate([np.asarray(a.dof_adr) for a in scene.arms.values()])
        # per arm: controller, qpos / qvel / ctrl indices of the joints it is wired to (a slice
        # where contiguous: cheaper), its wiring, its kind
        self._wiring = []
        for n in scene.arms:
            wired_to = self.physical[n]
            phys = scene.arms[wired_to]
            self._wiring.append((self.controllers[n], _index(phys.qpos_adr), _index(phys.dof_adr),
                                 _index(self.controllers[wired_to].actuator_ids),
                                 self.wirings[n], settings.arm(n).controller))
        self._names = list(scene.arms)    # controller names in the order of _wiring
        self._observers: list[list] = []  # [period_s, next_due_sim_s, callback]
        #: a pacing change for the physics thread to take: (factor, taken); None: none asked
        #: (written and taken under its lock: a request never overwrites one being taken)
        self._rate_request: Optional[tuple[float, threading.Event]] = None
        self._rate_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.error: Optional[BaseException] = None
        self.cycles = 0
        #: called as on_event(level, text) from the physics thread (a logger: "warn", "error",
        #: "info"); must be quick
        self.on_event: Callable[[str, str], None] = lambda level, text: None
        self._health = _HealthMeter(self.control_period)
        #: which lags are said (a warning line) and the count of those that are not
        self.lag_warnings = LagWarnings(warn_lag or warn_lag_s(settings, ExecutionSettings()),
                                        self.control_period)
        self._scheduling = "not requested"
        #: the SCHED_FIFO priority granted (0: none) and the cycles run behind without waiting
        self._fifo = 0
        self._behind_cycles = 0
        self.cosim: Optional[CoSim] = None   # sim.physics cosim: the twin integrates the arms
        if settings.physics == "cosim":
            self.cosim = build_cosim(scene, settings, self.data)
            sizes = np.cumsum([0] + [len(a.joint_names) for a in scene.arms.values()])
            cols = dict(zip(scene.arms, (slice(int(a), int(b))
                                         for a, b in zip(sizes[:-1], sizes[1:]))))
            # each controller's rows go to the columns of the joints it is wired to
            self._twin_cols = [cols[self.physical[n]] for n in scene.arms]
            self._twin_command = np.zeros((5, int(sizes[-1])))
        # the compiled follower runs the steady cycles of position-controlled arms wired straight
        # through with contiguous joints and servos; per arm its Follow, or None (always Python)
        self._follows: Optional[tuple] = None
        self._all_arms = (1 << len(self._wiring)) - 1
        if compiled and self.cosim is None and FOLLOW_KERNEL is not None:
            self._follows = tuple(self._bind(*w) for w in self._wiring)

    def _bind(self, controller, qi, vi, ci, wiring, kind):
        """``controller``'s compiled follower on the shared data, or None when its cycles must
        run in Python (another kind, a miswiring, joints or servos not contiguous)."""
        if kind != "position" or wiring is not None or not all(
                isinstance(i, slice) and i.stop - i.start == len(controller.joint_names)
                for i in (qi, vi, ci)):
            return None
        d = self.data
        return controller.follower.bind(d.qpos, d.qvel, d.ctrl, qi.start, vi.start, ci.start)

    @property
    def exchange(self) -> Optional[ExchangeChoice]:
        """Under co-simulation, the exchange the scene was built with (else None)."""
        return self.scene.exchange

    @classmethod
    def from_config(cls, config: SimConfig, clock: Optional[SimClock] = None,
                    compiled: bool = True) -> "SharedModel":
        """The scene of ``config`` compiled for simulation, with its ``sim`` settings (and the
        lag warning from its ``sim`` and ``execution`` settings)."""
        return cls(config.build_scene(), config.sim, clock, compiled,
                   warn_lag_s(config.sim, config.executor.execution))

    # ---- readers (any thread) -----------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        with self.lock:
            return self._snapshot_locked()

    def _snapshot_locked(self) -> Snapshot:
        d = self.data
        arms = {}
        for name, a, wiring in self._views:
            q, qd, e = d.qpos[a.qpos_adr].copy(), d.qvel[a.dof_adr].copy(), \
                d.qfrc_actuator[a.dof_adr].copy()
            g = a.gripper
            gripper = (d.qpos[g.qpos_adr].copy(), d.qvel[g.dof_adr].copy(),
                       d.qfrc_actuator[g.dof_adr].copy()) if g.joint_names else ()
            arms[name] = ArmState(*(wiring.report(q, qd, e) if wiring is not None else (q, qd, e)),
                                  gripper)
        return Snapshot(float(d.time), self._clock(float(d.time)), arms)

    def read(self, fn: Callable[[mujoco.MjModel, mujoco.MjData], object]) -> object:
        """Run ``fn(model, data)`` under the lock; fn must only read, and copy what it keeps."""
        with self.lock:
            return fn(self.model, self.data)

    def controller_time(self, arm: Optional[str] = None) -> float:
        """The controllers' clock, s; with ``arm``, that arm's controller's (its
        ``clock_offset_s`` and ``clock_step_s`` faults added)."""
        with self.lock:
            sim_time = float(self.data.time)
            now = self._clock(sim_time)
        return now + (self.controllers[arm].faults.clock_offset_at(sim_time) if arm else 0.0)

    def controller_time_at(self, sim_time: float, arm: str) -> float:
        """``arm``'s controller clock at physics time ``sim_time``, s (as :meth:`controller_time`
        for a snapshot's time; no lock: for observers, which run with physics held)."""
        return self._clock(sim_time) + self.controllers[arm].faults.clock_offset_at(sim_time)

    def add_observer(self, rate_hz: float, callback: Callable[[Snapshot], None]) -> None:
        """Call ``callback(snapshot)`` from the physics thread every 1/rate_hz s of sim time."""
        self._observers.append([1.0 / rate_hz, 0.0, callback])

    def set_real_time_factor(self, factor: float, timeout: float = 2.0) -> None:
        """Pace physics at ``factor`` simulated seconds per wall second from the next control
        cycle on (``SimClock.set_rate``: the clock goes on from where it is, no jump; on sim
        time a deficit of the old pace is dropped, not caught up at the new one). Waits
        (wall time, at most ``timeout`` s) until the running physics thread has taken it.

        Raises:
            ValueError: ``factor`` is not > 0, or physics is unpaced (``real_time_factor`` 0).
            TimeoutError: the physics thread did not take it within ``timeout``.
        """
        if not factor > 0 or not math.isfinite(factor):
            raise ValueError(f"real-time factor {factor!r}: expected a finite number > 0")
        if self.real_time_factor <= 0:
            raise ValueError("physics runs unpaced (sim.real_time_factor 0): no pace to change")
        taken = threading.Event()
        with self._rate_lock:
            self._rate_request = (float(factor), taken)
        if self._thread is None or not self._thread.is_alive():
            self._take_rate_request()
            return
        if not taken.wait(timeout):
            raise TimeoutError(f"the physics thread did not take the real-time factor {factor:g} "
                               f"within {timeout:g} s")

    def _take_rate_request(self) -> None:
        with self._rate_lock:
            request, self._rate_request = self._rate_request, None
        if request is None:
            return
        factor, taken = request
        self.clock.set_rate(factor, float(self.data.time))
        taken.set()

    @property
    def real_time_factor(self) -> float:
        """Simulated seconds per wall second physics is paced at now (0: unpaced): the
        clock's (``sim.real_time_factor`` until :meth:`set_real_time_factor`)."""
        return self.clock.real_time_factor

    # ---- the physics thread -------------------------------------------------------------------
    def start(self) -> "SharedModel":
        self._switch_held = _SwitchInterval.hold(self.settings.switch_interval_s)
        self._thread = threading.Thread(target=self._loop, name="mjmr-physics", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"physics thread did not stop within {timeout} s")
        if getattr(self, "_switch_held", False):
            self._switch_held = False
            _SwitchInterval.release(self.settings.switch_interval_s)

    def _limit(self, limits: list[tuple[int, float]]) -> None:
        for jid, limit in limits:
            self.model.jnt_actfrclimited[jid] = 1
            self.model.jnt_actfrcrange[jid] = (-limit, limit)

    def _release(self, i: int) -> None:
        """Physics thread: controller ``i`` (scene order) has been activated: the force limits
        of the arm it drives apply from now on."""
        name = self._names[i]
        if name in self._braked and self._wiring[i][0].follower.activated:
            self._limit(self._braked.pop(name))

    def step_cycle(self) -> Optional[Snapshot]:
        """One control cycle: controllers, then physics steps. Physics thread only (or a test
        driving the model synchronously with no thread started). Returns the snapshot given to
        the observers due this cycle, or None when none was due."""
        m, d = self.model, self.data
        with self.lock:
            sim_time = float(d.time)
            now = self._clock(sim_time)
            if self.cosim is not None:
                self._cosim_cycle(now, sim_time)
            else:
                # the steady cycles in C; the arms it hands back (an event, or always) here
                mask = self._all_arms if self._follows is None else \
                    FOLLOW_KERNEL.cycle(now, self._follows)
                for i, (controller, qi, vi, ci, wiring, kind) in enumerate(self._wiring):
                    if not mask >> i & 1:
                        continue
                    if wiring is None:
                        d.ctrl[ci] = controller.update(
                            now + controller.faults.clock_offset_at(sim_time),
                            d.qpos[qi].copy(), d.qvel[vi].copy())
                        if self._braked:
                            self._release(i)
                        continue
                    q, qd, _ = wiring.report(d.qpos[qi].copy(), d.qvel[vi].copy())
                    command = controller.update(
                        now + controller.faults.clock_offset_at(sim_time), q, qd)
                    if self._braked:
                        self._release(i)
                    d.ctrl[ci] = (wiring.torque_command(command, controller.follower.position)
                                  if kind == "torque" else wiring.position_command(command))
                if self.steps_per_cycle == 1:
                    mujoco.mj_step(m, d)
                else:
                    mujoco.mj_step(m, d, self.steps_per_cycle)
            self.cycles += 1
            now_sim = float(d.time)
            due = [obs for obs in self._observers if now_sim + 1e-12 >= obs[1]]
            if due:   # as often as anyone reads the state (not every cycle: it costs)
                self._check_finite(now_sim)
            snap = self._snapshot_locked() if due else None  # copy only when someone needs it
        for obs in due:
            obs[1] = now_sim + obs[0]
            obs[2](snap)
        return snap

    def _check_finite(self, sim_time: float) -> None:
        """Raise :class:`SimulationDivergedError` when an arm's state is not finite, an arm
        joint is faster than :data:`DIVERGED_SPEED`, or MuJoCo reset the state after a bad
        acceleration, position or velocity (its warnings)."""
        d = self.data
        bad = [k for k in DIVERGENCE_WARNINGS if d.warning[k].number > 0]
        q, v = d.qpos[self._arm_qpos], d.qvel[self._arm_dofs]
        if not bad and np.isfinite(q).all() and np.abs(v).max() <= DIVERGED_SPEED:
            return
        what = (f"MuJoCo {', '.join(mujoco.mjtWarning(k).name for k in bad)} (the state was "
                "reset)" if bad else
                "an arm's joint position is not finite" if not np.isfinite(q).all() else
                f"an arm joint turns at {np.nanmax(np.abs(v)):.3g} rad/s (more than "
                f"{DIVERGED_SPEED:g}: not a motion, a divergence)")
        raise SimulationDivergedError(
            f"the simulated physics diverged at {sim_time:.3f} s of simulated time: {what}; "
            "every state after it would be false, so the simulator stops (a gain too high for "
            "the time step or the exchange rate, an unstable model)")

    def _cosim_cycle(self, now: float, sim_time: float) -> None:
        """The controllers' MIT commands to the twin, then the cycle's exchanges (which advance
        MuJoCo's time; its integrator never runs)."""
        d, cmd = self.data, self._twin_command
        for (controller, qi, vi, _, wiring, _kind), cols in zip(self._wiring, self._twin_cols):
            if wiring is None:
                cmd[:, cols] = controller.update(now + controller.faults.clock_offset_at(sim_time),
                                                 d.qpos[qi].copy(), d.qvel[vi].copy())
                continue
            q, qd, _ = wiring.report(d.qpos[qi].copy(), d.qvel[vi].copy())
            cmd[:, cols] = wiring.mit_command(
                controller.update(now + controller.faults.clock_offset_at(sim_time), q, qd))
        self.cosim.twin.command(*cmd)
        for _ in range(self.exchange.exchanges_per_cycle):
            self.cosim.exchange()

    def health(self) -> SimHealth:
        """The timekeeping so far (any thread)."""
        return self._health.value(self.cycles, self._scheduling, self.lag_warnings)

    def _request_priority(self) -> None:
        """SCHED_FIFO for this (the physics) thread, as ros2_control's controller manager asks
        for its update thread; refused: one warning naming why."""
        prio = self.settings.thread_priority
        if prio <= 0 or self.real_time_factor <= 0 or self.clock.use_sim_time:
            # on sim time physics is the clock: a thread that runs flat out at SCHED_FIFO (a
            # real-time factor it cannot reach) would only starve this process's other threads
            self._scheduling = "not requested" + (
                " (sim time)" if prio > 0 and self.clock.use_sim_time else
                " (unpaced)" if prio > 0 else "")
            return
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
            self._scheduling = f"SCHED_FIFO {prio}"
            self._fifo = prio
        except (AttributeError, OSError) as exc:
            why = "not Linux" if isinstance(exc, AttributeError) else (
                "EPERM: no permission (root or CAP_SYS_NICE / rtprio in limits.conf)"
                if getattr(exc, "errno", None) == errno.EPERM else str(exc))
            self._scheduling = f"normal scheduling (SCHED_FIFO {prio} refused: {why})"
            self.on_event("warn", f"physics thread: {self._scheduling}")

    def _loop(self) -> None:
        """Step and pace physics until stopped (:meth:`step_cycle`, :meth:`pace`)."""
        self._request_priority()
        self.clock.anchor(float(self.data.time))
        try:
            while not self._stop.is_set():
                if self._rate_request is not None:
                    self._take_rate_request()
                snap = self.step_cycle()
                wait = self.pace(snap.sim_time if snap else float(self.data.time))
                if self._fifo:
                    self._catching_up(wait <= 0)
                if wait > 0:
                    self._stop.wait(wait)
        except BaseException as exc:  # noqa: BLE001 - kept for the owner to report
            self.error = exc
            self.on_event("error", f"physics stopped: {type(exc).__name__}: {exc}")

    def _catching_up(self, behind: bool) -> None:
        """SCHED_FIFO only while physics keeps time: a thread that runs cycle after cycle
        without waiting (catching up) at a real-time priority takes its core from every other
        process (the action servers, the executor, DDS: on a loaded machine, goals then reach
        the controllers late). Behind for :data:`FIFO_BEHIND_CYCLES` cycles: normal scheduling
        until a cycle waits again."""
        if behind:
            self._behind_cycles += 1
            if self._behind_cycles == FIFO_BEHIND_CYCLES:
                self._set_fifo(False)
        elif self._behind_cycles:
            if self._behind_cycles >= FIFO_BEHIND_CYCLES:
                self._set_fifo(True)
            self._behind_cycles = 0

    def _set_fifo(self, on: bool) -> None:
        try:
            if on:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self._fifo))
            else:
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
                self._health.demotions += 1
        except OSError as exc:   # (granted once: only a changed limit refuses it now)
            self._fifo = 0
            self.on_event("warn", f"physics thread: SCHED_FIFO change refused ({exc}): normal "
                          "scheduling from now on")

    def pace(self, sim_time: float) -> float:
        """After a control cycle that ended at physics time ``sim_time``: how long (s, wall) to
        wait before the next. Physics thread only (or a test driving the model synchronously).

        Ahead of real time: wait. Behind: run without waiting (physics catches up; references
        follow physics, so no arm is blamed), except idle with every arm standing, where the
        deficit is dropped at once (nothing a stamp could show changes). Past ``max_lag_s`` with
        a goal active: abort every active goal naming the simulator and the lag; idle past it
        (or past :data:`PACING_SLACK_S` when it is 0): re-anchor the clock. A lag warns only
        with a goal active and above the threshold of ``sim/lag_warning.py``; every lag of
        more than a period is counted."""
        clock, period, max_lag = self.clock, self.control_period, self.settings.max_lag_s
        if self.real_time_factor <= 0:
            self._health.cycle(0.0, sim_time)
            return 0.0
        lag = clock.lag(sim_time)
        self._health.cycle(lag, sim_time)
        if lag < 0:
            return -lag
        if clock.use_sim_time:
            # physics time is everybody's clock: behind the pacing target only means slower
            # than asked (the achieved factor says how much); never catch up
            if lag > PACING_SLACK_S:
                clock.anchor(sim_time)
            return 0.0
        if lag > period:   # (only a lag above one period counts)
            self._late(lag)
            if self._standing_idle():
                self._drop_idle_lag(sim_time, lag)
                return 0.0
        if max_lag > 0 and lag > max_lag:
            self._over_lag(sim_time, lag, max_lag)
        elif max_lag <= 0 and lag > PACING_SLACK_S and \
                all(c.active is None for c in self.controllers.values()):
            self._over_lag(sim_time, lag, PACING_SLACK_S)   # idle: re-anchor only
        return 0.0

    def _standing_idle(self) -> bool:
        """No goal on any controller and every arm joint slower than :data:`REST_SPEED`:
        physics time can be dropped here without a stamp showing it (the state stands)."""
        if any(c.active is not None for c in self.controllers.values()):
            return False
        return float(np.abs(self.data.qvel[self._arm_dofs]).max(initial=0.0)) < REST_SPEED

    def _drop_idle_lag(self, sim_time: float, lag: float) -> None:
        """Idle with the arms standing, a deficit is dropped at once rather than caught up: the
        clock stays on real time, so what the joint-state stamps say of it (a controller clock
        offset, read by ``execution.max_clock_offset_s``) is true, even on a machine too slow
        to keep up. Counted as a re-anchor; said when the deficit passes :data:`PACING_SLACK_S`."""
        self._health.reanchors += 1
        self._health.dropped_s += self.clock.anchor(sim_time)
        if lag > PACING_SLACK_S:
            self.on_event("info", f"idle and {lag * 1e3:.0f} ms behind real time: the "
                          "simulator's clock re-anchored to now (its stamps jump forward)")

    def _late(self, lag: float) -> None:
        """A cycle that ended more than one control period behind: counted, and said when it
        can trip a check (``sim/lag_warning.py``)."""
        active = any(c.active is not None for c in self.controllers.values())
        if active and lag > self._health.worst_active_lag:
            self._health.worst_active_lag = lag
        text = self.lag_warnings.cycle(lag, active, time.monotonic())
        if text is not None:
            self.on_event("warn", text)

    def _over_lag(self, sim_time: float, lag: float, max_lag: float) -> None:
        """Physics is more than ``max_lag`` behind: abort the active goals, wait (bounded) for
        their results to be sent, and re-anchor the clock; idle, re-anchor it."""
        with self.lock:
            active = [c.active for c in self.controllers.values() if c.active is not None]
            text = (f"simulator behind real time by {lag * 1e3:.0f} ms (sim.max_lag_s "
                    f"{max_lag * 1e3:.0f} ms): the simulator, not the arm, could not keep up")
            for controller, qi, vi, _ci, wiring, _kind in self._wiring:
                if controller.active is not None:
                    q = self.data.qpos[qi].copy()
                    if wiring is not None:
                        q = wiring.report(q, self.data.qvel[vi].copy())[0]
                    controller.abort_active(q, text)
        if active:
            self._health.aborts += len(active)
            self.on_event("error", f"aborted {len(active)} goal(s): {text}")
            # the results are said before any later state: the states after this point (the
            # arms held while the plan's time runs on) must not reach a watch before the abort
            until = time.monotonic() + RESULT_FIRST_S
            for ticket in active:
                ticket.result_sent.wait(max(0.0, until - time.monotonic()))
        # no goal runs now: the deficit is dropped, never caught up (a catch-up would play the
        # held arms against the plan's running time in a burst of states); the stamps jump
        self._health.reanchors += 1
        self._health.dropped_s += self.clock.anchor(sim_time)
        if not active:   # no goal runs: nothing to act on (counted as a re-anchor)
            self.on_event("info", f"idle and {lag * 1e3:.0f} ms behind real time: the "
                          "simulator's clock re-anchored to now (its stamps jump forward)")


class _HealthMeter:
    """Per-cycle timekeeping at little cost: lag, stalls, and the achieved real-time factor
    from a sample every ``SAMPLE_EVERY`` cycles over the last second."""

    SAMPLE_EVERY = 25

    def __init__(self, period: float) -> None:
        self.period = period
        self.lag = self.worst_lag = self.worst_stall = self.worst_active_lag = 0.0
        self.aborts = self.reanchors = 0
        self.dropped_s = 0.0
        self.demotions = 0
        self._last: Optional[float] = None
        self._samples: collections.deque = collections.deque(maxlen=64)
        self._n = 0

    def cycle(self, lag: float, sim_time: float) -> None:
        now = time.monotonic()
        if self._last is not None and now - self._last > self.worst_stall:
            self.worst_stall = now - self._last
        self._last = now
        self.lag = lag
        if lag > self.worst_lag:
            self.worst_lag = lag
        self._n += 1
        if self._n % self.SAMPLE_EVERY == 0:
            self._samples.append((now, sim_time))

    def value(self, cycles: int, scheduling: str, lags: LagWarnings) -> SimHealth:
        samples = list(self._samples)
        factor = 0.0
        if len(samples) >= 2:
            end = samples[-1]
            start = next((s for s in samples if end[0] - s[0] <= 1.0), samples[0])
            if end[0] > start[0]:
                factor = (end[1] - start[1]) / (end[0] - start[0])
        return SimHealth(cycles, factor, self.lag, self.worst_lag, self.worst_stall,
                         self.aborts, self.reanchors, scheduling, self.worst_active_lag,
                         lags.late_cycles, lags.warnings, lags.threshold.finite_s,
                         self.dropped_s, self.demotions)


def _physical_arms(scene: Scene, settings: SimSettings) -> dict[str, str]:
    """Arm -> the arm whose joints its controller is wired to (``sim.faults.crossed_arms``
    swaps two; both must have the same controller kind)."""
    out = {n: n for n in scene.arms}
    if settings.crossed_arms:
        a, b = settings.crossed_arms
        if settings.arm(a).controller != settings.arm(b).controller:
            raise ConfigError(f"sim.faults.crossed_arms: {a!r} runs a "
                              f"{settings.arm(a).controller} controller and {b!r} a "
                              f"{settings.arm(b).controller} one: only arms driven alike can be "
                              "crossed")
        out[a], out[b] = b, a
    return out


def _index(ids: np.ndarray):
    """A slice when ``ids`` are consecutive (basic indexing: no index array per access), else
    the index array."""
    ids = np.asarray(ids, dtype=int)
    if ids.size and np.array_equal(ids, np.arange(ids[0], ids[0] + ids.size)):
        return slice(int(ids[0]), int(ids[0]) + ids.size)
    return ids
