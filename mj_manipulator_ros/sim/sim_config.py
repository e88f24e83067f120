"""The ``sim`` section of a configuration file (see docs/simulator.md); the ``scene`` section
is the model layer's (:mod:`mj_manipulator_ros.model.scene_config`).

::

    sim:
      control_rate_hz: 500
      real_time_factor: 1.0
      arms: {left: {controller: position}}
      faults: {left: {abort_after_s: 0.5}}
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.core.schema import from_mapping
from mj_manipulator_ros.core.tolerances import ToleranceDefaults
from mj_manipulator_ros.model.exchange import ExchangeMode
from mj_manipulator_ros.model.scene import GravityCompensation, Scene
from mj_manipulator_ros.model.scene_config import SceneConfig, scene_config

#: the simulated controller kinds (sim/controllers); the first is the default
CONTROLLER_KINDS = ("position", "torque", "mit")
#: what integrates the arm joints: MuJoCo alone, or an actuator twin co-simulated with it
PHYSICS = ("mujoco", "cosim")


class DeadWire(str, enum.Enum):
    """A driver that takes goals and reports them succeeded while its commands reach no motor
    (``sim.faults.<arm>.dead_wire``; sim/miswiring.py)."""

    NONE = "none"     # healthy
    #: the motors keep holding what they held when the arm was enabled; the joint states say
    #: so; the controller reports each goal succeeded at its end (no goal tolerance checked:
    #: joint_trajectory_controller's default), openarm_ros2#63
    STILL = "still"
    #: the motors keep holding, and the joint states report the controller's own commands as
    #: positions (one control cycle late), as fake hardware left on or a driver that echoes its
    #: command does: the states move as commanded, nothing else does (efforts stay the
    #: motors')
    ECHO = "echo"


@dataclass(frozen=True)
class ArmFaults:
    """Injected faults of one simulated arm (for tests and HIL rehearsal)."""

    reject_next_goal: bool = field(default=False, metadata={"doc": "reject the next goal (once)"})
    abort_after_s: Optional[float] = field(default=None, metadata={
        "doc": "abort every goal this long after its start, error_code -4", "min": 0.0})
    stall: bool = field(default=False, metadata={"doc": "accept goals, never finish them (hold)"})
    freeze: bool = field(default=False, metadata={
        "doc": "the running goal's reference stops where the arm is, the goal never finishing "
               "(a controller that stops following mid-motion: the arm falls behind its plan)"})
    accept_delay_s: float = field(default=0.0, metadata={
        "doc": "delay before accepting, s of the controller's clock", "min": 0.0})
    pickup_delay_s: float = field(default=0.0, metadata={
        "doc": "an accepted goal starts executing this long later (a busy controller)",
        "min": 0.0})
    cancel_delay_s: float = field(default=0.0, metadata={
        "doc": "the cancel callback answers this long after a cancel request", "min": 0.0})
    command_latency_s: float = field(default=0.0, metadata={
        "doc": "commands reach the actuators this late (MuJoCo's actuator delay, exact to the "
               "physics step; set when the simulator starts)", "min": 0.0})
    ignore_cancel: bool = field(default=False, metadata={
        "doc": "refuse cancels and keep moving (a controller that does not stop)"})
    clock_offset_s: float = field(default=0.0, metadata={
        "doc": "this arm's controller clock runs this far ahead (negative: behind): its joint "
               "state and feedback stamps, and its reading of goal stamps"})
    exit_after_s: Optional[float] = field(default=None, metadata={
        "doc": "this arm's controller stops responding this long after a goal starts", "min": 0.0})
    # miswiring (sim/miswiring.py): the controller's joint i is wired to another physical
    # joint, reversed, offset or geared wrong, in commands and in states alike
    swap_joints: tuple[str, ...] = field(default=(), metadata={
        "doc": "two joints of the arm swapped (CAN ids crossed): each one's commands drive the "
               "other and its states report the other"})
    sign_flip: tuple[str, ...] = field(default=(), metadata={
        "doc": "joints turning the other way than the model says (a reversed axis): commands "
               "and states negated"})
    zero_offset: Mapping[str, float] = field(default_factory=dict, metadata={
        "doc": "joint -> rad: the joint reports its true position plus this (a zero lost when a "
               "motor was re-flashed); commands are offset alike"})
    scale: Mapping[str, float] = field(default_factory=dict, metadata={
        "doc": "joint -> k: the joint moves k times what it is commanded (a gear ratio set "
               "wrong); its states report the motion divided by k"})
    dead_wire: DeadWire = field(default=DeadWire.NONE, metadata={
        "doc": "none | still | echo: the arm's commands reach no motor (the motors hold the "
               "pose they held when enabled), its goals are accepted and reported succeeded; "
               "still: its joint states are honest; echo: they report the commands as "
               "positions (fake hardware left on, a driver echoing its command)"})
    activation_command: Mapping[str, float] = field(default_factory=dict, metadata={
        "doc": "joint -> rad: when the arm's controller is activated, it holds this for the "
               "joint instead of the measured position (0: a command buffer that starts at "
               "zero, openarm_ros2#66; another value: a stale command); with "
               "sim.arms.<arm>.start_active false, the moment a service activates it"})
    force_limit: Mapping[str, float] = field(default_factory=dict, metadata={
        "doc": "joint -> N m: the joint's actuators together apply at most this (a torque "
               "limit set too low to hold the arm); not under sim.physics cosim"})
    # the arm's real load against the model the checks use (sim/model_mismatch.py): applied to
    # the simulator's own copy of the model when it starts
    link_mass_scale: Mapping[str, float] = field(default_factory=dict, metadata={
        "doc": "joint -> k: the link that joint moves (its child body) weighs k times the "
               "model's, its inertia alike, its centre of mass where the model has it (a model "
               "whose masses are off: openarm_description#49)"})
    payload_kg: float = field(default=0.0, metadata={
        "doc": "a point mass carried by the arm's last link (the body its last joint moves), "
               "kg", "min": 0.0})
    payload_offset_m: tuple[float, ...] = field(default=(0.0, 0.0, 0.0), metadata={
        "doc": "where the payload sits in that body's frame, m (x, y, z)"})
    # the joint-state stream and the controller's clock; times are physics time since the
    # simulator started (s); each can repeat (``*_every_s``: an intermittent fault)
    joint_state_gap_s: float = field(default=0.0, metadata={
        "doc": "this arm's joint states stop for this long (s of simulated time) from "
               "joint_state_gap_at_s, then resume at the current state (a driver that stalls)",
        "min": 0.0})
    joint_state_gap_at_s: float = field(default=0.0, metadata={
        "doc": "when the joint-state gap starts: physics time since the simulator started, s",
        "min": 0.0})
    joint_state_gap_every_s: float = field(default=0.0, metadata={
        "doc": "the gap comes back this often, s (0: once)", "min": 0.0})
    joint_state_drop: int = field(default=0, metadata={
        "doc": "this many consecutive joint-state messages of this arm are lost, from "
               "joint_state_drop_at_s (a bus or network that drops)", "min": 0})
    joint_state_drop_at_s: float = field(default=0.0, metadata={
        "doc": "when the dropped messages start: physics time since the simulator started, s",
        "min": 0.0})
    joint_state_drop_every_s: float = field(default=0.0, metadata={
        "doc": "the drop comes back this often, s (0: once)", "min": 0.0})
    joint_states_copied_from: str = field(default="", metadata={
        "doc": "this arm's joint states carry another arm's readings under this arm's names "
               "(its own bus silent behind a healthy one: a driver that reads the wrong bus, "
               "axol#197); the arm itself runs its goals as commanded"})
    clock_step_s: float = field(default=0.0, metadata={
        "doc": "this arm's controller clock steps by this (s; negative: back) at "
               "clock_step_at_s and stays stepped (a clock corrected by a time service "
               "mid-run): its stamps and its reading of goal stamps"})
    clock_step_at_s: float = field(default=0.0, metadata={
        "doc": "when the controller clock steps: physics time since the simulator started, s",
        "min": 0.0})
    clock_step_every_s: float = field(default=0.0, metadata={
        "doc": "the clock steps again this often, s, the steps adding up (0: once)",
        "min": 0.0})

    @staticmethod
    def _occurrence(sim_time: float, at: float, every: float) -> tuple[int, float]:
        """(how many times a fault starting at ``at`` and repeating ``every`` s has started by
        ``sim_time``, the time since the latest start); (0, nan) before the first."""
        if sim_time < at:
            return 0, float("nan")
        if every <= 0:
            return 1, sim_time - at
        n, phase = divmod(sim_time - at, every)
        return int(n) + 1, phase

    def clock_offset_at(self, sim_time: float) -> float:
        """This arm's controller clock minus the simulator's at physics time ``sim_time`` (s):
        ``clock_offset_s``, plus ``clock_step_s`` per step taken by then."""
        if not self.clock_step_s:
            return self.clock_offset_s
        steps, _ = self._occurrence(sim_time, self.clock_step_at_s, self.clock_step_every_s)
        return self.clock_offset_s + steps * self.clock_step_s

    def joint_state_withheld(self, sim_time: float) -> bool:
        """Is this arm's joint state at ``sim_time`` inside an injected gap?"""
        if self.joint_state_gap_s <= 0:
            return False
        n, phase = self._occurrence(sim_time, self.joint_state_gap_at_s,
                                    self.joint_state_gap_every_s)
        return n > 0 and phase < self.joint_state_gap_s

    def joint_state_drop_occurrence(self, sim_time: float) -> int:
        """Which drop (1, 2, ...) has started by ``sim_time``; 0 before the first or none."""
        if self.joint_state_drop <= 0:
            return 0
        return self._occurrence(sim_time, self.joint_state_drop_at_s,
                                self.joint_state_drop_every_s)[0]


