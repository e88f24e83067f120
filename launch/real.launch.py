"""The execution node for the real OpenArm pair (its controllers run under ros2_control).

    ros2 launch mj_manipulator_ros real.launch.py [config:=FILE] [start_lead_s:=0.25]
        [preflight_check:=true] [use_sim_time:=false] [record_dir:=DIR]
        [max_stop_time_s:=S] [max_stop_distance_m:=M]

Every decision is in mj_manipulator_ros.bringup.nodes.nodes_for (tested without launch).
"""

from mj_manipulator_ros.bringup.launch import generate


def generate_launch_description():
    return generate("real")
