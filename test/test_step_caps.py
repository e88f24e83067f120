"""The five physics-step caps: a tiny inline MJCF fixture binding each one, the OpenArm numbers,
and the stiffness cost checked against the physics it predicts (how deep a pressed body sinks)."""

from __future__ import annotations

import dataclasses
import logging
import time

import mujoco
import numpy as np
import pytest

from mj_manipulator_ros.core.config import config_from_mapping, load_config
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.model.step_caps import CAPS, REFERENCE_STEP, choose_step, step_caps
from mj_manipulator_ros.resources import config_file
from mj_manipulator_ros.sim.sim_config import sim_config

# One joint "j" per fixture; each body below is tuned so that exactly one cap binds.
LINK = '<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="1" {geom}/>'
FIXTURES = {
    # a 1 kg ball 0.3 m out: I = 0.0912, omega = sqrt(4000 / I) = 209 rad/s -> max step 4.8 ms
    "servo": ('<joint name="j" axis="0 1 0" armature="0.001"/>'
              '<geom type="sphere" pos="0.3 0 0" size="0.02" mass="1"/>',
              '<position joint="j" kp="4000" kv="1"/>'),
    # b / I = 40 / 0.031: damping cap 0.25 I / b + 1.25 ref ~ 1.76 ms
    "damping": ('<joint name="j" axis="0 1 0" damping="40" armature="0.001"/>' + LINK.format(geom=""),
                '<motor joint="j"/>'),
    # a contact geom with a 2 ms time constant: dt <= 1 ms
    "solref": ('<joint name="j" axis="0 1 0" armature="0.001"/>' + LINK.format(geom='solref="0.002 1"'),
               '<motor joint="j"/>'),
    # a 1.4 m link at 2 rad/s: the tip moves 2.8 m/s -> 5 mm in 1.8 ms
    "link_gap": ('<joint name="j" axis="0 1 0" armature="0.001"/>'
                 '<geom type="capsule" fromto="0 0 0 1.4 0 0" size="0.02" mass="1"/>',
                 '<motor joint="j"/>'),
}
LOOSE = ('<body name="box" pos="1 0 0.1"><freejoint/><geom type="box" size="0.03 0.03 0.03" '
         'mass="0.2" solref="0.001 1"/></body>')


def fixture_config(tmp_path, cap: str, control_rate_hz: float = 100.0, extra_body: str = "",
                   timestep="auto"):
    body, actuator = FIXTURES[cap]
    xml = (f'<mujoco><worldbody><body name="link" pos="0 0 0.5">{body}</body>{extra_body}'
           f'</worldbody><actuator>{actuator}</actuator></mujoco>')
    path = tmp_path / f"{cap}.xml"
    path.write_text(xml)
    return sim_config(config_from_mapping({
        "arms": [{"name": "arm", "joint_names": ["j"]}],
        "scene": {"models": [{"file": str(path)}], "floor": False, "timestep": timestep},
        "sim": {"control_rate_hz": control_rate_hz, "gravity_compensation": "off"}}))


@pytest.mark.parametrize("cap", sorted(FIXTURES))
def test_each_cap_binds_its_fixture(tmp_path, cap) -> None:
    scene = fixture_config(tmp_path, cap).build_scene()
    step = scene.step
    assert step.binding is not None and step.binding.cap == cap, step.summary()
    assert not step.broken and step.timestep <= step.binding.max_step
    # the next larger step on the grid breaks exactly that cap, and names the joint or geom
    bigger = step_caps(scene.model, scene.arms.values(), scene.initial_qpos, 2 * step.timestep)
    broken = {c.cap for c in bigger if not c.ok}
    assert broken == {cap}
    assert all(c.cost for c in bigger if not c.ok)


def test_servo_cap_matches_the_damped_oscillator(tmp_path) -> None:
    """Independent reference: the inertia of a 1 kg ball of radius 2 cm, 0.3 m from the axis
    (m d^2 + 2/5 m r^2) plus the armature, worked by hand, not read from MuJoCo."""
    scene = fixture_config(tmp_path, "servo").build_scene()
    inertia = 1.0 * 0.3**2 + 0.4 * 1.0 * 0.02**2 + 0.001
    omega, zeta = np.sqrt(4000 / inertia), 1.0 / (2 * np.sqrt(4000 * inertia))
    (servo,) = [c for c in scene.step.caps if c.cap == "servo"]
    assert servo.max_step == pytest.approx(max(1.0, zeta) / omega, rel=1e-6)


