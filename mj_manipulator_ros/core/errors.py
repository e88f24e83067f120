"""The package's exceptions: one base class, specific subclasses, messages that say what was
expected, what came, and what is available."""

from __future__ import annotations


class MjManipulatorError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(MjManipulatorError, ValueError):
    """A configuration file or value is wrong. The message names the key path."""


class PlanError(MjManipulatorError, ValueError):
    """A plan fails validation. Nothing was sent to any arm.

    Attributes:
        arm: arm name, or None when the error is not about one arm.
        index: waypoint index, or None.
        joint: joint name, or None.
        value: the offending value, or None.
    """

    def __init__(self, message: str, *, arm: str | None = None, index: int | None = None,
                 joint: str | None = None, value: object = None) -> None:
        where = []
        if arm is not None:
            where.append(f"arm {arm!r}")
        if index is not None:
            where.append(f"waypoint {index}")
        if joint is not None:
            where.append(f"joint {joint!r}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)
        self.arm, self.index, self.joint, self.value = arm, index, joint, value


class UnknownArmError(PlanError):
    """The plan names an arm the configuration does not have."""


class JointMismatchError(PlanError):
    """Unknown, duplicate or missing joints against the configuration."""


class EmptyTrajectoryError(PlanError):
    """An arm's trajectory has fewer than two points (none, or a single one that moves
    nothing)."""


class ShapeMismatchError(PlanError):
    """An array's size does not match the number of joints or points."""


class NonFiniteValueError(PlanError):
    """A time, position, velocity or acceleration is NaN or infinite."""


class TimeNotIncreasingError(PlanError):
    """time_from_start is negative or not strictly increasing."""


class JointLimitError(PlanError):
    """A position lies outside the joint's limits."""


class VelocityLimitError(PlanError):
    """A velocity (given or by finite difference) exceeds the joint's velocity limit."""


class SplineLimitError(PlanError):
    """Between two waypoints, the spline the controller runs exceeds a velocity or acceleration
    limit. ``speed_factor`` is the largest time-scaling factor at which this segment passes."""

    def __init__(self, message: str, *, speed_factor: float, **where) -> None:
        super().__init__(message, **where)
        self.speed_factor = speed_factor


class StartStateError(PlanError):
    """An arm is not where the plan starts (or its state is unknown or stale): the controller
    would jump there within the start lead, a motion nobody checked. ``reason`` is
    ``start_state``."""

    reason = "start_state"


class FinalVelocityError(PlanError):
    """The last point's velocity is not zero (joint_trajectory_controller rejects it)."""


class UnresolvedLimitsError(PlanError):
    """The arm's limits are ``joint_limits: from_model`` and were never read from the model
    (``mj_manipulator_ros.model.limits.with_model_limits``): nothing can be checked."""


class PlanCostError(PlanError):
    """A plan valid in every other respect costs more than a declared bound
    (``execution.max_plan_duration_s``, ``max_plan_points``, ``min_speed_factor``): refused
    before anything is allocated for it."""


class TimeGridMismatchError(PlanError):
    """Arms do not share one time grid; see ``resample_to_common_grid``."""


class UnsupportedMujocoError(MjManipulatorError):
    """The installed MuJoCo does not behave as the replay checker's guarantee assumes."""


class ExecutionRefusedError(MjManipulatorError):
    """The executor refused to start (for example, the pre-flight collision check failed)."""


class ClockOffsetError(ExecutionRefusedError):
    """An arm controller's clock is too far off this machine's: the shared start stamp would
    start it that much off. ``reason`` is ``clock_offset``; ``offsets`` maps arm -> s."""

    reason = "clock_offset"

    def __init__(self, message: str, offsets: dict) -> None:
        super().__init__(message)
        self.offsets = offsets


class RampLimitError(PlanError):
    """No synchronized speed change (controlled stop, pause, resume, speed change) from the
    given plan time stays within a joint's velocity or acceleration limit: the plan's own speed
    or acceleration there is already beyond it. ``value`` is the plan time, s."""


class SimulationDivergedError(MjManipulatorError):
    """The simulated physics left the finite (a state NaN or infinite, or MuJoCo reset it after
    a bad acceleration): every state after it would be false, so the simulator stops."""


class JointStateMessageError(MjManipulatorError, ValueError):
    """A /joint_states message does not carry one position per joint name (and one velocity
    per name, or none): it cannot be read by name, and the HIL buffer does not keep it."""


class JointStateHistoryError(MjManipulatorError, LookupError):
    """Joint states were asked for over a window that reaches back past the rows the HIL
    buffer dropped (kept ``joint_states_keep_s`` after their arrival): the window would be
    missing its beginning."""


class IllegalTransitionError(MjManipulatorError, RuntimeError):
    """A state machine was asked for a transition its table does not have (a bug in the
    caller, never ignored). The message names the machine, both states, the cause given and
    the transitions the current state has."""