@dataclass(frozen=True)
class ArmSimSettings:
    """How one arm is simulated."""

    controller: str = field(default=CONTROLLER_KINDS[0], metadata={
        "doc": "simulated controller: " + " | ".join(CONTROLLER_KINDS) + " (position: the "
               "model's position servos follow the reference; torque: computed torque on motors "
               "added per joint, feed-forward from the arm's own model; mit: MIT-mode commands "
               "to the actuator twin, with sim.physics cosim)"})
    nulling: str = field(default="disable", metadata={
        "doc": "torque: what becomes of the position servos: disable (moved to a disabled "
               "actuator group; exact) | full (nulled every cycle; exact only under Euler)"})
    bandwidth_hz: Union[float, Mapping[str, float]] = field(default=5.0, metadata={
        "doc": "torque: closed-loop bandwidth, Hz (Kp = omega^2, Kd = 2 omega), one value or "
               "joint -> Hz (joints not named: 5 Hz)"})
    mit_kp: Optional[float] = field(default=None, metadata={
        "doc": "mit: every joint's kp, N m/rad (the OpenArm driver's default is 20); unset: "
               "the robot file's position servo gains", "min": 0.0})
    mit_kd: Optional[float] = field(default=None, metadata={
        "doc": "mit: every joint's kd, N m s/rad (the OpenArm driver's default is 2.75); "
               "unset: the robot file's servo damping", "min": 0.0})
    mit_feed_forward: bool = field(default=True, metadata={
        "doc": "mit: send tau_ff from the arm's own model (gravity, inertia, friction); false: "
               "tau_ff = 0, as the OpenArm driver does by default (no gravity compensation)"})
    start_active: bool = field(default=True, metadata={
        "doc": "false: the arm's controller starts inactive (goals refused, the arm holding its "
               "initial pose, as motors enabled before their controller) until its "
               "<controller node>/activate service (std_srvs/Trigger) is called; "
               "<controller node>/deactivate makes it inactive again (docs/simulator.md)"})
    joint_states_topic: str = field(default="", metadata={
        "doc": "the topic this simulated arm's driver publishes its joint states on (default: "
               "the arm's joint_states_topic, where the executor reads them; set it to put a "
               "relay or a filter of your own in between)"})


