"""Every malformed plan or configuration value is refused by name (an MjManipulatorError, exit 2
at the command line), never a Python traceback, and nothing is sent.

Table-driven: each field of a valid plan (and of a valid configuration) is replaced by values
of the wrong type, shape, size or sign, strings, huge and tiny numbers, unicode and names invalid
for ROS; the whole path a plan takes before anything is sent runs on each (parsing, validation,
the pre-flight gate on the tiny pair's scene). A case may pass (a huge but valid number) or be
refused; any other exception is a failure naming the case.
"""

from __future__ import annotations

import copy
import subprocess
import sys

import numpy as np
import pytest
import yaml

from tiny_arm import tiny_mapping
from mj_manipulator_ros.check.preflight import PreflightCheck
from mj_manipulator_ros.core.config import config_from_mapping
from mj_manipulator_ros.core.errors import MjManipulatorError
from mj_manipulator_ros.core.plan_io import plan_from_mapping
from mj_manipulator_ros.core.validation import validate_plan
from mj_manipulator_ros.model.limits import with_model_limits

CLI = [sys.executable, "-m", "mj_manipulator_ros.cli"]

#: values of every kind a field should not hold (and a few it may)
SCALARS = ["abc", "", "1.0", None, True, [], [1.0], {}, {"x": 1}, float("nan"), float("inf"),
           -float("inf"), 1e308, -1e308, 1e-308, 5e-324, -1.0, 0, 10**400, "é", "関節",
           "name with space", "a/b", "../..", "\x00"]


def mutator(base: dict, out: list):
    """``put(name, edit)``: appends (name, a deep copy of ``base`` changed by ``edit``)."""
    def put(name, edit) -> None:
        data = copy.deepcopy(base)
        edit(data)
        out.append((name, data))
    return put


def valid_plan() -> dict:
    """The tiny pair's swing as a plan mapping: 5 waypoints over 2 s, both arms."""
    times = np.linspace(0.0, 2.0, 5)
    q = 0.3 * (1 - np.cos(np.pi * times / 2.0)) / 2
    return {"arms": {a: {"joint_names": [f"{a}_j1", f"{a}_j2"],
                         "points": [{"time_from_start": float(t), "positions": [float(x), 0.0],
                                     "velocities": [0.0, 0.0]} for t, x in zip(times, q)]}
                     for a in ("left", "right")}}


def plan_mutations() -> list[tuple[str, dict]]:
    """(name, plan mapping) for every field replaced by every bad value, and shape faults."""
    out: list = []
    put = mutator(valid_plan(), out)

    for v in SCALARS:
        put(f"arms={v!r}", lambda d, v=v: d.update(arms=v))
        put(f"arm body={v!r}", lambda d, v=v: d["arms"].update(left=v))
        put(f"joint_names={v!r}", lambda d, v=v: d["arms"]["left"].update(joint_names=v))
        put(f"joint name={v!r}", lambda d, v=v: d["arms"]["left"]["joint_names"].__setitem__(0, v))
        put(f"points={v!r}", lambda d, v=v: d["arms"]["left"].update(points=v))
        put(f"point={v!r}", lambda d, v=v: d["arms"]["left"]["points"].__setitem__(2, v))
        for key in ("time_from_start", "positions", "velocities"):
            for k in (0, 2, 4):
                put(f"points[{k}].{key}={v!r}",
                    lambda d, v=v, k=k, key=key: d["arms"]["left"]["points"][k].update({key: v}))
            put(f"points[2].{key}[1]={v!r}" if key != "time_from_start" else f"arm name={v!r}",
                (lambda d, v=v, key=key: d["arms"]["left"]["points"][2][key].__setitem__(1, v))
                if key != "time_from_start" else
                (lambda d, v=v: d["arms"].__setitem__(v if isinstance(v, str) else repr(v),
                                                      d["arms"].pop("left"))))
        put(f"accelerations={v!r}", lambda d, v=v: [p.update(accelerations=[v, 0.0])
                                                     for p in d["arms"]["left"]["points"]])
    for n in (0, 1, 2):
        put(f"{n} waypoint(s), both arms", lambda d, n=n: [a.update(points=a["points"][:n])
                                                            for a in d["arms"].values()])
        put(f"{n} waypoint(s), left only", lambda d, n=n: d["arms"]["left"].update(
            points=d["arms"]["left"]["points"][:n]))
    put("no arms", lambda d: d["arms"].clear())
    put("one arm", lambda d: d["arms"].pop("right"))
    put("extra key", lambda d: d.update(extra=1))
    put("unknown point key", lambda d: d["arms"]["left"]["points"][1].update(effort=[0, 0]))
    put("times equal", lambda d: [p.update(time_from_start=1.0) for p in d["arms"]["left"]["points"]])
    put("times 1 ns apart", lambda d: [p.update(time_from_start=k * 1e-9)
                                        for k, p in enumerate(d["arms"]["left"]["points"])])
    put("times decreasing", lambda d: [p.update(time_from_start=4.0 - k)
                                        for k, p in enumerate(d["arms"]["left"]["points"])])
    put("nested positions", lambda d: d["arms"]["left"]["points"][1].update(positions=[[0.0], [0.0]]))
    put("ragged velocities", lambda d: d["arms"]["left"]["points"][1].pop("velocities"))
    return out


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    """The tiny pair's configuration, limits read from the model, and its pre-flight gate."""
    cfg = with_model_limits(config_from_mapping(tiny_mapping(tmp_path_factory.mktemp("tiny"))))
    return cfg, PreflightCheck(cfg)


