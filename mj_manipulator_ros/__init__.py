"""mj_manipulator_ros: synchronized multi-arm trajectory execution for ROS 2 and MuJoCo.

Layers (each a subpackage):

- ``core``: plans, validation, timing, sync primitives, interpolation, reports. Pure numpy and
  MuJoCo; never imports rclpy (a test enforces it).
- ``ros``: rclpy nodes, action clients and servers, message conversion, the executor.
- ``sim``: MuJoCo scene composition, the physics owner, simulated controllers.
- ``hil``: hardware-in-the-loop bring-up tooling.
"""

__version__ = "0.1.0"
