"""`make setup` names a missing prerequisite in one line and says how to install it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _path_without(tmp_path: Path, missing: str) -> str:
    """A PATH of one folder linking every executable on PATH except `missing`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            if entry.name != missing and not (bin_dir / entry.name).exists():
                (bin_dir / entry.name).symlink_to(entry.path)
    return str(bin_dir)


@pytest.mark.parametrize("tool, hint", [("cmake", "apt-get install cmake"),
                                        ("g++", "apt-get install g++")])
def test_missing_tool_is_named(tmp_path: Path, tool: str, hint: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ROS_DISTRO"}
    env["PATH"] = _path_without(tmp_path, tool)
    env["VENV"] = str(tmp_path / "venv")  # never touch the real venv
    env["PYTHON"] = getattr(sys, "_base_executable", sys.executable)  # the venv's base python
    out = subprocess.run(["bash", str(ROOT / "tools/setup_env.sh")], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, out.stderr
    assert f"{tool} is missing" in lines[0] and hint in lines[0]
    assert not (tmp_path / "venv").exists()
