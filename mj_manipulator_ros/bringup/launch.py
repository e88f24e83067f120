"""The only code the launch files run: declare the arguments, map nodes_for() onto launch_ros.

Imports ``launch``/``launch_ros`` (present in a ROS 2 distro, not in the wheel environment).
"""

from __future__ import annotations

from mj_manipulator_ros.bringup.nodes import LAUNCH_ARGUMENTS, nodes_for


def generate(mode: str):
    """The LaunchDescription of ``real.launch.py`` (mode "real") or ``sim.launch.py`` ("sim")."""
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    def nodes(context):
        args = {name: LaunchConfiguration(name).perform(context) for name in LAUNCH_ARGUMENTS}
        return [Node(package=n.package, executable=n.executable, name=n.name,
                     parameters=n.parameters, output=n.output)
                for n in nodes_for(mode, **args)]

    return LaunchDescription(
        [DeclareLaunchArgument(name, default_value=default, description=doc)
         for name, (default, doc) in LAUNCH_ARGUMENTS.items()]
        + [OpaqueFunction(function=nodes)])
