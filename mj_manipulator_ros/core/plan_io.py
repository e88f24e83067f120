"""Plan files (YAML or JSON, chosen by extension). Format, documented in docs/files.md::

    arms:
      left:
        joint_names: [j1, j2]
        points:
          - {time_from_start: 0.0, positions: [0, 0], velocities: [0, 0]}
          - {time_from_start: 1.0, positions: [0.5, 0.2], velocities: [0, 0]}

``velocities`` and ``accelerations`` are optional (for every point or none).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Mapping

import yaml

from mj_manipulator_ros.core import yaml_load
from mj_manipulator_ros.core.errors import ConfigError, PlanError
from mj_manipulator_ros.core.plan import ArmTrajectory, MultiArmPlan
from mj_manipulator_ros.core.schema import check_acyclic


def plan_from_mapping(data: Any, source: str = "plan") -> MultiArmPlan:
    if not isinstance(data, Mapping) or set(data) != {"arms"} or not isinstance(data["arms"], Mapping):
        raise PlanError(f"{source}: expected a mapping with exactly one key 'arms' "
                        "(arm name -> {joint_names, points})")
    arms = {}
    for arm, body in data["arms"].items():
        if not isinstance(body, Mapping) or set(body) != {"joint_names", "points"}:
            got = sorted(body) if isinstance(body, Mapping) else body
            raise PlanError(f"expected keys ['joint_names', 'points'], got {got}", arm=str(arm))
        if not isinstance(body["points"], list):
            raise PlanError("points: expected a list of waypoints", arm=str(arm))
        arms[str(arm)] = ArmTrajectory.from_points(str(arm), body["joint_names"], body["points"])
    return MultiArmPlan(arms)


def plan_to_mapping(plan: MultiArmPlan) -> dict:
    out: dict[str, Any] = {"arms": {}}
    for arm, t in plan.arms.items():
        points = []
        for i in range(t.times.size):
            p: dict[str, Any] = {"time_from_start": float(t.times[i]),
                                 "positions": [float(x) for x in t.positions[i]]}
            if t.velocities is not None:
                p["velocities"] = [float(x) for x in t.velocities[i]]
            if t.accelerations is not None:
                p["accelerations"] = [float(x) for x in t.accelerations[i]]
            points.append(p)
        out["arms"][arm] = {"joint_names": list(t.joint_names), "points": points}
    return out


def yaml_float(x: float) -> str:
    """``x`` as PyYAML's safe dumper writes a float (YAML 1.1, read back exactly by the safe
    loader): the shortest round-trip repr, ``.nan`` / ``.inf`` / ``-.inf``, and a dot before
    an exponent (``1e-05`` is a string to YAML 1.1; ``1.0e-05`` a float)."""
    if x != x:
        return ".nan"
    if x in (math.inf, -math.inf):
        return ".inf" if x > 0 else "-.inf"
    text = repr(float(x)).lower()
    if "." not in text and "e" in text:
        text = text.replace("e", ".0e", 1)
    return text


def plan_yaml(plan: MultiArmPlan) -> str:
    """The plan's YAML text: :func:`plan_to_mapping`, every point one flow mapping on its own
    line, read back by any YAML loader to the same mapping, floats exact. Made without PyYAML's
    representer (per value in Python: 1.0 s for the 1,401-point crossing plan on a slow 2-core
    machine, the time a recorded execution then spent before its stamp); about 20x faster."""
    lines = ["arms:"]
    row = lambda values: "[" + ", ".join(map(yaml_float, values)) + "]"  # noqa: E731
    for arm, t in plan.arms.items():
        lines.append(f"  {json.dumps(arm)}:")
        lines.append("    joint_names: [" + ", ".join(map(json.dumps, t.joint_names)) + "]")
        lines.append("    points:")
        for i in range(t.times.size):
            parts = [f"time_from_start: {yaml_float(t.times[i])}",
                     f"positions: {row(t.positions[i].tolist())}"]
            if t.velocities is not None:
                parts.append(f"velocities: {row(t.velocities[i].tolist())}")
            if t.accelerations is not None:
                parts.append(f"accelerations: {row(t.accelerations[i].tolist())}")
            lines.append("    - {" + ", ".join(parts) + "}")
    return "\n".join(lines) + "\n"


#: plans read in this process, by the kind and digest of their text: the same text gives the
#: same trajectories (frozen: read-only arrays), each caller its own plan of them (a YAML plan
#: of 1,401 points takes about 0.8 s to construct)
_read: "OrderedDict[tuple[bool, bytes], MultiArmPlan]" = OrderedDict()
_read_lock = threading.Lock()
PLANS_KEPT = 16


def load_plan(path: str | Path) -> MultiArmPlan:
    """Read a plan file (.yaml/.yml or .json). The file is read every time; a text read before
    in this process gives the plan made from it then."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise PlanError(f"{path}: unknown plan file extension {suffix!r}; expected .yaml, .yml or .json")
    try:
        text = path.read_text()
    except OSError as exc:
        raise PlanError(f"cannot read plan file {path}: {exc.strerror}") from None
    key = (suffix == ".json", hashlib.sha256(text.encode()).digest())
    with _read_lock:
        if key in _read:
            _read.move_to_end(key)
            return MultiArmPlan(dict(_read[key].arms))   # its own mapping of frozen arms
    plan = _parse_plan(text, path, suffix)
    with _read_lock:
        _read[key] = plan
        while len(_read) > PLANS_KEPT:
            _read.popitem(last=False)
    return plan


def _parse_plan(text: str, path: Path, suffix: str) -> MultiArmPlan:
    try:
        data = json.loads(text) if suffix == ".json" else yaml_load.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise PlanError(f"{path}: cannot parse: {exc}") from None
    try:
        check_acyclic(data, "plan")
    except ConfigError as exc:
        raise PlanError(f"{path}: {exc}") from None
    try:
        return plan_from_mapping(data, str(path))
    except PlanError as exc:
        raise type(exc)(f"{path}: {exc}") from None


def save_plan(plan: MultiArmPlan, path: str | Path) -> None:
    path = Path(path)
    data = plan_to_mapping(plan)
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps(data, indent=1))
    else:
        path.write_text(yaml_load.safe_dump(data, sort_keys=False, default_flow_style=None,
                                            width=120))
