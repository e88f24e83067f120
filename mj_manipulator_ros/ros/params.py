"""Read ``--ros-args`` parameter overrides without declaring every parameter up front.

Only parameters actually given count: ``-p name:=value`` / ``--param name:=value`` (optionally
``node:name:=value``) and every key of a ``--params-file`` (the section of any node, nested keys
joined with dots). Parameters every node declares by itself (``use_sim_time``, default false)
are *not* given unless named there, so they never override a configuration file.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterable, Mapping

import rclpy
import yaml

from mj_manipulator_ros.core import yaml_load


def given_parameter_names(argv: Iterable[str]) -> set[str]:
    """The parameter names set by the ``--ros-args`` sections of ``argv``."""
    names: set[str] = set()
    in_ros = False
    args = iter(argv)
    for arg in args:
        if arg == "--ros-args":
            in_ros = True
        elif arg == "--":
            in_ros = False
        elif in_ros and arg in ("-p", "--param"):
            key = next(args, "").split(":=", 1)[0]
            names.add(key.rsplit(":", 1)[-1])
        elif in_ros and arg == "--params-file":
            names |= _file_parameter_names(Path(next(args, "")))
    return names


def _file_parameter_names(path: Path) -> set[str]:
    try:
        data = yaml_load.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return set()  # rcl reports an unreadable file itself
    names: set[str] = set()
    for section in data.values() if isinstance(data, Mapping) else ():
        params = section.get("ros__parameters") if isinstance(section, Mapping) else None
        if isinstance(params, Mapping):
            names |= set(_flatten(params))
    return names


def _flatten(params: Mapping, prefix: str = "") -> Iterable[str]:
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, name + ".")
        else:
            yield name


def parameter_overrides(context, argv: Iterable[str]) -> dict:
    """Every parameter given for this process on its command line (or by a launch file's
    parameter file), with its value as rcl parsed it."""
    given = given_parameter_names(argv)
    node = rclpy.create_node(f"mjmr_params_{uuid.uuid4().hex[:6]}", context=context,
                             automatically_declare_parameters_from_overrides=True)
    try:
        names = node.list_parameters([], 0).names  # every parameter, any depth
        return {p.name: p.value for p in node.get_parameters(names) if p.name in given}
    finally:
        node.destroy_node()
