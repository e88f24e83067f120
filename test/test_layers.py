"""The floors stay honest: which package may import which, and no import circles anywhere.

Imports are read from the source (every ``import``, also inside functions and ``TYPE_CHECKING``
blocks), so a lazy import that points up a floor counts as much as a top-level one. A fresh
interpreter also checks that importing the lower floors pulls no ROS module in at run time.
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import mj_manipulator_ros
import mj_manipulator_ros.core as core

PACKAGE = Path(mj_manipulator_ros.__file__).resolve().parent
ROS_MODULES = ("rclpy", "control_msgs", "trajectory_msgs", "sensor_msgs", "builtin_interfaces",
               "action_msgs", "rosgraph_msgs", "std_msgs", "rcl_interfaces")

#: floor -> the package's floors (and root modules) it may import, and third-party roots it must not
RULES = {
    "core": ({"core"}, {"mujoco", *ROS_MODULES}),
    "model": ({"core", "model", "resources"}, set(ROS_MODULES)),
    "check": ({"core", "model", "check", "resources"}, set(ROS_MODULES)),
    "ros": ({"core", "ros"}, {"mujoco"}),
    "sim": ({"core", "model", "ros", "sim", "resources"}, set()),
    "bringup": ({"core", "bringup", "resources"}, {"mujoco", *ROS_MODULES}),
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            # "from pkg import sub" imports a submodule when sub is one
            for a in node.names:
                candidate = f"{mod}.{a.name}"
                if _is_module(candidate):
                    out.add(candidate)
    return out


def _is_module(name: str) -> bool:
    if not name.startswith("mj_manipulator_ros."):
        return False
    rel = Path(*name.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def package_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        graph[name] = {m for m in imports_of(path) if m.startswith("mj_manipulator_ros.")
                       and _is_module(m)}
    return graph


def floor_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_graph_is_read() -> None:
    graph = package_graph()
    assert "mj_manipulator_ros.ros.executor" in graph
    assert "mj_manipulator_ros.core.config" in graph["mj_manipulator_ros.ros.executor"]


@pytest.mark.parametrize("floor", sorted(RULES))
def test_imports_point_down_only(floor: str) -> None:
    allowed, forbidden = RULES[floor]
    bad = []
    for path in (PACKAGE / floor).rglob("*.py"):
        for m in imports_of(path):
            root = m.split(".")[0]
            if root == "mj_manipulator_ros" and floor_of(m) and floor_of(m) not in allowed:
                bad.append(f"{module_name(path)} -> {m}")
            if root in forbidden:
                bad.append(f"{module_name(path)} -> {m}")
    assert not bad, f"{floor} imports up or across: {sorted(bad)}"


def test_no_import_circles() -> None:
    graph = package_graph()
    # a package's __init__ is imported with every module below it: count it as its parent edge
    cycles = _cycles(graph)
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each as a path."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_circle() -> None:
    """The circle test can fail: a made-up graph with a circle is reported."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_core_imports_no_ros_or_mujoco_at_run_time() -> None:
    modules = [f"mj_manipulator_ros.core.{m.name}" for m in pkgutil.iter_modules(core.__path__)]
    assert modules, "the core package has no modules to check"
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {(*ROS_MODULES, 'mujoco')!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"core imported: {out.stdout.strip()}"


def test_package_root_holds_only_cli_resources_and_packages() -> None:
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert loose == ["__init__.py", "cli.py", "resources.py"], loose
