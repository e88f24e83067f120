"""Which ROS parameters were given: only those override a configuration file."""

from __future__ import annotations

import yaml

from mj_manipulator_ros.ros.params import given_parameter_names, parameter_overrides


def test_given_names_from_arguments_and_parameter_files(tmp_path) -> None:
    f = tmp_path / "params.yaml"
    f.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"config": "x.yaml", "sim": {
        "rate": 2}}}, "other_node": {"ros__parameters": {"serve": ["left"]}}}))
    argv = ["prog", "-p", "not_ros:=1", "--ros-args", "-p", "real_time_factor:=0.5",
            "--param", "my_node:use_sim_time:=true", "--params-file", str(f), "--", "-p", "x:=1"]
    assert given_parameter_names(argv) == {"real_time_factor", "use_sim_time", "config",
                                           "sim.rate", "serve"}
    assert given_parameter_names(["prog"]) == set()


def test_defaults_every_node_declares_are_not_given(ros) -> None:
    """use_sim_time is declared (false) on every node; it is not an override unless given
    (regression: it overrode sim.use_sim_time: true in the file, so no /clock was published)."""
    assert "use_sim_time" not in parameter_overrides(ros.context, ["prog"])
    from mj_manipulator_ros.ros.context import RosContext

    argv = ["prog", "--ros-args", "-p", "use_sim_time:=true", "-p", "real_time_factor:=0.5"]
    with RosContext(args=argv) as given:
        assert parameter_overrides(given.context, argv) == {"use_sim_time": True,
                                                            "real_time_factor": 0.5}
