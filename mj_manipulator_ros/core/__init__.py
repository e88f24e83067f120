"""ROS-free core: plans, validation, timing, sync primitives, interpolation and reports.

Nothing in this package imports rclpy or any ROS message module; ``test/test_layers.py``
checks that, so the core can be used and tested on a machine without ROS.
"""