@dataclass(frozen=True)
class CosimSettings:
    """The actuator twin and its exchange with MuJoCo (``sim.physics: cosim``; docs/cosim.md).
    Each twin joint's inertia, Coulomb friction and torque limit are the robot file's armature,
    frictionloss and actuator force range (removed from the MuJoCo model)."""

    exchange: ExchangeMode = field(default=ExchangeMode.MASS_MATRIX, metadata={
        "doc": "mass_matrix: the twin integrates the rotors with the links' joint-space inertia "
               "and the exchanged load is the rest (gravity, Coriolis, damping, contacts); "
               "reference: the seed's contract (the load carries the links' inertia through a "
               "10 Hz filtered, one-exchange-old acceleration; loses fidelity for M_ii / J > 1)"})
    exchange_hz: Union[float, str] = field(default="auto", metadata={
        "doc": "exchanges per second (a whole number of 50 us ticks dividing the control "
               "period), or auto: the lowest rate the stability pre-check allows"})
    current_loop_hz: float = field(default=1000.0, metadata={
        "doc": "the motors' current (torque) loop bandwidth, Hz (first order)", "min": 1.0})
    encoder_counts_per_rev: int = field(default=65536, metadata={
        "doc": "encoder counts per output revolution (0: exact positions)", "min": 0})
    viscous_friction: float = field(default=0.0, metadata={
        "doc": "drivetrain viscous friction, N m s/rad, every joint (the file's joint damping "
               "stays in MuJoCo as the links')", "min": 0.0})


