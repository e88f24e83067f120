"""A tiny two-joint planar arm (inline MJCF) attached twice: arms 'left' and 'right'."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mj_manipulator_ros.core.config import config_from_mapping
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.sim.sim_config import SimConfig, sim_config

ARM_XML = """
<mujoco model="tiny_arm">
  <compiler angle="radian"/>
  <worldbody>
    <body name="link1">
      <joint name="j1" type="hinge" axis="0 0 1" range="-2 2" damping="0.5" armature="0.01"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
      <body name="link2" pos="0.3 0 0">
        <joint name="j2" type="hinge" axis="0 0 1" range="-2 2" damping="0.5" armature="0.01"/>
        <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.03" mass="0.5"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position joint="j1" kp="150" kv="8"/>
    <position joint="j2" kp="150" kv="8"/>
  </actuator>
</mujoco>
"""


def tiny_mapping(tmp_path: Path, arms=("left", "right"), sim: dict | None = None,
                 execution: dict | None = None, separation: float = 1.0,
                 arm_extra: dict | None = None) -> dict:
    """The tiny pair's configuration as a plain mapping (the file's form)."""
    path = tmp_path / "tiny_arm.xml"
    path.write_text(ARM_XML)
    models = [{"file": str(path), "prefix": f"{a}_", "pos": [0.0, k * separation, 0.5]}
              for k, a in enumerate(arms)]
    return {
        "arms": [{"name": a, "joint_names": [f"{a}_j1", f"{a}_j2"],
                  "joint_limits": {f"{a}_j1": {"lower": -2, "upper": 2, "velocity": 3},
                                   f"{a}_j2": {"lower": -2, "upper": 2, "velocity": 3}},
                  **(arm_extra or {})}
                 for a in arms],
        "execution": {"server_wait_s": 10.0, **(execution or {})},
        "scene": {"models": models, "floor": False, "option": {"integrator": "implicitfast"}},
        "sim": {"real_time_factor": 0.0, "use_sim_time": True, **(sim or {})},
    }


def tiny_config(tmp_path: Path, arms=("left", "right"), sim: dict | None = None,
                execution: dict | None = None, separation: float = 1.0) -> SimConfig:
    return sim_config(config_from_mapping(tiny_mapping(tmp_path, arms, sim, execution,
                                                       separation)))


def swing(duration: float = 3.0) -> MultiArmPlan:
    """Both arms out (0.4, 0.3 rad) and back on a sin^2 profile, from rest at 0 to rest at 0."""
    t = np.linspace(0.0, duration, 31)
    s = np.sin(np.pi * t / duration) ** 2
    return MultiArmPlan({a: ArmTrajectory((f"{a}_j1", f"{a}_j2"), t, np.outer(s, [0.4, 0.3]))
                         for a in ("left", "right")})


def sim_then_sigint(tmp_path: Path, on_start: str = "", prelude: str = "") -> str:
    """Python source for a fresh process: the simulator (``run_sim``) on the tiny pair; once it
    has started (its start-up frozen), ``on_start`` (statements, may use ``gc``) runs and the
    process sends itself SIGINT. ``prelude`` (statements) runs first (a fault injected)."""
    import yaml

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_mapping(tmp_path)))
    body = "".join(f"    {line}\n" for line in on_start.splitlines())
    return ("import gc, os, signal\n"
            "import mj_manipulator_ros.core.heap as heap\n"
            "from mj_manipulator_ros.sim import sim_node\n"
            f"{prelude}"
            "real = heap.freeze_startup\n"
            "def started():\n"
            "    n = real()\n"
            f"{body}"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    return n\n"
            "heap.freeze_startup = started\n"
            f"raise SystemExit(sim_node.run_sim({str(path)!r}, ['x']))\n")
