"""The ROS 2 install path: ``colcon build --packages-select mj_manipulator_ros`` in a fresh
workspace (colcon from PyPI, with the venv's ROS wheels), then what ``ros2 run`` and
``ros2 launch`` need: the ament index marker, ``share/mj_manipulator_ros/{package.xml, launch,
config, hil}``, the executables in ``lib/mj_manipulator_ros/``; one installed executable is run.

Not tested here: ``ros2 run``/``ros2 launch`` themselves (ros2cli and launch are not on PyPI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "mj_manipulator_ros"


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        pytest.skip(f"not a git checkout: {out.stderr.strip()}")
    return out.stdout.split()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    colcon = Path(sys.executable).with_name("colcon")
    assert colcon.is_file(), "make setup installs colcon-core, colcon-ros, colcon-python-setup-py"
    ws = tmp_path_factory.mktemp("ws")
    src = ws / "src" / PACKAGE
    for rel in tracked_files():  # the package as a clone has it, nothing built or generated
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    out = subprocess.run([str(colcon), "build", "--packages-select", PACKAGE, "--base-paths", "src"],
                         cwd=ws, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return ws / "install" / PACKAGE


def test_install_layout(workspace: Path) -> None:
    share = workspace / "share" / PACKAGE
    assert (workspace / "share/ament_index/resource_index/packages" / PACKAGE).is_file()
    assert (share / "package.xml").is_file()
    assert sorted(p.name for p in (share / "launch").iterdir()) == ["real.launch.py", "sim.launch.py"]
    assert (share / "config/sim_openarm.yaml").is_file()
    assert (share / "config/plans/openarm_crossing.yaml").is_file()
    assert (share / "hil/stages.yaml").is_file()
    lib = workspace / "lib" / PACKAGE
    for exe in ("mj-manipulator-ros", "execution_node", "sim_node", "scripted_controller"):
        assert os.access(lib / exe, os.X_OK), exe


def test_installed_executable_runs(workspace: Path) -> None:
    """The installed ``mj-manipulator-ros selfcheck`` runs from the install space (its package
    and its share/ folder, not the source tree)."""
    site = next((workspace / "lib").glob("python3*/site-packages"))
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "AMENT_PREFIX_PATH": f"{workspace}{os.pathsep}{os.environ.get('AMENT_PREFIX_PATH', '')}"}
    where = subprocess.run(
        [sys.executable, "-c", "import mj_manipulator_ros, mj_manipulator_ros.resources as r; "
                               "print(mj_manipulator_ros.__file__); print(r.share_dir())"],
        env=env, capture_output=True, text=True, timeout=60, cwd=workspace)
    assert where.returncode == 0, where.stderr
    module, share = where.stdout.split()
    assert module.startswith(str(site)) and share == str(workspace / "share" / PACKAGE)
    out = subprocess.run([str(workspace / "lib" / PACKAGE / "mj-manipulator-ros"), "selfcheck"],
                         env=env, capture_output=True, text=True, timeout=120, cwd=workspace)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
