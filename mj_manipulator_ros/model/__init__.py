"""The MuJoCo model and nothing else: scene composition, arm bindings, timestep checks, the
scene section of a configuration and the joint limits read from the model.

Imports ``core`` and ``mujoco``; never ``rclpy``, the simulator or the replay check
(``test/test_layers.py`` checks it).
"""
