"""The simulated OpenArm pair (MuJoCo, one controller per arm) and the execution node, on sim time.

    ros2 launch mj_manipulator_ros sim.launch.py [config:=FILE] [start_lead_s:=0.25]
        [preflight_check:=true] [use_sim_time:=true] [record_dir:=DIR]
        [max_stop_time_s:=S] [max_stop_distance_m:=M]

Every decision is in mj_manipulator_ros.bringup.nodes.nodes_for (tested without launch).
"""

from mj_manipulator_ros.bringup.launch import generate


def generate_launch_description():
    return generate("sim")