@dataclass(frozen=True)
class SimSettings:
    control_rate_hz: float = field(default=500.0, metadata={"min": 1.0})
    feedback_rate_hz: float = field(default=20.0, metadata={"min": 0.1})
    joint_state_rate_hz: float = field(default=100.0, metadata={"min": 0.1})
    clock_rate_hz: float = field(default=250.0, metadata={
        "doc": "with use_sim_time: /clock messages per second of sim time (at most one per "
               "control cycle, before that cycle's joint states). A node on sim time "
               "reads the latest one: its clock is this coarse (4 ms at 250 Hz), and each "
               "message costs each such node a callback (an idle HIL session at 2x, two nodes "
               "on sim time: 0.98 of a core at 500 Hz, 0.50 at 100 Hz)", "min": 1.0})
    real_time_factor: float = field(default=1.0, metadata={
        "doc": "1 = real time, 2 = twice as fast, 0 = as fast as possible", "min": 0.0})
    use_sim_time: bool = field(default=False, metadata={"doc": "publish /clock; stamps on sim time"})
    max_lag_s: float = field(default=0.0, metadata={
        "doc": "on the system clock: while a goal runs and physics falls this far behind real "
               "time, every active goal is aborted naming the simulator and the lag (not an "
               "arm); idle, the clock re-anchors. 0 (default): never aborts, and idle the clock "
               "re-anchors past 0.5 s (references follow physics either way). Idle with every "
               "arm standing, any deficit is dropped at once (the clock kept on real time)",
        "min": 0.0})
    thread_priority: int = field(default=50, metadata={
        "doc": "the physics thread asks for SCHED_FIFO at this priority when paced (as "
               "ros2_control's controller manager does); refused (no permission, not Linux): "
               "one warning. 0: not asked", "min": 0, "max": 99})
    switch_interval_s: float = field(default=0.0005, metadata={
        "doc": "while the physics thread runs, the process's Python thread switch interval "
               "(sys.setswitchinterval) is at most this, s: a thread waiting for the "
               "interpreter gets it within about this long. Python's 5 ms let one busy Python "
               "thread of the same process hold physics to about 190 control cycles a second "
               "(0.38x real time at 500 Hz); 0.5 ms: about 1,580 (docs/simulator.md). 0: left "
               "as it is", "min": 0.0})
    gravity_compensation: GravityCompensation = field(default=GravityCompensation.ACTUATOR, metadata={
        "doc": "actuator: the arms' weight carried through each joint's actuators (actgravcomp, "
               "as a real arm's gravity feed-forward: in the effort, within the force range); "
               "body: MuJoCo body_gravcomp (free, not in the effort; for models without force "
               "ranges); off: the P servos sag"})
    physics: str = field(default=PHYSICS[0], metadata={
        "doc": "mujoco: MuJoCo integrates everything; cosim: an actuator twin integrates the arm "
               "joints at 20 kHz and MuJoCo is their inverse-dynamics load (every arm's "
               "controller must be mit; docs/cosim.md)"})
    cosim: CosimSettings = CosimSettings()
    allow_partial_joints_goal: bool = False
    allow_nonzero_velocity_at_trajectory_end: bool = False
    tolerances: ToleranceDefaults = ToleranceDefaults()
    arms: Mapping[str, ArmSimSettings] = field(default_factory=dict)
    faults: Mapping[str, ArmFaults] = field(default_factory=dict)
    crossed_arms: tuple[str, ...] = field(default=(), metadata={
        "internal": True, "doc": "sim.faults.crossed_arms: [A, B]: each arm's controller drives "
                                 "the other arm and reports its states (a CAN naming mix-up)"})

    def arm(self, name: str) -> ArmSimSettings:
        return self.arms.get(name) or ArmSimSettings()


