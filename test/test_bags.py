"""Records are rosbag2 (MCAP) bags: written with rosbags by a simulated execution over real DDS,
read back with an independent reader (test/bag_reader.py: mcap, mcap_ros2, rclpy)."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest
import yaml
from control_msgs.action import FollowJointTrajectory

from bag_reader import read_bag
from mj_manipulator_ros.check.preflight import scene_checker
from mj_manipulator_ros.check.timeline import load_recording, timeline_from_recording
from mj_manipulator_ros.core.errors import ConfigError
from mj_manipulator_ros.core.plan_io import plan_from_mapping
from mj_manipulator_ros.ros.bag_recorder import EVENTS_TOPIC, FEEDBACK
from mj_manipulator_ros.ros.executor import MultiArmExecutor
from test_execution_watch import swing_plan
from tiny_arm import tiny_config

ACTION = "/{}_arm_controller/follow_joint_trajectory"


@pytest.fixture
def recorded(tiny_sim, ros, tmp_path):
    """One synchronized swing of the tiny pair on sim time, recorded; what the executor saw."""
    node = tiny_sim()
    cfg = tiny_config(tmp_path, execution={"use_sim_time": True})
    feedback = {"left": 0, "right": 0}

    def count(arm, _msg):
        feedback[arm] += 1
    bag_dir = tmp_path / "run_bag"
    plan = swing_plan(duration=1.5)
    with MultiArmExecutor(cfg.executor, context=ros.context) as executor:
        executor.record_artifacts = node.scene.artifacts()
        executor.on_feedback = count
        report = executor.execute(plan, record=str(bag_dir))
    assert report.succeeded, report.summary()
    return {"bag": read_bag(bag_dir), "dir": bag_dir, "report": report, "plan": plan,
            "feedback": feedback, "cfg": cfg, "node": node}


def test_topics_types_counts_and_time_range(recorded) -> None:
    bag, report = recorded["bag"], recorded["report"]
    want = {"/joint_states": "sensor_msgs/msg/JointState", "/clock": "rosgraph_msgs/msg/Clock",
            EVENTS_TOPIC: "rcl_interfaces/msg/Log"}
    for arm in ("left", "right"):
        want[ACTION.format(arm) + "/_action/feedback"] = \
            "control_msgs/action/FollowJointTrajectory_FeedbackMessage"
        want[ACTION.format(arm) + "/_action/status"] = "action_msgs/msg/GoalStatusArray"
        want[f"/mj_manipulator/{arm}/goal"] = "control_msgs/action/FollowJointTrajectory_Goal"
    assert {t: s[0] for t, s in bag.schemas.items()} == want
    assert all(enc == "ros2msg" for _, enc, _ in bag.schemas.values())
    # metadata.yaml agrees with the file, topic by topic, and with the time range
    meta = bag.metadata
    counted = {t: len(bag.on(t)) for t in want}
    listed = {e["topic_metadata"]["name"]: e["message_count"] for e in meta["topics_with_message_count"]}
    assert listed == counted and meta["message_count"] == len(bag.messages)
    times = [m[1] for m in bag.messages]
    assert meta["starting_time"]["nanoseconds_since_epoch"] == min(times)
    assert meta["duration"]["nanoseconds"] == max(times) - min(times)
    # what was published: both arms' feedback as the executor received it, one goal per arm,
    # joint states throughout the motion, status transitions ending in SUCCEEDED (4)
    for arm in ("left", "right"):
        # the same messages: the recording waits until its subscriptions have matched every
        # publisher before the goals go out (regression: one short, the first feedback lost)
        got, seen = counted[ACTION.format(arm) + "/_action/feedback"], recorded["feedback"][arm]
        assert seen > 5 and got == seen
        (goal,) = bag.decoded(f"/mj_manipulator/{arm}/goal", FollowJointTrajectory.Goal)
        points = goal.trajectory.points
        np.testing.assert_allclose([p.positions for p in points], recorded["plan"][arm].positions)
        stamp = goal.trajectory.header.stamp
        assert stamp.sec + stamp.nanosec * 1e-9 == pytest.approx(report.start_stamp, abs=1e-9)
        fb = bag.decoded(ACTION.format(arm) + "/_action/feedback", FEEDBACK)
        assert list(fb[-1].feedback.joint_names) == [f"{arm}_j1", f"{arm}_j2"]
        statuses = bag.decoded(ACTION.format(arm) + "/_action/status")
        assert statuses[-1].status_list[-1].status == 4
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in bag.decoded("/joint_states")]
    end = max(r.result_at for r in report.arms.values())
    assert min(stamps) < report.start_stamp and max(stamps) > end - 0.05
    assert np.max(np.diff(sorted(stamps))) < 0.05  # 100 Hz of sim time, no hole


def test_events_say_what_the_executor_did(recorded) -> None:
    report = recorded["report"]
    events = recorded["bag"].decoded(EVENTS_TOPIC)
    kinds = [(e.function, e.name.split("/")[-1]) for e in events]
    for arm in ("left", "right"):
        for kind in ("goal_sent", "goal_accepted", "result"):
            assert (kind, arm) in kinds
    start = next(e for e in events if e.function == "start_stamp")
    assert start.stamp.sec + start.stamp.nanosec * 1e-9 == pytest.approx(report.start_stamp, abs=1e-6)
    results = [e for e in events if e.function == "result"]
    assert all("succeeded: stop confirmed" in e.msg for e in results)
    # in time order, as written
    t = [e.stamp.sec + e.stamp.nanosec * 1e-9 for e in events]
    assert t == sorted(t)


def test_plan_config_report_and_scene_travel_inside(recorded) -> None:
    bag = recorded["bag"]
    custom = bag.metadata["custom_data"]
    plan = plan_from_mapping(yaml.safe_load(custom["plan"]))
    for arm in ("left", "right"):
        np.testing.assert_allclose(plan[arm].positions, recorded["plan"][arm].positions)
        np.testing.assert_allclose(plan[arm].times, recorded["plan"][arm].times)
    assert json.loads(custom["report"]) == recorded["report"].to_dict()
    scene = mujoco.MjModel.from_xml_string(custom["scene_xml"])
    assert scene.nq == recorded["node"].scene.model.nq
    assert json.loads(custom["physics_step"])["timestep_s"] == scene.opt.timestep
    # the .mcap file alone carries them too (rosbag2's metadata record)
    inside = yaml.safe_load(bag.mcap_metadata["rosbag2"]["serialized_metadata"])
    assert inside["custom_data"] == custom
    # ros2 bag info's fields
    meta = bag.metadata
    assert meta["version"] >= 8 and meta["storage_identifier"] == "mcap"
    assert meta["relative_file_paths"] and meta["files"][0]["message_count"] == meta["message_count"]
    for entry in meta["topics_with_message_count"]:
        tm = entry["topic_metadata"]
        assert tm["serialization_format"] == "cdr" and tm["type_description_hash"].startswith("RIHS01_")


def test_recorded_replay_of_the_bag_equals_the_json_lines_path(recorded, tmp_path) -> None:
    """The same messages as JSON lines (the old record format, written here from the
    independent reader) and as the bag (directory, and its .mcap file alone): one recording, one
    verdict."""
    bag, bag_dir, cfg = recorded["bag"], recorded["dir"], recorded["cfg"]
    lines = tmp_path / "states.jsonl"
    lines.write_text("".join(json.dumps({"t": m.header.stamp.sec + m.header.stamp.nanosec * 1e-9,
                                         "name": list(m.name), "position": list(m.position)}) + "\n"
                             for m in bag.decoded("/joint_states")))
    (mcap_file,) = bag_dir.glob("*.mcap")
    joints = {a.name: a.joint_names for a in cfg.executor.arms}
    checker = scene_checker(cfg.executor)
    verdicts = []
    for source in (lines, bag_dir, mcap_file):
        rec = load_recording(source)
        verdicts.append((rec, checker.check(timeline=timeline_from_recording(rec, joints),
                                            mode="recorded").to_dict()))
    (r0, v0), *rest = verdicts
    for rec, verdict in rest:
        assert rec.names == r0.names
        np.testing.assert_array_equal(rec.times, r0.times)
        np.testing.assert_array_equal(rec.positions, r0.positions)
        assert verdict == v0
    assert v0["colliding_states"] == 0 and len(r0.times) > 100


def test_an_existing_bag_is_never_overwritten_and_nothing_moves(tiny_sim, ros, tmp_path) -> None:
    node = tiny_sim()
    cfg = tiny_config(tmp_path, execution={"use_sim_time": True})
    taken = tmp_path / "taken"
    taken.mkdir()
    with MultiArmExecutor(cfg.executor, context=ros.context) as executor:
        with pytest.raises(ConfigError, match=r"record: .*taken exists; a bag is never overwritten"):
            executor.execute(swing_plan(), record=str(taken))
    assert not node.arms["left"].tickets and not node.arms["right"].tickets
    assert list(taken.iterdir()) == []
