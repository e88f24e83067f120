"""The bring-up stages, read from hil/stages.yaml (the one source of truth), and the checklist
for people rendered from it (hil/CHECKLIST.md; a test keeps the two identical)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from mj_manipulator_ros.core import yaml_load
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.resources import share_dir


@dataclass(frozen=True)
class CheckSpec:
    name: str
    description: str
    threshold: Optional[float] = None
    unit: str = ""
    compare: str = "max"   # "max": measured <= threshold passes; "min": measured >= threshold
    #: hil/stages.yaml's threshold where the robot's configuration set another (None: not set;
    #: hil/setup_thresholds.py)
    default: Optional[float] = None

    def passes(self, measured: float) -> bool:
        if self.threshold is None:
            return bool(measured)
        return measured >= self.threshold if self.compare == "min" else measured <= self.threshold

    def criterion(self) -> str:
        if self.threshold is None:
            return self.description
        op = ">=" if self.compare == "min" else "<="
        text = f"{self.description}: {op} {self.threshold:g} {self.unit}".rstrip()
        if self.default is not None:
            text += f" (set by the configuration's hil.stages; hil/stages.yaml: {self.default:g})"
        return text


@dataclass(frozen=True)
class Stage:
    """One stage. ``number`` orders and gates; ``id`` names what it checks and, unless
    ``runner`` is given, the runner that measures it."""

    number: int
    id: str
    name: str
    moves: bool
    proves: str
    preconditions: tuple[str, ...]
    operator: str
    on_failure: str
    checks: tuple[CheckSpec, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    runner: str = ""

    @property
    def runner_name(self) -> str:
        return self.runner or self.id

    def check(self, name: str) -> CheckSpec:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"stage {self.number} has no check {name!r}")


@dataclass(frozen=True)
class Protocol:
    stages: tuple[Stage, ...]
    settings: Mapping[str, Any]
    source: Path

    def stage(self, number: int) -> Stage:
        for s in self.stages:
            if s.number == number:
                return s
        raise ConfigError(f"no stage {number}; stages are {[s.number for s in self.stages]}")

    def by_id(self, stage_id: str) -> Stage:
        for s in self.stages:
            if s.id == stage_id:
                return s
        raise ConfigError(f"no stage {stage_id!r}; stages are {[s.id for s in self.stages]}")


def stages_file() -> Path:
    return share_dir() / "hil" / "stages.yaml"


def load_protocol(path: Path | None = None) -> Protocol:
    path = path or stages_file()
    data = yaml_load.safe_load(path.read_text())
    stages = []
    for k, s in enumerate(data["stages"]):
        if s["number"] != k:
            raise ConfigError(f"{path}: stage {s['number']} is at position {k}; number them 0, 1, ...")
        checks = tuple(CheckSpec(name, **spec) for name, spec in s["checks"].items())
        stages.append(Stage(s["number"], s["id"], s["name"], bool(s["moves"]), s["proves"],
                            tuple(s["preconditions"]), s["operator"], s["on_failure"], checks,
                            s.get("params", {}), s.get("runner", "")))
    ids = [s.id for s in stages]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{path}: stage ids must be unique, got {ids}")
    return Protocol(tuple(stages), data["settings"], path)


def render_checklist(protocol: Protocol) -> str:
    """hil/CHECKLIST.md, generated."""
    out = ["# Hardware-in-the-loop bring-up checklist", "",
           "<!-- Generated from hil/stages.yaml by `mj-manipulator-ros hil --write-checklist`. "
           "Edit the YAML, not this file. -->", "",
           "A new two-arm setup is trusted at full speed only after these stages, in order. The "
           "tool (`mj-manipulator-ros hil --config CONFIG`) runs each stage's checks, records "
           "them in `hil/results/<UTC timestamp>/`, and runs a stage only when every earlier "
           "stage passed for the same setup fingerprint (configuration + controllers + joints). "
           "`--force --reason TEXT` overrides the gate and records why.", "",
           f"Before every stage that moves the robot the tool asks you to type "
           f"`{protocol.settings['confirm_word']}`: have the e-stop in reach. Ctrl-C at any "
           "time cancels every arm and records the interruption.", ""]
    for s in protocol.stages:
        out += [f"## Stage {s.number}: {s.name}{' (moves the robot)' if s.moves else ''}", "",
                f"Id: `{s.id}`", "",
                f"**Proves:** {s.proves}", "", "**Preconditions:**", ""]
        out += [f"- {p}" for p in s.preconditions]
        out += ["", f"**Operator:** {s.operator}", "", "**Pass criteria:**", ""]
        out += [f"- `{c.name}`: {c.criterion()}" for c in s.checks]
        if s.params:
            out += ["", "**Settings:** " + ", ".join(f"`{k}` = {v}" for k, v in s.params.items())]
        out += ["", f"**On failure:** {s.on_failure}", ""]
    return "\n".join(out)