def test_loose_body_cap_is_not_the_solref_cap(tmp_path) -> None:
    """A free body's 1 ms time constant cannot be met by any sensible step; it is held to no
    softer than at the reference step (1.25 ms), not to tau/2 = 0.5 ms."""
    scene = fixture_config(tmp_path, "link_gap", control_rate_hz=200.0, extra_body=LOOSE).build_scene()
    loose = [c for c in scene.step.caps if c.cap == "loose_body"]
    assert [c.element for c in loose] == ["geom box"] or loose[0].element.startswith("geom")
    assert loose[0].max_step == pytest.approx(REFERENCE_STEP)
    assert scene.step.binding.cap == "loose_body"
    assert scene.step.timestep == pytest.approx(0.005 / 4)  # 5 ms / 2^2
    assert not [c for c in scene.step.caps if c.cap == "solref" and "box" in c.element]


def test_pinned_step_is_taken_and_warns_once_per_broken_cap(tmp_path, caplog) -> None:
    with caplog.at_level(logging.WARNING):
        scene = fixture_config(tmp_path, "solref", timestep=0.005).build_scene()
    assert scene.model.opt.timestep == pytest.approx(0.005) and scene.step.pinned
    lines = [r.getMessage() for r in caplog.records if "breaks the" in r.getMessage()]
    assert len(lines) == len({c.cap for c in scene.step.broken}) >= 1
    # tau 2 ms is raised to 2.5 ms at the reference step and to 10 ms here: (2.5/10)^2
    assert any("solref cap: geom" in ln and "0.0625x as stiff" in ln for ln in lines)


def test_pinned_step_must_divide_the_control_period(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"scene.timestep: 0.003 s must divide the control "
                                          r"period 0.01 s"):
        fixture_config(tmp_path, "solref", timestep=0.003).build_scene()
    with pytest.raises(ConfigError, match="must divide the control period"):
        fixture_config(tmp_path, "solref", timestep=0.02).build_scene()


def test_stiffness_cost_is_what_the_physics_does() -> None:
    """The solref cost ("0.0625x as stiff") predicts how much deeper a resting body sinks:
    measured by simulating a 1 kg box on a plane (5 ms time constants) at each step."""
    xml = ('<mujoco><option integrator="implicitfast"/><worldbody>'
           '<geom type="plane" size="1 1 .1" solref="0.005 1"/><body pos="0 0 0.05">'
           '<joint name="z" type="slide" axis="0 0 1"/><geom type="box" size=".05 .05 .05" '
           'mass="1" solref="0.005 1"/></body></worldbody></mujoco>')
    depth = {}
    for dt in (REFERENCE_STEP, 0.005, 0.01):
        m = mujoco.MjModel.from_xml_string(xml)
        m.opt.timestep = dt
        d = mujoco.MjData(m)
        for _ in range(int(2.0 / dt)):
            mujoco.mj_step(m, d)
        depth[dt] = -float(d.qpos[0])
        caps = step_caps(m, [], d.qpos, dt)
        worst = min((c for c in caps if c.cap == "solref"), key=lambda c: c.max_step)
        if dt > 0.0025:
            ratio = float(worst.cost.split("x as stiff")[0].split()[-1])
            assert depth[dt] / depth[REFERENCE_STEP] == pytest.approx(1 / ratio, rel=0.05)


@pytest.fixture(scope="module")
def openarm():
    return sim_config(load_config(config_file("sim_openarm.yaml")))


@pytest.mark.parametrize("rate, expected_ms, binding", [(500, 2.0, None), (250, 2.0, "solref"),
                                                        (100, 2.5, "solref")])
def test_openarm_auto_steps(openarm, rate, expected_ms, binding) -> None:
    cfg = dataclasses.replace(openarm, sim=dataclasses.replace(openarm.sim, control_rate_hz=rate))
    scene = cfg.build_scene()
    assert scene.model.opt.timestep == pytest.approx(expected_ms * 1e-3)
    assert (scene.step.binding.cap if scene.step.binding else None) == binding
    assert not scene.step.broken
    assert {c.cap for c in scene.step.caps} >= {"servo", "damping", "solref", "link_gap"}


def test_openarm_pinned_10ms_names_the_costs(openarm, caplog) -> None:
    cfg = dataclasses.replace(openarm, scene=dataclasses.replace(openarm.scene, timestep=0.01),
                              sim=dataclasses.replace(openarm.sim, control_rate_hz=100))
    with caplog.at_level(logging.WARNING):
        scene = cfg.build_scene()
    text = caplog.text
    assert "0.0625x as stiff" in text
    damping = [ln for ln in text.splitlines() if "damping cap" in ln]
    assert damping and "joint5" in damping[0]
    t0 = time.perf_counter()
    choose_step(scene.model, scene.arms.values(), scene.initial_qpos, 0.01)
    assert set(CAPS) >= {c.cap for c in scene.step.caps}
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.5, elapsed  # generous: the benchmark-free sanity bound (measured ~4 ms)
