"""Configuration files in ROS 2 parameter-file form.

The same file can be given to ROS 2 (``ros2 run ... --ros-args --params-file F``, or a launch
file's ``parameters=[F]``) and to :func:`mj_manipulator_ros.core.config.load_config`. ROS
parameters cannot hold lists of mappings, so lists of arms, of scene models and of allowed
collisions are lists of names, each with a section of its own::

    /**:                                  # or a node name
      ros__parameters:
        arms: [left, right]
        left:
          joint_names: [openarm_left_joint1, ...]
          action: /left_joint_trajectory_controller/follow_joint_trajectory
          joint_limits:
            openarm_left_joint1: {lower: -3.49, upper: 1.39, velocity: 2.0}
        execution: {start_lead_s: 0.25}
        scene:
          models: [openarm]
          openarm: {file: "openarm:v2/pedestal/openarm_pedestal.xml"}
          allowed_collisions: [wrist_cable]
          wrist_cable: {a: openarm_left_link5, b: openarm_left_ee_base_link, reason: "..."}

:func:`from_parameter_file` turns that into the plain form (``arms: [{name, ...}]``,
``scene.models: [{file, ...}]``, ``scene.allowed_collisions: [{a, b, reason}]``).
"""

from __future__ import annotations

from typing import Any, Mapping

from mj_manipulator_ros.core.errors import ConfigError


def is_parameter_file(data: Any) -> bool:
    return (isinstance(data, Mapping) and len(data) >= 1 and all(
        isinstance(v, Mapping) and "ros__parameters" in v for v in data.values()))


def from_parameter_file(data: Mapping, node: str | None = None) -> dict:
    """The plain-form configuration of a parameter file (the section of ``node``, else ``/**``,
    else the only section)."""
    sections = dict(data)
    key = node if node in sections else ("/**" if "/**" in sections else None)
    if key is None:
        if len(sections) != 1:
            raise ConfigError(f"parameter file has sections {sorted(sections)}; expected '/**' "
                              "or exactly one node")
        key = next(iter(sections))
    params = dict(sections[key]["ros__parameters"] or {})
    plain: dict[str, Any] = {}
    names = params.pop("arms", None)
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{key}.ros__parameters.arms: expected a list of arm names, got {names!r}")
    plain["arms"] = []
    for name in names:
        body = params.pop(name, None)
        if not isinstance(body, Mapping):
            raise ConfigError(f"{key}.ros__parameters: arm {name!r} is listed in 'arms' but has "
                              "no section of its own")
        plain["arms"].append({"name": name, **body})
    scene = params.pop("scene", None)
    if scene is not None:
        scene = dict(scene)
        model_names = scene.pop("models", [])
        models = []
        for m in model_names:
            body = scene.pop(m, None)
            if not isinstance(body, Mapping):
                raise ConfigError(f"scene.models lists {m!r} but scene has no section {m!r}")
            models.append(dict(body))
        plain["scene"] = {**scene, "models": models}
        allowed = scene.pop("allowed_collisions", None)
        if allowed is not None:
            entries = []
            for name in allowed if isinstance(allowed, list) else [allowed]:
                body = scene.pop(name, None) if isinstance(name, str) else None
                if not isinstance(body, Mapping):
                    raise ConfigError(f"scene.allowed_collisions lists {name!r} but scene has "
                                      f"no section {name!r} ({{a: BODY, b: BODY, reason: TEXT}})")
                entries.append(dict(body))
            plain["scene"] = {**scene, "models": models, "allowed_collisions": entries}
    plain.update(params)
    return plain
