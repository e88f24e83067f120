"""A robot's own bring-up thresholds: the configuration's ``hil.stages`` over hil/stages.yaml.

hil/stages.yaml holds every threshold and parameter a stage uses, measured on the simulated
OpenArm pair. Another robot settles, holds and tracks differently (an ALOHA's waist servo
settles a controlled stop 30 ms later than the OpenArm's, reproducibly): its configuration
may set any of them, by stage id::

    hil:
      stages:
        stop_latency:
          checks: {controlled_stop_time_error: 0.35}   # a check's threshold
          params: {listen_s: 6.0}                      # a stage parameter

Everything is validated before anything runs: an unknown stage, check or parameter is refused
with the names that exist; a pass/fail check has no threshold to set; a threshold is a finite
number >= 0, a parameter of the type its default has. A check whose threshold was set says so
in its criterion, with the default it replaced; the setup's fingerprint covers the section
(hil/records.py), so a stage passed under other thresholds does not open the gate.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Optional

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.hil.stages import Protocol, Stage

#: the keys of a configuration's ``hil`` section
HIL_KEYS = ("plans", "stages")
#: the keys of one stage's entry under ``hil.stages``
STAGE_KEYS = ("checks", "params")


def with_setup(protocol: Protocol, hil: Optional[Mapping[str, Any]]) -> Protocol:
    """``protocol`` with the thresholds and parameters the configuration's ``hil`` section
    sets (None or no ``stages``: unchanged).

    Raises:
        ConfigError: naming the key path, what was given and what is allowed.
    """
    if hil is None:
        return protocol
    _keys(hil, HIL_KEYS, "hil")
    entries = hil.get("stages")
    if entries is None:
        return protocol
    if not isinstance(entries, Mapping):
        raise ConfigError(f"hil.stages: expected a mapping of stage id to "
                          f"{{checks, params}}, got {type(entries).__name__} {entries!r}")
    ids = [s.id for s in protocol.stages]
    changed = {}
    for stage_id, entry in entries.items():
        if stage_id not in ids:
            raise ConfigError(f"hil.stages: no stage {stage_id!r}; stages are {ids}")
        changed[stage_id] = _stage(protocol.by_id(stage_id), entry, f"hil.stages.{stage_id}")
    stages = tuple(changed.get(s.id, s) for s in protocol.stages)
    return dataclasses.replace(protocol, stages=stages)


def _keys(entry: Any, allowed: tuple[str, ...], where: str) -> None:
    """``entry`` is a mapping whose keys are all in ``allowed``."""
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: expected a mapping with keys {list(allowed)}, got "
                          f"{type(entry).__name__} {entry!r}")
    unknown = sorted(set(map(str, entry)) - set(allowed))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {list(allowed)}")


def _stage(stage: Stage, entry: Any, where: str) -> Stage:
    _keys(entry, STAGE_KEYS, where)
    checks = list(stage.checks)
    for name, value in (entry.get("checks") or {}).items():
        names = [c.name for c in checks]
        if name not in names:
            raise ConfigError(f"{where}.checks: stage {stage.number} ({stage.id}) has no check "
                              f"{name!r}; its checks are {names}")
        k = names.index(name)
        spec = checks[k]
        if spec.threshold is None:
            raise ConfigError(f"{where}.checks.{name}: a pass/fail check ({spec.description}) "
                              "has no threshold to set")
        checks[k] = dataclasses.replace(spec, threshold=_number(value, f"{where}.checks.{name}",
                                                                spec.unit),
                                        default=spec.threshold)
    params = dict(stage.params)
    for name, value in (entry.get("params") or {}).items():
        if name not in params:
            raise ConfigError(f"{where}.params: stage {stage.number} ({stage.id}) has no "
                              f"parameter {name!r}; its parameters are {sorted(params)}")
        params[name] = _like(params[name], value, f"{where}.params.{name}")
    return dataclasses.replace(stage, checks=tuple(checks), params=params)


def _number(value: Any, where: str, unit: str = "") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{where}: expected a finite number >= 0{f' ({unit})' if unit else ''},"
                          f" got {type(value).__name__} {value!r}")
    return float(value)


def _like(default: Any, value: Any, where: str) -> Any:
    """``value`` as a parameter whose hil/stages.yaml value is ``default``."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false (as its default {default}), got "
                              f"{type(value).__name__} {value!r}")
        return value
    if isinstance(default, (int, float)):
        number = _number(value, where)
        if isinstance(default, int) and not float(number).is_integer():
            raise ConfigError(f"{where}: expected a whole number (as its default {default}), "
                              f"got {value!r}")
        return int(number) if isinstance(default, int) else number
    if isinstance(default, (list, tuple)):
        # a list of names where its default is one (an empty default is: "every one")
        names = all(isinstance(v, str) for v in default)
        what = "names" if names else "numbers"
        if not isinstance(value, (list, tuple)) or (not value and default):
            raise ConfigError(f"{where}: expected a non-empty list of {what} (as its default "
                              f"{list(default)}), got {type(value).__name__} {value!r}")
        if names:
            bad = [v for v in value if not isinstance(v, str) or not v.strip()]
            if bad:
                raise ConfigError(f"{where}: expected names (strings), got {bad!r}")
            return list(value)
        return [_number(v, f"{where}[{k}]") for k, v in enumerate(value)]
    if isinstance(default, str):
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: expected a non-empty string (as its default "
                              f"{default!r}), got {type(value).__name__} {value!r}")
        return value
    raise ConfigError(f"{where}: this parameter (default {default!r}) cannot be set here")

