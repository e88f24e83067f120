"""Executor configuration: the arms, their controllers' actions, joint limits, execution settings.

File form (YAML)::

    arms:
      - name: left
        joint_names: [left_joint1, ...]
        action: /left_arm_controller/follow_joint_trajectory
        joint_limits: {left_joint1: {lower: -3.1, upper: 3.1, velocity: 2.0}, ...}
    execution: {start_lead_s: 0.25, server_wait_s: 5.0, ...}

Every key is checked; unknown keys are errors. See docs/files.md for every setting.
``joint_limits: from_model`` is recorded here and resolved by the model layer
(:func:`mj_manipulator_ros.model.limits.with_model_limits`), which every program entry point
applies; a plan is never validated against limits that were not resolved.
Other sections (``sim``, ``scene``, ...) belong to other tools and are passed through untouched
in :attr:`ExecutorConfig.extra` only when listed in ``OTHER_SECTIONS``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

from mj_manipulator_ros.core import yaml_load
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.core.schema import check_acyclic, convert, from_mapping

#: Top-level sections that other tools of this package read from the same file.
OTHER_SECTIONS = ("sim", "scene", "hil")


@dataclass(frozen=True)
class JointLimit:
    """Limits of one joint. A missing bound is not checked."""

    lower: Optional[float] = field(default=None, metadata={"doc": "lowest position, rad or m"})
    upper: Optional[float] = field(default=None, metadata={"doc": "highest position, rad or m"})
    velocity: Optional[float] = field(default=None, metadata={"doc": "speed limit, per s", "min": 0.0})
    acceleration: Optional[float] = field(default=None, metadata={
        "doc": "acceleration limit, per s^2 (checked on the spline the controller runs)",
        "min": 0.0})


@dataclass(frozen=True)
class ArmConfig:
    name: str = field(metadata={"doc": "arm name, as used in plans"})
    joint_names: tuple[str, ...] = field(metadata={"doc": "joints, in controller order"})
    action: str = field(default="", metadata={
        "doc": "FollowJointTrajectory action; default /<name>_arm_controller/follow_joint_trajectory"})
    activate_service: str = field(default="", metadata={
        "doc": "std_srvs/Trigger service that activates this arm's controller (the simulator's "
               "/<sim node>_<arm>_controller/activate; a driver may offer one): the bring-up's "
               "stage 1 then activates the arm itself and watches that it holds where it rests "
               "(an activation jump, openarm_ros2#66); empty: the controller is active before "
               "the bring-up starts"})
    deactivate_service: str = field(default="", metadata={
        "doc": "std_srvs/Trigger service that deactivates this arm's controller: called by the "
               "bring-up the moment the arm jumps at activation"})
    joint_limits: Mapping[str, JointLimit] = field(default_factory=dict)
    max_velocity: Optional[float] = field(default=None, metadata={
        "doc": "with joint_limits: from_model, the velocity limit of every joint", "min": 0.0})
    joint_states_topic: str = field(default="/joint_states", metadata={
        "doc": "sensor_msgs/JointState topic carrying this arm's joints (any subset per "
               "message; merged by name): the start-state and clock-offset checks read it"})
    start_tolerance: Mapping[str, float] = field(default_factory=dict, metadata={
        "internal": True, "doc": "per joint: start tolerance, rad or m (overrides "
                                 "execution.start_tolerance_rad)"})
    path_tolerance: Mapping[str, float] = field(default_factory=dict, metadata={
        "internal": True, "doc": "per joint: tracking tolerance while executing, rad or m "
                                 "(overrides execution.path_tolerance_rad)"})
    limits_from_model: bool = field(default=False, metadata={
        "internal": True, "doc": "joint_limits: from_model, not yet read from the model "
                                 "(mj_manipulator_ros.model.limits.with_model_limits does)"})
    driver_joint_names: tuple[str, ...] = field(default=(), metadata={
        "doc": "the names this arm's controller and joint states use, one per joint in the "
               "order of joint_names (default: joint_names): goals and joint states carry these, "
               "plans and every check the model's; two arms on separate joint_states_topics may "
               "share them"})

    gripper_joints: tuple[str, ...] = field(default=(), metadata={
        "doc": "joints the arm carries that plans do not command (a gripper's fingers; model "
               "names): read from the arm's joint states before every plan, and checked where "
               "they are (the allowed-collision matrix proves its pairs over their whole range)"})
    gripper_driver_joint_names: tuple[str, ...] = field(default=(), metadata={
        "doc": "the names gripper_joints have in the arm's joint states, one per joint in "
               "their order (default: gripper_joints)"})
    max_stop_time_s: Optional[float] = field(default=None, metadata={
        "doc": "this arm's own execution.max_stop_time_s (s; unset: the execution's)",
        "min": 0.0})
    max_stop_distance_m: Optional[float] = field(default=None, metadata={
        "doc": "this arm's own execution.max_stop_distance_m (m; unset: the execution's)",
        "min": 0.0})

    @property
    def gripper_wire_names(self) -> tuple[str, ...]:
        """The gripper joints' names in the arm's joint states, in the order of gripper_joints."""
        return self.gripper_driver_joint_names or self.gripper_joints

    @property
    def action_name(self) -> str:
        return self.action or f"/{self.name}_arm_controller/follow_joint_trajectory"

    @property
    def wire_names(self) -> tuple[str, ...]:
        """The joint names on the wire (goals, joint states), in the order of joint_names."""
        return self.driver_joint_names or self.joint_names

    def to_wire(self) -> dict[str, str]:
        """Model name -> the name the arm's controller uses."""
        return dict(zip(self.joint_names, self.wire_names))


