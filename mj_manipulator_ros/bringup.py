"""What the launch files start: every decision lives here, where it is tested without ``launch``.

``launch/real.launch.py`` and ``launch/sim.launch.py`` only declare :data:`LAUNCH_ARGUMENTS`
and map :func:`nodes_for`'s :class:`NodeSpec` list onto ``launch_ros.actions.Node``.

- ``real``: the execution node, for controllers that already run (ros2_control on the robot).
- ``sim``: the simulator node (one physics, one /clock, a controller per arm) plus the execution
  node, on sim time by default. (Arms can also be served by one simulator process each, with
  ``mj-manipulator-ros sim --serve ARM``, but only on the system clock: two physics processes
  cannot share one /clock.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from mj_manipulator_ros.core.config import load_config
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.resources import PACKAGE, config_file

#: name -> (default, description); defaults "" mean "from the configuration file".
LAUNCH_ARGUMENTS: dict[str, tuple[str, str]] = {
    "config": ("", "configuration file (arms, their FollowJointTrajectory actions, limits, "
                   "execution settings, MuJoCo scene); default config/openarm_bimanual.yaml "
                   "(real) or config/sim_openarm.yaml (sim)"),
    "start_lead_s": ("", "start stamp lead in s (now + lead on the controllers' clock); "
                         "empty = the configuration's execution.start_lead_s"),
    "preflight_check": ("", "true/false: refuse plans that collide in synchronized replay; "
                            "empty = the configuration's execution.preflight_check"),
    "use_sim_time": ("", "true/false: use /clock; empty = false for real, true for sim"),
}

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


def _bool(value: str | bool | None, name: str) -> Optional[bool]:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ConfigError(f"launch argument {name}: expected true or false, got {value!r}")


def _float(value: str | float | None, name: str) -> Optional[float]:
    if value is None or value == "":
        return None
    try:
        out = float(value)
    except ValueError:
        raise ConfigError(f"launch argument {name}: expected seconds, got {value!r}") from None
    if out < 0:
        raise ConfigError(f"launch argument {name}: must be >= 0, got {out}")
    return out


def nodes_for(mode: str, config: str = "", start_lead_s: str | float = "",
              preflight_check: str | bool = "", use_sim_time: str | bool = "") -> list[NodeSpec]:
    """The nodes of a launch, from launch-argument strings (or typed values).

    Raises:
        ConfigError: unknown mode, unreadable/invalid configuration, bad argument value.
    """
    if mode not in DEFAULT_CONFIG:
        raise ConfigError(f"mode must be one of {sorted(DEFAULT_CONFIG)}, got {mode!r}")
    path = str(Path(config).resolve()) if config else str(config_file(DEFAULT_CONFIG[mode]))
    cfg = load_config(path)  # fail at launch time, with the file's own error message
    lead = _float(start_lead_s, "start_lead_s")
    preflight = _bool(preflight_check, "preflight_check")
    sim_time = _bool(use_sim_time, "use_sim_time")
    if sim_time is None:
        sim_time = mode == "sim"
    if preflight and "scene" not in cfg.extra:
        raise ConfigError(f"preflight_check needs a 'scene' section in {path}")
    execution = {"config": path, "use_sim_time": sim_time,
                 "start_lead_s": -1.0 if lead is None else lead,
                 "preflight_check": cfg.execution.preflight_check if preflight is None else preflight}
    nodes = []
    if mode == "sim":
        nodes.append(NodeSpec("sim_node", "mj_manipulator_sim",
                              [{"config": path, "use_sim_time": sim_time}]))
    nodes.append(NodeSpec("execution_node", EXECUTION_NODE, [execution]))
    return nodes
