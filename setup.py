"""ament_python package definition for mj_manipulator_ros.

Builds with `colcon build` in a ROS 2 workspace and installs in editable mode with pip for
`make setup`. Data files follow ament conventions: the package marker goes into the ament
index, and launch/, config/ (with config/plans/) and hil/ into share/mj_manipulator_ros/.
"""
import os
from glob import glob

from setuptools import Extension, find_packages, setup

PACKAGE = "mj_manipulator_ros"


def tree(folder: str) -> list[tuple[str, list[str]]]:
    """data_files entries installing every file below `folder` into share/<package>/<folder>."""
    entries = []
    for dirpath, _dirnames, filenames in os.walk(folder):
        files = [os.path.join(dirpath, f) for f in sorted(filenames) if not f.endswith(".pyc")]
        if files and "results" not in dirpath.split(os.sep):
            entries.append((os.path.join("share", PACKAGE, dirpath), files))
    return entries


def mujoco_kernel() -> list[Extension]:
    """The replay checker's contact loop (check/_contact_kernel.c), built against the MuJoCo of
    the environment being installed into: its headers and library ship in the mujoco wheel.
    Found from the interpreter's prefix, not by importing mujoco (pip builds in an isolated
    environment where the target's packages are not importable). None found: not built (the
    Python reference implementation runs)."""
    import sysconfig

    for key in ("platlib", "purelib"):
        folder = os.path.join(sysconfig.get_path(key), "mujoco")
        libs = sorted(glob(os.path.join(folder, "libmujoco.so.*")))
        if os.path.isdir(os.path.join(folder, "include", "mujoco")) and libs:
            return [Extension(f"{PACKAGE}.check._contact_kernel",
                              [f"{PACKAGE}/check/_contact_kernel.c"],
                              include_dirs=[os.path.join(folder, "include")],
                              extra_compile_args=["-O2"],
                              extra_link_args=[libs[-1], f"-Wl,-rpath,{folder}"],
                              optional=True)]
    return []


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*", "bench"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        *tree("config"),
        *tree("hil"),
    ],
    # MuJoCo >= 3.3: MjSpec.attach with frames and prefixes, geom margins summed per pair (the
    # replay checker verifies that rule when it is built); tested with 4.0
    install_requires=["setuptools", "numpy", "pyyaml", "mujoco>=3.3", "rosbags>=0.10", "mcap>=1.2",
                      "mcap-ros2-support>=0.5",
                      # rosbags writes metadata.yaml with ruamel.yaml: its C emitter closes a bag
                      # holding the scene and the plan in 0.01 s instead of 0.8 s
                      "ruamel.yaml.clib"],
    # four loops in C (plain CPython API, no numpy headers), each optional: without a compiler
    # the Python reference implementation runs. The actuator twin's tick loop (a warning when
    # missing), the position controller's steady cycles and the stop search's rate samples (no
    # FMA contraction: the same rounding as the numpy reference implementations); the replay's
    # states (MuJoCo's own functions, the same figures as the reference).
    ext_modules=[Extension(f"{PACKAGE}.sim.{name}", [f"{PACKAGE}/sim/{name}.c"],
                           extra_compile_args=["-O2", "-ffp-contract=off"], optional=True)
                 for name in ("_twin_kernel", "_follow_kernel")]
                + [Extension(f"{PACKAGE}.core._rate_kernel", [f"{PACKAGE}/core/_rate_kernel.c"],
                             extra_compile_args=["-O2", "-ffp-contract=off"], optional=True)]
                + mujoco_kernel(),
    zip_safe=False,
    maintainer="mj_manipulator_ros maintainers",
    maintainer_email="maintainers@mj-manipulator-ros.invalid",
    description="Synchronized multi-arm FollowJointTrajectory execution, MuJoCo simulated "
    "controllers, plan-replay collision checking and HIL bring-up for ROS 2.",
    license="Apache-2.0",
    python_requires=">=3.10",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "mj-manipulator-ros = mj_manipulator_ros.cli:main",
            "execution_node = mj_manipulator_ros.apps.execution_node:main",
            "sim_node = mj_manipulator_ros.sim.sim_node:main",
            "scripted_controller = mj_manipulator_ros.ros.scripted_controller:main",
        ],
    },
)