@dataclass(frozen=True)
class SimConfig:
    executor: ExecutorConfig
    scene: SceneConfig
    sim: SimSettings

    def build_scene(self) -> Scene:
        """The scene compiled for simulation: timestep for the control rate, gravity
        compensation as configured."""
        delays = {arm: f.command_latency_s for arm, f in self.sim.faults.items()}
        torque = {a.name: self.sim.arm(a.name).nulling for a in self.executor.arms
                  if self.sim.arm(a.name).controller == "torque"}
        return Scene.from_config(self.scene, self.executor.arms, 1.0 / self.sim.control_rate_hz,
                                 self.sim.gravity_compensation, delays, torque,
                                 twin=self.sim.physics == "cosim",
                                 exchange_hz=self.sim.cosim.exchange_hz,
                                 exchange_mode=self.sim.cosim.exchange)


def _per_arm(raw, cls, config: ExecutorConfig, path: str) -> dict:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}: expected arm -> settings, got {raw!r}")
    out = {}
    for arm, body in raw.items():
        if arm not in config.arm_names:
            raise ConfigError(f"{path}: unknown arm {arm!r}; arms: {list(config.arm_names)}")
        out[arm] = from_mapping(cls, body, f"{path}.{arm}")
    return out


def _crossed_arms(raw, config: ExecutorConfig) -> tuple[str, ...]:
    path = "sim.faults.crossed_arms"
    if not raw:
        return ()
    if not isinstance(raw, (list, tuple)) or len(raw) != 2 or len(set(raw)) != 2:
        raise ConfigError(f"{path}: expected two different arms [A, B], got {raw!r}")
    for arm in raw:
        if arm not in config.arm_names:
            raise ConfigError(f"{path}: unknown arm {arm!r}; arms: {list(config.arm_names)}")
    a, b = (config.arm(x) for x in raw)
    if len(a.joint_names) != len(b.joint_names):
        raise ConfigError(f"{path}: {a.name!r} has {len(a.joint_names)} joints and {b.name!r} "
                          f"{len(b.joint_names)}: only arms alike can be crossed")
    return tuple(raw)


def _check_wiring(faults: ArmFaults, config: ExecutorConfig, arm: str) -> None:
    """The miswiring faults name joints of the arm (and a swap exactly two)."""
    joints = config.arm(arm).joint_names
    named = {"swap_joints": faults.swap_joints, "sign_flip": faults.sign_flip,
             "zero_offset": tuple(faults.zero_offset), "scale": tuple(faults.scale),
             "force_limit": tuple(faults.force_limit),
             "activation_command": tuple(faults.activation_command),
             "link_mass_scale": tuple(faults.link_mass_scale)}
    for key, names in named.items():
        for j in names:
            if j not in joints:
                raise ConfigError(f"sim.faults.{arm}.{key}: {j!r} is not a joint of arm "
                                  f"{arm!r}; its joints: {list(joints)}")
    if faults.swap_joints and (len(faults.swap_joints) != 2 or
                               faults.swap_joints[0] == faults.swap_joints[1]):
        raise ConfigError(f"sim.faults.{arm}.swap_joints: expected two different joints, got "
                          f"{list(faults.swap_joints)}")
    for j, k in faults.scale.items():
        if not k > 0:
            raise ConfigError(f"sim.faults.{arm}.scale.{j}: expected a factor > 0, got {k}")
    for j, n in faults.force_limit.items():
        if not n >= 0:
            raise ConfigError(f"sim.faults.{arm}.force_limit.{j}: expected N m >= 0, got {n}")
    for j, k in faults.link_mass_scale.items():
        if not k > 0:
            raise ConfigError(f"sim.faults.{arm}.link_mass_scale.{j}: expected a factor > 0, "
                              f"got {k}")
    if len(faults.payload_offset_m) != 3:
        raise ConfigError(f"sim.faults.{arm}.payload_offset_m: expected [x, y, z] in m, got "
                          f"{list(faults.payload_offset_m)}")


def _check_bandwidths(hz_by_joint: Mapping, config: ExecutorConfig, arm: str) -> None:
    joints = config.arm(arm).joint_names
    for joint, hz in hz_by_joint.items():
        path = f"sim.arms.{arm}.bandwidth_hz.{joint}"
        if joint not in joints:
            raise ConfigError(f"{path}: not a joint of arm {arm!r}; its joints: {list(joints)}")
        if not hz > 0:
            raise ConfigError(f"{path}: must be > 0 Hz, got {hz}")