@dataclass(frozen=True)
class ExecutionSettings:
    """How the executor runs a plan. Times in seconds. The ``doc`` of each field is the text of
    docs/files.md, of the command-line help and of the node parameter and launch argument
    descriptions (:mod:`mj_manipulator_ros.core.overrides`)."""

    start_lead_s: float = field(default=0.25, metadata={
        "doc": "start stamp = now + lead, on the controllers' clock; the lead is the measured "
               "need (core/start_lead.py: 3 x the slowest arm's probe round trip plus its goals' "
               "cost beyond one, never less than its recent goals took), at most this; this when "
               "nothing is measured yet (an arm's "
               "first goal in the process) or no probe answered", "min": 0.0,
        "override": "--lead"})
    start_lead_floor_s: float = field(default=0.06, metadata={
        "doc": "the measured start lead is at least this (start_lead_s wins when smaller; set "
               "it to start_lead_s for a fixed lead)", "min": 0.0})
    server_wait_s: float = field(default=5.0, metadata={
        "doc": "wait for every arm's action server (all arms in parallel)", "min": 0.0})
    discovery_settle_s: float = field(default=0.5, metadata={
        "doc": "after an arm's action server is first discovered, wait until it answers a "
               "probe (a CancelGoal for an unknown goal: its endpoints matched both ways), at "
               "most this long, before the first goal (DDS matches the endpoints after the "
               "server appears; without a wait the first goal to a freshly started controller "
               "was accepted ~400 ms late)",
        "min": 0.0})
    accept_wait_s: float = field(default=2.0, metadata={
        "doc": "wait for each goal to be accepted or rejected", "min": 0.0})
    timeout_scaling: float = field(default=1.5, metadata={
        "doc": "execution timeout = longest arm duration x this + `timeout_margin_s`, counted "
               "from the stamp", "min": 1.0})
    timeout_margin_s: float = field(default=2.0, metadata={
        "doc": "added to the scaled duration for the execution timeout", "min": 0.0})
    feedback_timeout_s: float = field(default=0.5, metadata={
        "doc": "liveness watch, armed by a goal's first feedback: feedback silent for "
               "max(this, 5 x its observed period) sends a probe (a CancelGoal for an unknown "
               "goal id); no answer within this long fails the execution (`feedback_timeout`). "
               "A server that never sends feedback is never failed for silence; 0 disables",
        "min": 0.0})
    cancel_wait_s: float = field(default=2.0, metadata={
        "doc": "wait for each cancel response, then again for each final result", "min": 0.0})
    allow_late_acceptance: bool = field(default=False, metadata={
        "doc": "a goal accepted after the start stamp has passed is a failure unless true"})
    use_sim_time: bool = field(default=False, metadata={
        "doc": "stamps and report times on `/clock` instead of the system clock",
        "override": "--use-sim-time"})
    start_tolerance_rad: float = field(default=0.01, metadata={
        "doc": "before stamping, every arm's measured joint positions must be this close to the "
               "plan's first waypoint (per joint: `arms[].start_tolerance`); 0 disables",
        "min": 0.0})
    joint_state_max_age_s: float = field(default=0.5, metadata={
        "doc": "a joint state older than this (receipt time) does not count as measured",
        "min": 0.0})
    max_clock_offset_s: float = field(default=0.02, metadata={
        "doc": "refuse when an arm controller's clock (its joint-state stamps against receipt "
               "time, minimum over 1 s) is off by more than this: the shared stamp would start "
               "it that much off; 0 disables", "min": 0.0})
    path_tolerance_rad: float = field(default=0.1, metadata={
        "doc": "while executing, a joint further than this from the plan at the current plan "
               "time (from its joint states) fails the execution (`tracking_error`; per joint: "
               "`arms[].path_tolerance`); 0 disables", "min": 0.0})
    max_progress_skew_s: float = field(default=0.1, metadata={
        "doc": "while executing, two arms whose progress (the plan time that explains each "
               "arm's measured pose) differs by more than this fail the execution "
               "(`progress_skew`); 0 disables", "min": 0.0})
    joint_state_timeout_s: float = field(default=0.5, metadata={
        "doc": "while executing, a joint of a running arm not reported for this long (receipt "
               "time) fails the execution (`joint_states_stale`, naming arm and joints); above "
               "the 250-400 ms stalls measured for an in-process simulator; 0 disables",
        "min": 0.0})
    velocity_limit_margin: float = field(default=0.1, metadata={
        "doc": "while executing, a joint measured faster than its velocity limit x (1 + this) "
               "fails the execution (`velocity_limit`)", "min": 0.0})
    max_plan_duration_s: float = field(default=600.0, metadata={
        "doc": "refuse a plan (after any speed factor) lasting longer than this: what a run "
               "costs (the watch's and the replay's samples) grows with it", "min": 0.0})
    max_plan_points: int = field(default=100_000, metadata={
        "doc": "refuse a plan with more waypoints per arm than this (and a replay checking "
               "more states)", "min": 1})
    min_speed_factor: float = field(default=0.01, metadata={
        "doc": "the lowest speed factor `--speed` and `~/speed_scaling` accept (a factor of "
               "1e-9 re-times a plan to centuries)", "min": 1e-6, "max": 1.0})
    approach_speed_fraction: float = field(default=0.25, metadata={
        "doc": "`execute --approach`: the move to the plan's start runs at this fraction of "
               "the velocity limits", "min": 0.01, "max": 1.0})
    approach_settle_s: float = field(default=1.0, metadata={
        "doc": "`execute --approach`: the move's goals ask each joint to end within half its "
               "start tolerance this long after the move's end (the goal's "
               "goal_time_tolerance); a joint not there fails the approach by name and the "
               "plan is not run (a controller's default goal tolerance, often wider than the "
               "start tolerance, let an arm still settling pass and the plan be refused)",
        "min": 0.01})
    stop_skew_s: float = field(default=0.25, metadata={
        "doc": "the pre-flight check certifies every pair of arms at plan times up to this far "
               "apart (the band replay) at least: the widest stop-time difference between arms "
               "when every arm is canceled (a peer stops where it is, one stop latency after a "
               "failure); a wider band is computed per plan from its stopping distances "
               "(`check/failure_band.py`)", "min": 0.0})
    cancel_peers_on_failure: bool = field(default=False, metadata={
        "doc": "an arm whose goal fails (aborted, an error code) has its peers canceled "
               "(each holds where the cancel finds it) instead of stopped along the plan (a "
               "controlled stop, certified by the pre-flight check's computed stop band); the "
               "HIL bring-up sets it: its stage 6 measures the cancel"})
    hold_overshoot_s: float = field(default=0.05, metadata={
        "doc": "the pre-flight check takes an arm canceled while moving to come to rest within "
               "this much plan time past where its cancel found it (measured per simulated "
               "controller kind by `check-plan --stops --hold`; on the robot by HIL stage 3)",
        "min": 0.0})
    stop_settle_s: float = field(default=0.0, metadata={
        "doc": "the stop limits' allowance for the arm's own response to a controlled stop: "
               "after its reference stands, the arm comes to rest within this (its servos "
               "catching up; measured per simulated controller kind by "
               "`bench/measured_stops.py`, on the robot by HIL stage 3)", "min": 0.0})
    hold_settle_s: float = field(default=0.05, metadata={
        "doc": "the stop limits' allowance for a cancel: the arm comes to rest within this "
               "after its request (the hold's stop time; measured as stop_settle_s is)",
        "min": 0.0})
    tracking_lag_s: float = field(default=0.0, metadata={
        "doc": "the stop limits' allowance for the arm's lag behind its reference: a stop's "
               "hand travel is counted from this much plan time (at full speed) before the "
               "request (measured as stop_settle_s is)", "min": 0.0})
    stop_overtravel_m: float = field(default=0.0, metadata={
        "doc": "the stop limits' allowance for the hand's travel past its stop and back (a "
               "servo overshooting where its reference stands): added to every stop's hand "
               "travel, m (measured as stop_settle_s is)", "min": 0.0})
    max_stop_time_s: Optional[float] = field(default=None, metadata={
        "doc": "the longest a stop may take, from its request to every joint of the arm at rest "
               "(the controlled stop, and a cancel's hold with its run-on): the pre-flight gate "
               "slows the plan where a stop from some plan time would take longer, or refuses "
               "it when no speed fits (`check/stop_fit.py`); unset: no limit; "
               "`arms[].max_stop_time_s` overrides it per arm", "min": 0.0,
        "override": "--max-stop-time"})
    max_stop_distance_m: Optional[float] = field(default=None, metadata={
        "doc": "the farthest the arm's hand (the body of its last joint) may travel from a "
               "stop's request to rest, m (the controlled stop, and a cancel's hold with its "
               "run-on): enforced as max_stop_time_s is; unset: no limit; "
               "`arms[].max_stop_distance_m` overrides it per arm", "min": 0.0,
        "override": "--max-stop-distance"})
    stop_acceleration: float = field(default=4.0, metadata={
        "doc": "a controlled stop, pause, resume or speed change ramps the plan's speed along "
               "its path within every joint's velocity and acceleration limits; a joint without "
               "an `acceleration` limit is held to this (per s^2)", "min": 0.001})
    max_pause_s: float = field(default=3600.0, metadata={
        "doc": "a paused execution not resumed within this ends as stopped (every arm at rest "
               "on the plan), so no execution waits forever", "min": 0.0})
    preflight_check: bool = field(default=True, metadata={
        "doc": "refuse a plan that collides in synchronized replay and in the stop band, the "
               "approach move included (needs a `scene` section); on by default: turning it "
               "off is said in every report", "override": "--preflight-check"})
    record_dir: str = field(default="", metadata={
        "doc": "the execution node records every goal it runs as a bag (rosbag2, MCAP) in a new "
               "folder under this directory; empty: no recording",
        "override": "--record-dir"})
    black_box_s: float = field(default=10.0, metadata={
        "doc": "the black box: the executor always keeps the last this many seconds of joint "
               "states, action feedback, /diagnostics, goals and its events in "
               "memory; an execution that fails, stops or is canceled after a goal was sent "
               "writes them as one rosbag2 MCAP file (this window before the failure, and every "
               "arm until at rest) under black_box_dir, and its report names the file; 0: off",
        "min": 0.0, "override": "--black-box"})
    black_box_dir: str = field(default="", metadata={
        "doc": "where the black box writes its files (created); empty: "
               "$ROS_HOME/mj_manipulator_ros/black_box ($ROS_HOME: ~/.ros when unset)"})
    black_box_keep: int = field(default=20, metadata={
        "doc": "the black box keeps the newest this many of its files in black_box_dir, "
               "deleting older ones it wrote", "min": 1})
    black_box_max_mb: float = field(default=64.0, metadata={
        "doc": "the black box's memory at most, MB: the oldest messages go first when the "
               "window holds more (the file says how many were dropped)", "min": 1.0})
    black_box_after_s: float = field(default=3.0, metadata={
        "doc": "after a failure, the black box records until every arm is at rest, for at most "
               "this long after the execution ended (its stops confirmed)", "min": 0.0})