def through_the_gate(data, cfg, check) -> str:
    """Parse, validate and certify ``data`` as execute does before sending: 'ok' or 'refused'."""
    try:
        plan = plan_from_mapping(data)
        validate_plan(plan, cfg)
        others = [a for a in cfg.arm_names if a not in plan.arm_names]
        check(plan, {a: np.zeros(2) for a in others})
    except MjManipulatorError:
        return "refused"
    return "ok"


def test_every_malformed_plan_is_refused_by_name(gate) -> None:
    cfg, check = gate
    escaped, verdicts = [], {}
    for name, data in plan_mutations():
        try:
            verdicts[name] = through_the_gate(data, cfg, check)
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            escaped.append(f"{name}: {type(exc).__name__}: {exc}"[:300])
    assert not escaped, f"{len(escaped)} of {len(verdicts) + len(escaped)} cases end in a " \
        "traceback instead of a named error:\n" + "\n".join(escaped)
    # the table really exercises refusals (the reference: the valid plan passes)
    assert through_the_gate(valid_plan(), cfg, check) == "ok"
    for must in ("1 waypoint(s), both arms", "points[2].time_from_start='abc'",
                 "points[2].positions=nan", "joint name='関節'", "arms='abc'"):
        assert verdicts[must] == "refused", must


def config_mutations(tmp_path) -> list[tuple[str, dict]]:
    out: list = []
    put = mutator(tiny_mapping(tmp_path), out)

    for v in SCALARS:
        put(f"arms={v!r}", lambda d, v=v: d.update(arms=v))
        put(f"arm name={v!r}", lambda d, v=v: d["arms"][0].update(name=v))
        put(f"joint_names={v!r}", lambda d, v=v: d["arms"][0].update(joint_names=v))
        put(f"joint limit={v!r}", lambda d, v=v: d["arms"][0]["joint_limits"]["left_j1"]
            .update(velocity=v))
        for key in ("start_lead_s", "max_clock_offset_s", "path_tolerance_rad",
                    "max_plan_duration_s", "preflight_check"):
            put(f"execution.{key}={v!r}", lambda d, v=v, key=key: d["execution"].update({key: v}))
        put(f"execution={v!r}", lambda d, v=v: d.update(execution=v))
        put(f"scene.floor={v!r}", lambda d, v=v: d["scene"].update(floor=v))
        put(f"scene.allowed_collisions={v!r}", lambda d, v=v: d["scene"].update(
            allowed_collisions=v))
        put(f"scene.initial_positions={v!r}", lambda d, v=v: d["scene"].update(
            initial_positions={"left_j1": v}))
    put("two arms one name", lambda d: d["arms"][1].update(name="left"))
    put("unknown key", lambda d: d.update(extra=1))
    return out


def test_every_malformed_configuration_is_refused_by_name(tmp_path) -> None:
    PreflightCheck(with_model_limits(config_from_mapping(tiny_mapping(tmp_path))))  # the base
    escaped, refused = [], 0
    for name, data in config_mutations(tmp_path):
        try:
            cfg = with_model_limits(config_from_mapping(data))
            PreflightCheck(cfg)
        except MjManipulatorError:
            refused += 1
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            escaped.append(f"{name}: {type(exc).__name__}: {exc}"[:300])
    assert not escaped, f"{len(escaped)} cases end in a traceback instead of a named " \
        "error:\n" + "\n".join(escaped)
    assert refused > len(SCALARS) * 10, refused  # most mutations are refused, by name


@pytest.mark.parametrize("case", ["1 waypoint(s), both arms", "points[2].time_from_start='abc'"])
def test_the_command_line_refuses_with_exit_2_and_no_traceback(tmp_path, case) -> None:
    """The two plans a tester found ending in a traceback (exit 1): refused by name, exit 2,
    before anything is sent (no controller runs: the refusal comes first)."""
    data = dict(plan_mutations())[case]
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(data))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(tiny_mapping(tmp_path)))
    for command in (["check-plan", str(plan), "--config", str(config)],
                    ["execute", str(plan), "--config", str(config)]):
        out = subprocess.run([*CLI, *command], capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, (command[0], out.returncode, out.stderr[-2000:])
        assert "Traceback" not in out.stderr, out.stderr[-2000:]
        assert "arm 'left'" in out.stderr or "arm 'right'" in out.stderr, out.stderr[-2000:]

