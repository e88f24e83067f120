"""Small configs and plans for tests (seeded, explicit)."""

from __future__ import annotations

import time

import numpy as np

from mj_manipulator_ros.core.config import config_from_mapping
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan


#: the start lead for controllers in Python processes of their own (``scripted_controller``) on
#: this 2-core machine: one just started, beside a loaded suite, took its first goal up to
#: 330 ms after it was sent (a run of 32ce44b: 264 ms), past the product's 0.25 s; where the
#: start is not what a test is about, its goals get this lead (as the multi-process
#: simulators' config and the demo: ``apps/demo.DEMO_LEAD_S``)
PROCESS_LEAD_S = 0.6


def make_config(arms=("left", "right"), joints: int = 3, velocity: float = 10.0, **execution):
    return config_from_mapping({
        "arms": [{"name": a, "joint_names": [f"{a}_j{k}" for k in range(joints)],
                  "joint_limits": {f"{a}_j{k}": {"lower": -2.0, "upper": 2.0, "velocity": velocity}
                                   for k in range(joints)}}
                 for a in arms],
        # scripted controllers publish no joint states: the start-state and clock checks are
        # off here (tests of those checks run against the simulator, which publishes them)
        "execution": {"server_wait_s": 5.0, "cancel_wait_s": 2.0, "start_tolerance_rad": 0.0,
                      "max_clock_offset_s": 0.0, **execution},
    })


def make_plan(arms=("left", "right"), joints: int = 3, duration: float = 1.0, points: int = 5,
              seed: int = 0, velocities: bool = True) -> MultiArmPlan:
    """Smooth out-and-back motions, amplitude 0.3 rad, zero end velocity."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, duration, points)
    phase = np.sin(np.pi * t / duration)[:, None]            # 0 -> 1 -> 0
    dphase = (np.pi / duration) * np.cos(np.pi * t / duration)[:, None]
    out = {}
    for a in arms:
        amp = rng.uniform(-0.3, 0.3, size=joints)
        vel = dphase * amp
        vel[-1] = 0.0
        vel[0] = 0.0
        out[a] = ArmTrajectory(tuple(f"{a}_j{k}" for k in range(joints)), t, phase * amp,
                               vel if velocities else None)
    return MultiArmPlan(out)


def wait_for_plan_time(executor, plan_time: float, limit_s: float = 20.0) -> bool:
    """Block until the running execution's plan clock has passed ``plan_time`` (s from its
    start stamp, on the executor's clock), or ``limit_s`` of wall time; True when it did."""
    deadline = time.monotonic() + limit_s
    while executor.current_stamp is None or \
            executor.now() < executor.current_stamp.seconds + plan_time:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True
