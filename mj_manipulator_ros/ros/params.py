"""Read ``--ros-args -p name:=value`` overrides without declaring every parameter up front."""

from __future__ import annotations

import uuid

import rclpy


def parameter_overrides(context) -> dict:
    """Every parameter given on the command line (or by a launch file) for this process."""
    node = rclpy.create_node(f"mjmr_params_{uuid.uuid4().hex[:6]}", context=context,
                             automatically_declare_parameters_from_overrides=True)
    try:
        names = node.list_parameters([], 0).names  # every parameter, any depth
        return {p.name: p.value for p in node.get_parameters(names)}
    finally:
        node.destroy_node()
