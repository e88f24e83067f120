"""The plan-replay check: timelines, the checker, its report, the pre-flight gate and pictures.

Imports ``core`` and ``model``; never ``rclpy`` or the simulator (``test/test_layers.py``).
"""
