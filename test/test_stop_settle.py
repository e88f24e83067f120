"""The controlled stop's settle time predicted on the robot's model (``sim/stop_settle.py``),
against an independent reference: one hinge about the vertical axis (no gravity load), a point
mass at 0.3 m, a position servo. Its closed loop is ``M q'' = kp (r - q) - (kv + d) q'``,
integrated here by RK4 at 0.1 ms with the reference held over each control cycle; the
reference is the plan (a quintic, written here) until the ramp, then the plan at the plan time
the documented ramp law advances (rate ``1 - 3u^2 + 2u^3``, integrated here)."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.core.config import config_from_mapping
from mj_manipulator_ros.core.plan import ArmTrajectory
from mj_manipulator_ros.sim.sim_config import sim_config
from mj_manipulator_ros.sim.stop_settle import predict_stop_settle

MASS, RADIUS, ARMATURE, DAMPING, KP, KV = 1.0, 0.3, 0.01, 0.5, 150.0, 8.0
SOLO_XML = f"""
<mujoco model="solo">
  <compiler angle="radian"/>
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="link">
      <joint name="j" type="hinge" axis="0 0 1" range="-2 2" damping="{DAMPING}"
             armature="{ARMATURE}"/>
      <geom type="sphere" size="0.005" mass="{MASS}" pos="{RADIUS} 0 0"/>
    </body>
  </worldbody>
  <actuator><position joint="j" kp="{KP}" kv="{KV}"/></actuator>
</mujoco>
"""
AMPLITUDE, DURATION = 0.4, 2.0


def _config(tmp_path, control_rate_hz: float = 500.0):
    path = tmp_path / "solo.xml"
    path.write_text(SOLO_XML)
    return sim_config(config_from_mapping({
        "arms": [{"name": "solo", "joint_names": ["solo_j"],
                  "joint_limits": {"solo_j": {"lower": -2, "upper": 2, "velocity": 3}}}],
        "scene": {"models": [{"file": str(path), "prefix": "solo_", "pos": [0, 0, 0.5]}],
                  "floor": False, "timestep": 0.0005, "option": {"integrator": "rk4"}},
        "sim": {"real_time_factor": 0.0, "use_sim_time": True,
                "control_rate_hz": control_rate_hz},
    }))


def _plan(t):
    """The quintic rest-to-rest plan: position, velocity, acceleration at ``t`` (s)."""
    s = np.clip(np.asarray(t, dtype=float) / DURATION, 0.0, 1.0)
    q = AMPLITUDE * (10 * s**3 - 15 * s**4 + 6 * s**5)
    v = AMPLITUDE * (30 * s**2 - 60 * s**3 + 30 * s**4) / DURATION
    a = AMPLITUDE * (60 * s - 180 * s**2 + 120 * s**3) / DURATION**2
    return q, v, a


def _trajectory() -> ArmTrajectory:
    t = np.linspace(0.0, DURATION, 201)
    q, v, a = _plan(t)
    return ArmTrajectory(("solo_j",), t, q[:, None], v[:, None], a[:, None])


def _reference_settle(stop_at: float, ramp_s: float, tolerance: float, period: float) -> float:
    """Seconds from the ramp's start until |q - q_final| stays within ``tolerance``."""
    inertia = MASS * RADIUS**2 + 0.4 * MASS * 0.005**2 + ARMATURE
    dt, end = 1e-4, stop_at + ramp_s + 1.5
    # the plan time the ramp reaches, by the documented rate law, integrated finely
    taus = np.arange(0.0, ramp_s + dt, dt)
    u = np.clip(taus / ramp_s, 0.0, 1.0)
    advanced = np.concatenate([[0.0], np.cumsum(0.5 * dt * ((1 - 3 * u**2 + 2 * u**3)[1:]
                                                            + (1 - 3 * u**2 + 2 * u**3)[:-1]))])

    def reference(t: float) -> float:
        if t < stop_at:
            return float(_plan(t)[0])
        k = min(int(round((t - stop_at) / dt)), advanced.size - 1)
        return float(_plan(stop_at + advanced[k])[0])

    def f(y, r):
        return np.array([y[1], (KP * (r - y[0]) - (KV + DAMPING) * y[1]) / inertia])

    y, t, times, qs = np.zeros(2), 0.0, [], []
    r = reference(0.0)
    while t < end:
        if round(t / period, 6) % 1 == 0:     # a new control cycle: the reference is sampled
            r = reference(t)
        k1 = f(y, r)
        k2 = f(y + 0.5 * dt * k1, r)
        k3 = f(y + 0.5 * dt * k2, r)
        k4 = f(y + dt * k3, r)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        t += dt
        times.append(t)
        qs.append(y[0])
    times, qs = np.array(times), np.array(qs)
    after = times >= stop_at
    away = np.flatnonzero(np.abs(qs[after] - qs[-1]) > tolerance)
    return float(times[after][away[-1] + 1] - stop_at) if away.size else 0.0


@pytest.mark.parametrize("stop_at, ramp_s", [(1.0, 0.05), (1.0, 0.4), (0.6, 0.2)])
def test_the_predicted_settle_is_the_servo_s_own(tmp_path, stop_at: float, ramp_s: float) -> None:
    config = _config(tmp_path)
    period = 1.0 / config.sim.control_rate_hz
    predicted = predict_stop_settle(config, "solo", _trajectory(), stop_at, ramp_s, 0.002)
    reference = _reference_settle(stop_at, ramp_s, 0.002, period)
    # the servo lags its reference (tens of ms here): the prediction is not the reference's
    assert reference > 0.05, reference
    assert predicted == pytest.approx(reference, abs=3 * period), (predicted, reference)


def test_a_fault_of_the_configuration_is_left_out_of_the_prediction(tmp_path) -> None:
    """A fault is what the bring-up must find: the prediction runs the model without it."""
    import dataclasses

    from mj_manipulator_ros.sim.sim_config import ArmFaults

    config = _config(tmp_path)
    clean = predict_stop_settle(config, "solo", _trajectory(), 1.0, 0.2, 0.002)
    faulted = dataclasses.replace(config, sim=dataclasses.replace(
        config.sim, faults={"solo": ArmFaults(abort_after_s=0.5)}))
    assert predict_stop_settle(faulted, "solo", _trajectory(), 1.0, 0.2, 0.002) == clean
