"""Strict mapping -> frozen dataclass conversion for configuration files.

Each dataclass field may carry ``metadata={"doc": ..., "min": ..., "max": ...}``; a field with
``"internal": True`` is set by code, never read from a file. Unknown keys,
missing required keys, wrong types and out-of-range numbers raise
:class:`~mj_manipulator_ros.core.errors.ConfigError` naming the key path, what was expected and
what came.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import math
import typing
from typing import Any, Mapping, TypeVar

from mj_manipulator_ros.core.errors import ConfigError

T = TypeVar("T")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def convert(value: Any, tp: Any, path: str) -> Any:
    """Check/convert one value to the annotated type ``tp`` (float, int, bool, str, an Enum of
    strings (by value), tuple[str, ...], Mapping[K, V], Optional[...], Union[...], a dataclass)."""
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        errors = []
        for arg in args:
            try:
                return convert(value, arg, path)
            except ConfigError as exc:
                errors.append(str(exc))
        if len(errors) == 1:
            raise ConfigError(errors[0])
        raise ConfigError(f"{path}: expected one of {[_type_name(a) for a in args]}, got {value!r}")
    if dataclasses.is_dataclass(tp):
        return from_mapping(tp, value, path)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        choices = [m.value for m in tp]
        if isinstance(value, tp):
            return value
        if not isinstance(value, str) or value not in choices:
            raise ConfigError(f"{path}: expected one of {choices}, got {value!r}")
        return tp(value)
    if origin in (collections.abc.Mapping, dict):
        key_tp, value_tp = typing.get_args(tp)
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a mapping of {_type_name(key_tp)} -> "
                              f"{_type_name(value_tp)}, got {value!r}")
        return {convert(k, key_tp, f"{path} key"): convert(v, value_tp, f"{path}.{k}")
                for k, v in value.items()}
    if origin is tuple:
        (item,) = [a for a in typing.get_args(tp) if a is not Ellipsis]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected a list of {_type_name(item)}, got {value!r}")
        return tuple(convert(v, item, f"{path}[{i}]") for i, v in enumerate(value))
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true or false, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        try:
            value = float(value)
        except OverflowError:
            raise ConfigError(f"{path}: expected a finite number, got {value} (too large for "
                              "a float)") from None
        if not math.isfinite(value):
            raise ConfigError(f"{path}: expected a finite number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    raise TypeError(f"schema: unsupported annotation {tp!r} at {path}")  # programming error


def from_mapping(cls: type[T], data: Any, path: str) -> T:
    """Build dataclass ``cls`` from a mapping, strictly."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping with keys "
                          f"{[f.name for f in dataclasses.fields(cls)]}, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and not f.metadata.get("internal")}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}; allowed: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, f in fields.items():
        key_path = f"{path}.{name}" if path else name
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{key_path}: required key missing")
            continue
        value = convert(data[name], hints[name], key_path)
        if value == "" and f.default is dataclasses.MISSING:
            raise ConfigError(f"{key_path}: expected a non-empty string, got ''")
        lo, hi = f.metadata.get("min"), f.metadata.get("max")
        if value is not None and lo is not None and value < lo:
            raise ConfigError(f"{key_path}: must be >= {lo}, got {value}")
        if value is not None and hi is not None and value > hi:
            raise ConfigError(f"{key_path}: must be <= {hi}, got {value}")
        kwargs[name] = value
    return cls(**kwargs)



def check_acyclic(data: Any, path: str) -> None:
    """Refuse a structure that contains itself (a YAML alias to an enclosing node, e.g.
    ``a: &x [*x]``): every later check would recurse into it or print it without end.

    Raises:
        ConfigError: naming the key path where the structure refers back to itself.
    """
    stack: list[tuple[Any, str, frozenset]] = [(data, path, frozenset())]
    while stack:
        node, where, enclosing = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        if id(node) in enclosing:
            raise ConfigError(f"{where}: refers to a node that contains it (a YAML alias to "
                              "itself); expected a finite tree of values")
        inner = enclosing | {id(node)}
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            sub = f"{where}[{key}]" if isinstance(node, list) else f"{where}.{key}"
            stack.append((value, sub, inner))