@dataclass(frozen=True)
class ExecutorConfig:
    arms: tuple[ArmConfig, ...]
    execution: ExecutionSettings = ExecutionSettings()
    extra: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""

    def arm(self, name: str) -> ArmConfig:
        for a in self.arms:
            if a.name == name:
                return a
        raise ConfigError(f"no arm {name!r} in the configuration; it has {self.arm_names}")

    def stop_limits(self, name: str) -> tuple[Optional[float], Optional[float]]:
        """Arm ``name``'s (max stop time s, max hand travel m): its own, else the execution's;
        None: no limit."""
        arm, s = self.arm(name), self.execution
        return (s.max_stop_time_s if arm.max_stop_time_s is None else arm.max_stop_time_s,
                s.max_stop_distance_m if arm.max_stop_distance_m is None
                else arm.max_stop_distance_m)

    @property
    def arm_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arms)

    def names_on_topics(self) -> dict[str, dict[str, str]]:
        """Per joint-state topic: the name a joint has there -> its model name (every arm
        whose driver's names differ from the model's needs this to read its joint states)."""
        out: dict[str, dict[str, str]] = {}
        for a in self.arms:
            names = out.setdefault(a.joint_states_topic, {})
            names.update(zip(a.wire_names, a.joint_names))
            names.update(zip(a.gripper_wire_names, a.gripper_joints))
        return out

    @property
    def gripper_joints(self) -> tuple[str, ...]:
        """Every arm's gripper joints (model names), arm by arm."""
        return tuple(j for a in self.arms for j in a.gripper_joints)

    def with_execution(self, **changes: Any) -> "ExecutorConfig":
        """A copy with some execution settings replaced (validated like the file)."""
        merged = {**self.execution.__dict__, **changes}
        settings = from_mapping(ExecutionSettings, merged, "execution")
        return ExecutorConfig(self.arms, settings, self.extra, self.source)

    def with_pace(self, factor: float) -> "ExecutorConfig":
        """A copy for controllers whose clock runs ``factor`` s per wall second (a simulator
        faster than real time): the start lead and its floor are waited on that clock but cover
        wall-clock work (sending the goals, their acceptance), so both scale with the pace (at
        least 1: a slower clock keeps them)."""
        f = max(float(factor), 1.0)
        s = self.execution
        return self.with_execution(start_lead_s=s.start_lead_s * f,
                                   start_lead_floor_s=s.start_lead_floor_s * f)


