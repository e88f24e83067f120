"""Settings declared once: command-line flags, node parameters, launch arguments and the docs
tables are all generated from a settings dataclass's field metadata.

A field opts in with ``metadata={"override": FLAG}`` (``FLAG`` the command-line flag, e.g.
``"--lead"``); its ``doc`` is the help text everywhere. **One rule for "use the file":** an
override that was not given is *unset* (``None`` from argparse, an empty launch-argument string,
a node parameter left ``NOT_SET``), and an unset override never replaces the file's value.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import typing
from typing import Any, Mapping, TypeVar

from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.core.schema import from_mapping

T = TypeVar("T")


def overridable(cls: type) -> list[dataclasses.Field]:
    """The fields of ``cls`` that may be overridden from outside the file, in declaration order."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("override")]


def field_type(cls: type, f: dataclasses.Field) -> type:
    """The plain type (float, bool, int, str) of an overridable field."""
    tp = typing.get_type_hints(cls)[f.name]
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if typing.get_origin(tp) is typing.Union and len(args) == 1 else tp


def add_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """One flag per overridable field (booleans as ``--flag/--no-flag``); default unset."""
    for f in overridable(cls):
        tp = field_type(cls, f)
        doc = f"{f.metadata.get('doc', '')} (overrides the config's {f.name})"
        if tp is bool:
            parser.add_argument(f.metadata["override"], dest=f.name, default=None,
                                action=argparse.BooleanOptionalAction, help=doc)
        else:
            parser.add_argument(f.metadata["override"], dest=f.name, type=tp, default=None, help=doc)


def from_arguments(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The overrides given on the command line (unset ones left out)."""
    return {f.name: getattr(args, f.name) for f in overridable(cls)
            if getattr(args, f.name, None) is not None}


def parse_text(cls: type, name: str, text: Any, where: str = "launch argument") -> Any:
    """A launch argument (a string) as the field's type; ``""`` or None is unset (None).

    Raises:
        ConfigError: the text is not a value of the field's type.
    """
    if text is None or (isinstance(text, str) and text.strip() == ""):
        return None
    f = {x.name: x for x in overridable(cls)}[name]
    tp = field_type(cls, f)
    if not isinstance(text, str):
        value = text
    elif tp is bool:
        lowered = text.strip().lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise ConfigError(f"{where} {name}: expected true or false, got {text!r}")
        value = lowered in ("true", "1", "yes")
    else:
        try:
            value = tp(text)
        except ValueError:
            raise ConfigError(f"{where} {name}: expected a {tp.__name__}, got {text!r}") from None
    return check(cls, {name: value}, where)[name]


def check(cls: type, overrides: Mapping[str, Any], where: str = "override") -> dict[str, Any]:
    """Validate overrides like the file (type, min/max); unset (None) values are dropped."""
    given = {k: v for k, v in overrides.items() if v is not None}
    fields = {f.name: f for f in overridable(cls)}
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: not overridable: {unknown}; overridable: {sorted(fields)}")
    try:
        probe = from_mapping(cls, given, "")
    except ConfigError as exc:
        raise ConfigError(f"{where} {exc}") from None
    return {k: getattr(probe, k) for k in given}


def apply(settings: T, overrides: Mapping[str, Any], where: str = "override") -> T:
    """``settings`` with the given (set) overrides replaced, validated."""
    return dataclasses.replace(settings, **check(type(settings), overrides, where))


def settings_table(cls: type, key_header: str = "key") -> str:
    """A Markdown table of every file setting of ``cls``: key, default, meaning, override flag.
    docs/files.md holds this table; a test keeps the two equal."""
    rows = [f"| {key_header} | default | meaning | command line |", "| --- | --- | --- | --- |"]
    for f in dataclasses.fields(cls):
        if f.metadata.get("internal"):
            continue
        default = "" if f.default is dataclasses.MISSING else f.default
        if isinstance(default, enum.Enum):
            default = default.value
        shown = {True: "true", False: "false", None: "unset"}.get(default, default) \
            if isinstance(default, (bool, type(None))) else default
        flag = f.metadata.get("override")
        rows.append(f"| `{f.name}` | {shown} | {f.metadata.get('doc', '')} | "
                    f"{'`' + flag + '`' if flag else ''} |")
    return "\n".join(rows)
