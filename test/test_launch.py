"""Launch files are thin and everything they reference exists; nodes_for decides the graph."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from unittest import mock

import pytest

from mj_manipulator_ros.bringup.nodes import LAUNCH_ARGUMENTS, nodes_for
from mj_manipulator_ros.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))


def setup_kwargs() -> dict:
    """The arguments setup.py passes to setuptools.setup (setup.py run, setup() captured)."""
    captured = {}
    with mock.patch("setuptools.setup", side_effect=lambda **kw: captured.update(kw)):
        code = compile((ROOT / "setup.py").read_text(), "setup.py", "exec")
        cwd = Path.cwd()
        import os
        os.chdir(ROOT)
        try:
            exec(code, {"__name__": "__main__", "__file__": str(ROOT / "setup.py")})
        finally:
            os.chdir(cwd)
    return captured


def console_scripts() -> set[str]:
    return {e.split("=")[0].strip() for e in setup_kwargs()["entry_points"]["console_scripts"]}


def installed_files() -> set[str]:
    return {f for _, files in setup_kwargs()["data_files"] for f in files}


def test_there_are_two_launch_files() -> None:
    assert [p.name for p in LAUNCH_FILES] == ["real.launch.py", "sim.launch.py"]


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_is_thin_and_valid(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert functions == ["generate_launch_description"]
    mode = path.name.split(".")[0]
    assert f'generate("{mode}")' in path.read_text()
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert all(getattr(n, "module", "") == "mj_manipulator_ros.bringup.launch" for n in imports)
    # everything it starts exists: executables are console scripts, files are installed
    for node in nodes_for(mode):
        assert node.executable in console_scripts()
        for params in node.parameters:
            config = Path(params["config"])
            assert config.is_file()
            assert f"config/{config.name}" in installed_files()


def test_installed_data_files_cover_launch_config_plans_hil() -> None:
    files = installed_files()
    for expected in ["launch/real.launch.py", "launch/sim.launch.py", "config/openarm_bimanual.yaml",
                     "config/sim_openarm.yaml", "config/plans/openarm_crossing.yaml",
                     "config/plans/openarm_wave.yaml",
                     "package.xml", "resource/mj_manipulator_ros"]:
        assert expected in files, expected
    assert any(f.startswith("hil/") for f in files)


def test_launch_arguments_are_described() -> None:
    assert set(LAUNCH_ARGUMENTS) == {"config", "start_lead_s", "preflight_check", "use_sim_time",
                                     "record_dir", "max_stop_time_s", "max_stop_distance_m",
                                     "black_box_s"}
    assert all(len(doc) > 20 for _, doc in LAUNCH_ARGUMENTS.values())
    assert all(default == "" for default, _ in LAUNCH_ARGUMENTS.values())  # "" = unset = the file


def test_settings_are_declared_once() -> None:
    """Launch arguments, node parameters and CLI flags all come from the settings' fields, with
    the field's doc as their description."""
    import argparse

    from mj_manipulator_ros.apps.execution_node import node_parameters
    from mj_manipulator_ros.cli import build_parser
    from mj_manipulator_ros.core import overrides
    from mj_manipulator_ros.core.config import ExecutionSettings

    fields = {f.name: f for f in overrides.overridable(ExecutionSettings)}
    assert set(fields) == set(LAUNCH_ARGUMENTS) - {"config"}
    assert set(node_parameters()) == {"config", *fields} - {"use_sim_time"}  # ROS declares it
    execute = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
                   ).choices["execute"]
    flags = {a.dest: a for a in execute._actions}
    for name, f in fields.items():
        doc = f.metadata["doc"]
        assert doc in LAUNCH_ARGUMENTS[name][1]
        assert name == "use_sim_time" or doc in node_parameters()[name]
        assert f.metadata["override"] in flags[name].option_strings and doc in flags[name].help
        assert flags[name].default is None  # unset unless given
    args = execute.parse_args(["plan.yaml", "--config", "c.yaml", "--lead", "0.4"])
    assert overrides.from_arguments(args, ExecutionSettings) == {"start_lead_s": 0.4}


def test_docs_table_is_generated_from_the_fields() -> None:
    from mj_manipulator_ros.core import overrides
    from mj_manipulator_ros.core.config import ExecutionSettings

    table = overrides.settings_table(ExecutionSettings, "`execution` key")
    assert table in (ROOT / "docs/files.md").read_text(), \
        "docs/files.md's execution table is stale: run tools/settings_tables.py"


def test_real_mode_nodes() -> None:
    (node,) = nodes_for("real")
    assert node.executable == "execution_node" and node.name == "mj_manipulator_execution"
    p = node.parameters[0]
    assert p["config"].endswith("config/openarm_bimanual.yaml")
    # only what was given is passed: the node keeps the file's values for the rest
    assert p == {"config": p["config"], "use_sim_time": False}


def test_sim_mode_nodes_and_overrides() -> None:
    sim, execution = nodes_for("sim", start_lead_s="0.4", preflight_check="false")
    assert sim.executable == "sim_node" and execution.executable == "execution_node"
    assert sim.parameters[0]["use_sim_time"] is True
    assert execution.parameters[0] == {
        "config": sim.parameters[0]["config"], "use_sim_time": True, "start_lead_s": 0.4,
        "preflight_check": False}


@pytest.mark.parametrize("kwargs, message", [
    (dict(mode="hardware"), "mode must be one of"),
    (dict(mode="real", use_sim_time="maybe"), "use_sim_time: expected true or false, got 'maybe'"),
    (dict(mode="real", start_lead_s="-1"), "start_lead_s: must be >= 0"),
    (dict(mode="real", config="/nonexistent.yaml"), "cannot read config file"),
])
def test_bad_launch_arguments(kwargs, message) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        nodes_for(**kwargs)


def test_parameter_file_and_plain_form_agree(tmp_path) -> None:
    from mj_manipulator_ros.core.config import load_config
    import yaml

    cfg = load_config(ROOT / "config/openarm_bimanual.yaml")
    plain = {"arms": [{"name": a.name, "joint_names": list(a.joint_names), "action": a.action,
                       "joint_limits": {j: l.__dict__ for j, l in a.joint_limits.items()}}
                      for a in cfg.arms],
             "execution": cfg.execution.__dict__, "scene": cfg.extra["scene"]}
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump(plain))
    again = load_config(tmp_path / "plain.yaml")
    assert again.arms == cfg.arms and again.execution == cfg.execution