def _check_physics(settings: SimSettings, config: ExecutorConfig) -> None:
    if settings.physics not in PHYSICS:
        raise ConfigError(f"sim.physics: expected one of {list(PHYSICS)}, got {settings.physics!r}")
    cosim = settings.physics == "cosim"
    for arm in config.arm_names:
        kind = settings.arm(arm).controller
        if cosim and kind != "mit":
            raise ConfigError(f"sim.arms.{arm}.controller: {kind!r} under sim.physics cosim; the "
                              "actuator twin takes MIT-mode commands: set controller: mit")
        if not cosim and kind == "mit":
            raise ConfigError(f"sim.arms.{arm}.controller: 'mit' drives an actuator twin; set "
                              "sim.physics: cosim")
    rate = settings.cosim.exchange_hz
    if isinstance(rate, str) and rate != "auto":
        raise ConfigError(f"sim.cosim.exchange_hz: expected a rate in Hz or 'auto', got {rate!r}")
    if not isinstance(rate, str) and not rate > 0:
        raise ConfigError(f"sim.cosim.exchange_hz: must be > 0 Hz, got {rate}")


def _check_copied_from(source: str, config: ExecutorConfig, arm: str) -> None:
    """``joint_states_copied_from``: another arm of the configuration, with as many joints (and
    gripper joints)."""
    if not source:
        return
    path = f"sim.faults.{arm}.joint_states_copied_from"
    if source == arm or source not in config.arm_names:
        others = [a for a in config.arm_names if a != arm]
        raise ConfigError(f"{path}: expected another arm, one of {others}, got {source!r}")
    a, b = config.arm(arm), config.arm(source)
    if (len(a.joint_names), len(a.gripper_wire_names)) != \
            (len(b.joint_names), len(b.gripper_wire_names)):
        raise ConfigError(f"{path}: {arm!r} has {len(a.joint_names)} joints and "
                          f"{len(a.gripper_wire_names)} gripper joints, {source!r} "
                          f"{len(b.joint_names)} and {len(b.gripper_wire_names)}: only arms alike "
                          "can carry each other's readings")


def sim_config(config: ExecutorConfig) -> SimConfig:
    """Read the scene and sim sections of an executor configuration (validated strictly)."""
    sim_raw = dict(config.extra.get("sim") or {})
    faults_raw = dict(sim_raw.pop("faults", None) or {})
    crossed = _crossed_arms(faults_raw.pop("crossed_arms", None) or (), config)
    faults = _per_arm(faults_raw, ArmFaults, config, "sim.faults")
    for arm, f in faults.items():
        _check_wiring(f, config, arm)
        _check_copied_from(f.joint_states_copied_from, config, arm)
    arms = _per_arm(sim_raw.pop("arms", None) or {}, ArmSimSettings, config, "sim.arms")
    for arm, a in arms.items():
        if isinstance(a.bandwidth_hz, Mapping):
            _check_bandwidths(a.bandwidth_hz, config, arm)
        if a.nulling not in ("disable", "full"):
            raise ConfigError(f"sim.arms.{arm}.nulling: expected 'disable' or 'full', got "
                              f"{a.nulling!r}")
        if isinstance(a.bandwidth_hz, float) and not a.bandwidth_hz > 0:
            raise ConfigError(f"sim.arms.{arm}.bandwidth_hz: must be > 0 Hz, got {a.bandwidth_hz}")
        changed = [k for k in ("mit_kp", "mit_kd") if getattr(a, k) is not None] + \
            (["mit_feed_forward"] if not a.mit_feed_forward else [])
        if changed and a.controller != "mit":
            raise ConfigError(f"sim.arms.{arm}: {changed} apply to controller 'mit' only; the "
                              f"arm's controller is {a.controller!r}")
        if a.controller not in CONTROLLER_KINDS:
            raise ConfigError(f"sim.arms.{arm}.controller: expected one of {list(CONTROLLER_KINDS)}, "
                              f"got {a.controller!r}")
    settings = from_mapping(SimSettings, sim_raw, "sim")
    settings = SimSettings(**{**settings.__dict__, "arms": arms, "faults": faults,
                              "crossed_arms": crossed})
    limited = [a for a, f in faults.items() if f.force_limit]
    if limited and settings.physics == "cosim":
        raise ConfigError(f"sim.faults.{limited[0]}.force_limit: not under sim.physics cosim (the "
                          "actuator twin's torque limits are the robot file's); use "
                          "sim.physics mujoco")
    _check_physics(settings, config)
    return SimConfig(config, scene_config(config), settings)
