"""What the launch files start: every decision lives here, where it is tested without ``launch``.

``launch/real.launch.py`` and ``launch/sim.launch.py`` only declare :data:`LAUNCH_ARGUMENTS`
(generated from the execution settings' fields) and map :func:`nodes_for`'s :class:`NodeSpec`
list onto ``launch_ros.actions.Node`` (:mod:`mj_manipulator_ros.bringup.launch`).

- ``real``: the execution node, for controllers that already run (ros2_control on the robot).
- ``sim``: the simulator node (one physics, one /clock, a controller per arm) plus the execution
  node, on sim time by default. (Arms can also be served by one simulator process each, with
  ``mj-manipulator-ros sim --serve ARM``, but only on the system clock: two physics processes
  cannot share one /clock.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mj_manipulator_ros.core import overrides
from mj_manipulator_ros.core.config import ExecutionSettings, load_config
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.resources import PACKAGE, config_file

def launch_arguments() -> dict[str, tuple[str, str]]:
    """name -> (default, description) of every launch argument: ``config`` and each overridable
    execution setting (generated from its field; "" = unset = the configuration's value)."""
    out = {"config": ("", "configuration file (arms, their FollowJointTrajectory actions, limits, "
                          "execution settings, MuJoCo scene); default config/openarm_bimanual.yaml "
                          "(real) or config/sim_openarm.yaml (sim)")}
    for f in overrides.overridable(ExecutionSettings):
        unset = ("false for real, true for sim" if f.name == "use_sim_time"
                 else f"the configuration's execution.{f.name}")
        out[f.name] = ("", f"{f.metadata['doc']}; empty = {unset}")
    return out


#: name -> (default, description); defaults "" mean "from the configuration file".
LAUNCH_ARGUMENTS: dict[str, tuple[str, str]] = launch_arguments()

DEFAULT_CONFIG = {"real": "openarm_bimanual.yaml", "sim": "sim_openarm.yaml"}
EXECUTION_NODE = "mj_manipulator_execution"


@dataclass(frozen=True)
class NodeSpec:
    """One node to start: maps 1:1 onto ``launch_ros.actions.Node``."""

    executable: str
    name: str
    parameters: list[dict[str, Any]] = field(default_factory=list)
    package: str = PACKAGE
    output: str = "screen"


def nodes_for(mode: str, config: str = "", **settings: str | float | bool) -> list[NodeSpec]:
    """The nodes of a launch, from launch-argument strings (or typed values); ``settings`` are
    the overridable execution settings (see :data:`LAUNCH_ARGUMENTS`), "" = unset.

    Raises:
        ConfigError: unknown mode or argument, unreadable/invalid configuration, bad value.
    """
    if mode not in DEFAULT_CONFIG:
        raise ConfigError(f"mode must be one of {sorted(DEFAULT_CONFIG)}, got {mode!r}")
    unknown = sorted(set(settings) - set(LAUNCH_ARGUMENTS))
    if unknown:
        raise ConfigError(f"unknown launch argument(s) {unknown}; arguments: {sorted(LAUNCH_ARGUMENTS)}")
    path = str(Path(config).resolve()) if config else str(config_file(DEFAULT_CONFIG[mode]))
    cfg = load_config(path)  # fail at launch time, with the file's own error message
    given = {name: overrides.parse_text(ExecutionSettings, name, value)
             for name, value in settings.items()}
    given = {k: v for k, v in given.items() if v is not None}
    sim_time = given.pop("use_sim_time", mode == "sim")
    preflight = given.get("preflight_check", cfg.execution.preflight_check)
    if preflight and "scene" not in cfg.extra:
        raise ConfigError(f"preflight_check needs a 'scene' section in {path}")
    execution = {"config": path, "use_sim_time": sim_time, **given}
    nodes = []
    if mode == "sim":
        nodes.append(NodeSpec("sim_node", "mj_manipulator_sim",
                              [{"config": path, "use_sim_time": sim_time}]))
    nodes.append(NodeSpec("execution_node", EXECUTION_NODE, [execution]))
    return nodes
