"""The pre-flight gate: refuse, before any goal is sent, a plan that collides when replayed
synchronized through the configuration's MuJoCo scene (``execution.preflight_check: true``)."""

from __future__ import annotations

from mj_manipulator_ros.core.config import ExecutorConfig
from mj_manipulator_ros.core.errors import ConfigError, ExecutionRefusedError
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.replay_checker import PlanReplayChecker
from mj_manipulator_ros.core.replay_report import ReplayReport


def scene_checker(config: ExecutorConfig, **kwargs) -> PlanReplayChecker:
    """A replay checker on the scene described by the config's ``scene`` section."""
    from mj_manipulator_ros.sim.scene import Scene
    from mj_manipulator_ros.sim.sim_config import sim_config

    if "scene" not in config.extra:
        raise ConfigError("the replay check needs a 'scene' section in the configuration "
                          "(the MuJoCo model of the robot)")
    return PlanReplayChecker.from_scene(Scene.from_config(sim_config(config)), **kwargs)


class PlanRefused(ExecutionRefusedError):
    """The pre-flight replay found a collision; ``report`` has the details."""

    def __init__(self, report: ReplayReport) -> None:
        super().__init__("pre-flight check refused the plan (nothing was sent): it collides "
                         "when replayed synchronized\n" + report.summary())
        self.report = report


class PreflightCheck:
    """Callable gate for :class:`MultiArmExecutor`: builds the checker once, checks each plan."""

    def __init__(self, config: ExecutorConfig, **kwargs) -> None:
        self.checker = scene_checker(config, **kwargs)

    def __call__(self, plan: MultiArmPlan) -> ReplayReport:
        report = self.checker.check(plan, mode="synchronized", continuous=True)
        if not report.collision_free:
            raise PlanRefused(report)
        return report