def _arm(data: Any, path: str) -> ArmConfig:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping with name, joint_names, action, "
                          f"joint_limits; got {data!r}")
    limits_raw = data.get("joint_limits") or {}
    per_joint_raw = {k: data.get(k) or {} for k in ("start_tolerance", "path_tolerance")}
    body = {k: v for k, v in data.items()
            if k not in ("joint_limits", "start_tolerance", "path_tolerance")}
    from_model = limits_raw == "from_model"  # resolved by model.limits.with_model_limits
    if from_model:
        limits_raw = {}
    arm = from_mapping(ArmConfig, body, path)
    if len(set(arm.joint_names)) != len(arm.joint_names):
        dup = sorted({j for j in arm.joint_names if arm.joint_names.count(j) > 1})
        raise ConfigError(f"{path}.joint_names: duplicate joint(s) {dup}")
    if not arm.joint_names:
        raise ConfigError(f"{path}.joint_names: expected at least one joint")
    if not isinstance(limits_raw, Mapping):
        raise ConfigError(f"{path}.joint_limits: expected a mapping joint -> limits, got {limits_raw!r}")
    limits = {}
    for joint, lim in limits_raw.items():
        if joint not in arm.joint_names:
            raise ConfigError(f"{path}.joint_limits: unknown joint {joint!r}; "
                              f"the arm's joints are {list(arm.joint_names)}")
        jl = convert(lim, JointLimit, f"{path}.joint_limits.{joint}")
        if jl.lower is not None and jl.upper is not None and not jl.lower <= jl.upper:
            raise ConfigError(f"{path}.joint_limits.{joint}: lower {jl.lower} > upper {jl.upper}")
        limits[joint] = jl
    per_joint = {key: _per_joint(raw, arm, f"{path}.{key}") for key, raw in per_joint_raw.items()}
    if arm.driver_joint_names:
        drivers = arm.driver_joint_names
        if len(drivers) != len(arm.joint_names):
            raise ConfigError(f"{path}.driver_joint_names: expected one name per joint of "
                              f"joint_names ({len(arm.joint_names)}: {list(arm.joint_names)}), "
                              f"got {len(drivers)}: {list(drivers)}")
        _check_names(drivers, f"{path}.driver_joint_names")
    _check_names(arm.gripper_joints, f"{path}.gripper_joints")
    both = sorted(set(arm.gripper_joints) & set(arm.joint_names))
    if both:
        raise ConfigError(f"{path}.gripper_joints: {both} also in joint_names; a joint is "
                          "either commanded by the plans (joint_names) or carried (gripper_joints)")
    if arm.gripper_driver_joint_names:
        _check_names(arm.gripper_driver_joint_names, f"{path}.gripper_driver_joint_names")
        if len(arm.gripper_driver_joint_names) != len(arm.gripper_joints):
            raise ConfigError(
                f"{path}.gripper_driver_joint_names: expected one name per joint of "
                f"gripper_joints ({len(arm.gripper_joints)}: {list(arm.gripper_joints)}), got "
                f"{len(arm.gripper_driver_joint_names)}: {list(arm.gripper_driver_joint_names)}")
    # every other field as read (each declared once, on ArmConfig)
    return dataclasses.replace(arm, joint_limits=limits,
                               start_tolerance=per_joint["start_tolerance"],
                               path_tolerance=per_joint["path_tolerance"],
                               limits_from_model=from_model)


