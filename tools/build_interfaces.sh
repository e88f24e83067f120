#!/usr/bin/env bash
# Build interfaces/control_msgs with rosidl against the ROS 2 wheels in a venv, and install it
# into the venv's prefix (libraries in $VENV/lib, the Python package in its site-packages, the
# type descriptions in $VENV/share/control_msgs). Usage: tools/build_interfaces.sh VENV [ROS]
# With ROS=jazzy the files of interfaces/overlays/jazzy replace theirs in a staged copy.
set -euo pipefail
VENV="${1:?usage: build_interfaces.sh VENV [ROS]}"
ROS="${2:-kilted}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="$(cd "$VENV" && pwd)"
BUILD="$ROOT/build/interfaces/$ROS/control_msgs"
SOURCE="$ROOT/interfaces/control_msgs"
if [ -d "$ROOT/interfaces/overlays/$ROS" ]; then
  SOURCE="$ROOT/build/interfaces/$ROS/source"
  rm -rf "$SOURCE" && mkdir -p "$SOURCE"
  cp -r "$ROOT/interfaces/control_msgs/." "$SOURCE/"
  cp -r "$ROOT/interfaces/overlays/$ROS/." "$SOURCE/"
fi
LOG="$BUILD/build.log"
mkdir -p "$BUILD"

# rosidl finds its generators and typesupports through the ament index of the prefix.
export AMENT_PREFIX_PATH="$PREFIX${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export CMAKE_PREFIX_PATH="$PREFIX${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"

run() {
  if ! "$@" >>"$LOG" 2>&1; then
    echo "build_interfaces: failed: $*" >&2
    tail -n 40 "$LOG" >&2
    echo "build_interfaces: full log in $LOG" >&2
    exit 1
  fi
}
: > "$LOG"
run cmake -S "$SOURCE" -B "$BUILD" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" \
  -DPython3_EXECUTABLE="$PREFIX/bin/python" \
  -DBUILD_TESTING=OFF \
  -DCMAKE_PROJECT_INCLUDE="$ROOT/tools/cmake/wheel_python_includes.cmake"
run cmake --build "$BUILD" -j "$(nproc)"
run cmake --install "$BUILD"
