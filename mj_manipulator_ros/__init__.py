"""mj_manipulator_ros: synchronized multi-arm trajectory execution for ROS 2 and MuJoCo.

Layers (each a subpackage):

- ``core``: plans, validation, timing, sync primitives, interpolation, reports. Pure numpy and
  MuJoCo; never imports rclpy (a test enforces it).
- ``ros``: rclpy nodes, action clients and servers, message conversion, the executor.
- ``sim``: MuJoCo scene composition, the physics owner, simulated controllers.
- ``hil``: hardware-in-the-loop bring-up tooling.
"""

import os as _os

__version__ = "0.1.0"

# BLAS calls on one thread each (unless the environment says otherwise; numpy loaded before this
# package keeps what it loaded with). This package's matrices are small (joints x geoms) and its
# heavy loops run on threads of their own (the replay's contact kernel, the stop search);
# OpenBLAS's default, a thread per core that spins between calls, took the cores from them: the
# crossing plan's pre-flight gate 0.116 -> 0.094 s on 2 cores (bench/goal_phases.py).
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