def _check_names(names: tuple[str, ...], path: str) -> None:
    """No duplicate and no empty name."""
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: duplicate name(s) {sorted({j for j in names if names.count(j) > 1})}")
    if any(not j for j in names):
        raise ConfigError(f"{path}: an empty name in {list(names)}")


def _per_joint(raw: Any, arm: ArmConfig, path: str) -> dict[str, float]:
    """A mapping joint -> non-negative value (rad or m) for joints of ``arm``."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}: expected a mapping joint -> rad, got {raw!r}")
    out = {}
    for joint, value in raw.items():
        if joint not in arm.joint_names:
            raise ConfigError(f"{path}: unknown joint {joint!r}; the arm's joints are "
                              f"{list(arm.joint_names)}")
        out[joint] = convert(value, float, f"{path}.{joint}")
        if out[joint] < 0:
            raise ConfigError(f"{path}.{joint}: must be >= 0, got {out[joint]}")
    return out


def config_from_mapping(data: Any, source: str = "") -> ExecutorConfig:
    """Validate a parsed configuration file."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source or 'config'}: expected a mapping with 'arms', got {data!r}")
    allowed = {"arms", "execution", *OTHER_SECTIONS}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {unknown}; allowed: {sorted(allowed)}")
    arms_raw = data.get("arms")
    if not isinstance(arms_raw, list) or not arms_raw:
        raise ConfigError(f"arms: expected a non-empty list of arms, got {arms_raw!r}")
    arms = tuple(_arm(a, f"arms[{i}]") for i, a in enumerate(arms_raw))
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        raise ConfigError(f"arms: duplicate arm names in {names}")
    owner: dict[str, str] = {}
    for a in arms:
        for j in (*a.joint_names, *a.gripper_joints):
            if j in owner:
                raise ConfigError(f"arms: joint {j!r} belongs to both {owner[j]!r} and {a.name!r}")
            owner[j] = a.name
    on_topic: dict[tuple[str, str], str] = {}
    for a in arms:   # a joint state names its joint by the driver's name: one arm per name
        for j in (*a.wire_names, *a.gripper_wire_names):
            key = (a.joint_states_topic, j)
            if key in on_topic:
                raise ConfigError(
                    f"arms: {on_topic[key]!r} and {a.name!r} both publish a joint called {j!r} "
                    f"on {a.joint_states_topic}: their joint states could not be told apart; "
                    "give each arm its own joint_states_topic (as a driver per arm does) or "
                    "distinct driver_joint_names")
            on_topic[key] = a.name
    execution = from_mapping(ExecutionSettings, data.get("execution"), "execution")
    extra = {k: data[k] for k in OTHER_SECTIONS if k in data}
    config = ExecutorConfig(arms, execution, extra, source)
    return config


def load_config(path: str | Path) -> ExecutorConfig:
    """Read and validate a YAML configuration file, in plain form or in ROS 2 parameter-file
    form (see :mod:`mj_manipulator_ros.core.param_file`)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = yaml_load.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    try:
        check_acyclic(data, "config")
        from mj_manipulator_ros.core.param_file import from_parameter_file, is_parameter_file
        if is_parameter_file(data):
            data = from_parameter_file(data)
        return config_from_mapping(data, str(path))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def limit_or_inf(limit: JointLimit | None, which: str) -> float:
    """A bound as a float, +-inf when not set."""
    value = None if limit is None else getattr(limit, which)
    if value is None:
        return -math.inf if which == "lower" else math.inf
    return value
