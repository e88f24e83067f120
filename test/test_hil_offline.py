"""HIL bring-up without ROS: the checklist is generated from stages.yaml, the measurements on
synthetic joint states, the refusals (arguments, gate, confirmation) and stage 0."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from mj_manipulator_ros.core.plan import ArmTrajectory
from mj_manipulator_ros.hil import analysis as A
from mj_manipulator_ros.hil.runner import run_hil
from mj_manipulator_ros.hil.stages import load_protocol, render_checklist
from mj_manipulator_ros.resources import config_file

ROOT = Path(__file__).resolve().parents[1]


def test_checklist_is_generated_from_stages_yaml() -> None:
    assert (ROOT / "hil/CHECKLIST.md").read_text() == render_checklist(load_protocol()), \
        "hil/CHECKLIST.md is stale: run mj-manipulator-ros hil --write-checklist"


def test_protocol_has_nine_stages_with_thresholds() -> None:
    p = load_protocol()
    assert [s.number for s in p.stages] == list(range(9))
    assert [s.moves for s in p.stages] == [False, False] + [True] * 7
    assert p.stage(5).check("start_skew").threshold == 0.02
    assert p.stage(6).check("peers_stopped").passes(0.4) and not p.stage(6).check("peers_stopped").passes(0.6)
    assert p.stage(2).check("clean_runs").passes(10) and not p.stage(2).check("clean_runs").passes(9)


def samples(t, q, v=None, received=None):
    q = np.asarray(q, float).reshape(len(t), -1)
    v = np.zeros_like(q) if v is None else np.asarray(v, float).reshape(len(t), -1)
    names = tuple(f"j{k}" for k in range(q.shape[1]))
    return A.JointSamples(np.asarray(t, float), np.asarray(received if received is not None else t, float),
                          names, q, v)


def test_measurements_on_synthetic_joint_states() -> None:
    t = np.arange(0, 2, 0.01)
    q = np.where(t > 0.5, 0.2 * (t - 0.5), 0.0)
    s = samples(t, q, v=np.where((t > 0.5) & (t < 1.5), 0.2, 0.0), received=t + 0.003)
    assert A.rate_hz(s) == pytest.approx(100.0)
    assert A.clock_offset(s) == pytest.approx(-0.003)  # no offset: minus the minimum latency
    # the controller's clock 50 ms ahead; latency 3 ms plus up to 20 ms of jitter
    jitter = np.random.default_rng(0).uniform(0.0, 0.02, t.size)
    ahead = samples(t, q, received=t - 0.05 + 0.003 + jitter)
    assert A.clock_offset(ahead) == pytest.approx(0.047, abs=1e-4)
    assert A.onset(s, 0.0, 0.002) == pytest.approx(0.51, abs=1e-9)   # interpolated crossing
    assert A.onset(s, 0.0, 5.0) is None
    assert A.stop_time(s, 1.0, 0.02) == pytest.approx(0.5, abs=0.011)
    assert A.stop_time(samples(t, q, v=np.full_like(t, 0.5)), 1.0, 0.02) == np.inf
    assert A.limit_excess(np.array([[0.5, -2.1]]), np.array([-1, -2]), np.array([1, 2])) == pytest.approx(0.1)
    assert A.start_skew([0.01, -0.004, 0.002]) == pytest.approx(0.014)
    assert np.isnan(A.start_skew([])) and np.isnan(A.start_skew([0.01]))  # a skew needs two
    a = np.array([True, True, False, True])
    b = np.array([True, False, False, True])
    assert A.overlap_s(np.array([0.0, 1.0, 2.0, 3.0]), a, b) == pytest.approx(1.0)
    traj = ArmTrajectory(("j0",), [0.0, 1.0], [[0.0], [1.0]])
    s2 = samples([10.0, 10.5, 11.0], [0.0, 0.55, 1.0])
    assert A.tracking_error(s2, traj, 10.0) == pytest.approx(0.05)
    assert A.planned_onset(traj, 0.1) == pytest.approx(0.101, abs=1e-3)


def test_tracking_lag_is_the_delay_of_a_delayed_copy_of_the_plan() -> None:
    """A joint that is the plan delayed by L (an independent reference: the plan sampled at
    t - L) reads L, for a servo's 45 ms and an echo's 2 ms; a joint that never moved reads the
    whole motion's lead (far above either); no motion planned: NaN."""
    from mj_manipulator_ros.core.interpolation import rest_to_rest, sample
    from mj_manipulator_ros.core.plan import ArmTrajectory

    t = np.linspace(0.0, 1.0, 41)
    q, v = rest_to_rest(np.zeros(2), np.array([0.1, 0.0]), t)
    traj = ArmTrajectory(("j0", "j1"), t, q, v)
    stamps = np.arange(-0.2, 1.4, 0.01) + 10.0
    for lag in (0.045, 0.002):
        delayed = sample(traj, np.clip(stamps - 10.0 - lag, 0.0, 1.0))[0]
        assert A.tracking_lag(samples(stamps, delayed), traj, 10.0, 0) == \
            pytest.approx(lag, rel=0.05)
    still = np.zeros((len(stamps), 2))
    assert A.tracking_lag(samples(stamps, still), traj, 10.0, 0) > 0.2
    assert np.isnan(A.tracking_lag(samples(stamps, still), traj, 10.0, 1))


def test_yes_needs_sim_and_force_needs_reason(tmp_path) -> None:
    said = []
    cfg = str(config_file("sim_openarm.yaml"))
    assert run_hil(cfg, yes=True, results=str(tmp_path), say=said.append) == 2
    assert "--yes is accepted only with --sim" in said[-1]
    assert run_hil(cfg, sim=True, force=True, stage=3, results=str(tmp_path), say=said.append) == 2
    assert "--force needs --reason" in said[-1]


def test_gate_refuses_a_stage_before_earlier_ones_pass(tmp_path) -> None:
    said = []
    code = run_hil(str(config_file("sim_openarm.yaml")), sim=True, yes=True, stage=3,
                   results=str(tmp_path), say=said.append)
    assert code == 2 and "stage 3 is gated: stages up to 2 must pass first" in said[-1]


def test_motion_stage_refused_without_terminal_on_hardware(tmp_path) -> None:
    said = []
    code = run_hil(str(config_file("openarm_bimanual.yaml")), stage=2, force=True,
                   reason="testing the refusal", results=str(tmp_path), is_tty=False,
                   say=said.append)
    assert code == 3  # a stage that did not run has its own exit code (not 0, not a refusal)
    assert any("no interactive terminal: refusing" in s for s in said)
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    events = [json.loads(l) for l in (run / "checks.jsonl").read_text().splitlines()]
    assert {"event": "forced"}.items() <= next(e for e in events if e.get("event") == "forced").items()
    assert any(e.get("event") == "refused" for e in events)
    assert "gate forced" in (run / "summary.md").read_text()


def test_typed_confirmation_must_match(tmp_path) -> None:
    said = []
    code = run_hil(str(config_file("openarm_bimanual.yaml")), stage=2, force=True,
                   reason="testing the confirmation", results=str(tmp_path), is_tty=True,
                   ask=lambda prompt: "yes", say=said.append)
    assert code == 3  # "yes" is not the confirm word: the stage did not run


def test_stage_0_passes_on_openarm_and_records(tmp_path) -> None:
    said = []
    code = run_hil(str(config_file("openarm_bimanual.yaml")), stage=0, results=str(tmp_path),
                   say=said.append)
    assert code == 0, said
    state = json.loads((tmp_path / "state.json").read_text())
    assert list(state.values())[0]["last_passed"] == 0


def test_stage_0_fails_for_a_joint_missing_from_the_model(tmp_path) -> None:
    data = yaml.safe_load(config_file("sim_openarm.yaml").read_text())
    data["arms"][0]["joint_names"][6] = "openarm_left_wrist_roll"
    data["arms"][0]["joint_limits"].pop("openarm_left_joint7")
    cfg = tmp_path / "broken.yaml"
    cfg.write_text(yaml.safe_dump(data))
    said = []
    assert run_hil(str(cfg), stage=0, results=str(tmp_path / "r"), say=said.append) == 1
    text = "\n".join(said)
    assert "[FAIL] config_matches_model" in text
    assert "joint 'openarm_left_wrist_roll' is not in the scene model" in text
    assert "stage 0 FAILED" in text


def test_a_check_that_measured_nothing_blocks_its_stage() -> None:
    """No measurement is never a pass: None or NaN is not_measured and blocks the stage; a check
    that does not apply carries the measurement that says so."""
    from mj_manipulator_ros.hil.check_result import CheckStatus, check, not_applicable

    p = load_protocol()
    st = p.by_id("synchronized")
    for nothing in (None, float("nan")):
        r = check(st, "start_skew", "plan", nothing, "onset not measured for ['right']")
        assert r.status is CheckStatus.NOT_MEASURED and not r.passed
        assert r.to_dict()["status"] == "not_measured" and r.to_dict()["pass"] is False
    assert check(st, "start_skew", "plan", 0.001).passed
    assert not check(st, "start_skew", "plan", 0.5).passed
    na = not_applicable(p.by_id("each_arm_alone"), "alone_succeeded", "crossing/left", 97.0,
                        "collides when run alone")
    assert na.passed and na.status is CheckStatus.NOT_APPLICABLE and na.measured == 97.0


@pytest.mark.parametrize("inner", [float("nan"), None])
def test_soak_never_turns_nothing_measured_into_a_pass(monkeypatch, inner) -> None:
    """The soak stage aggregates the full-speed stage's checks over its runs: one run whose
    start skew was not measured (NaN or None) makes the aggregate not_measured (regression:
    max(worst, nan) recorded 'start_skew 0.0 passed'; None raised TypeError)."""
    from mj_manipulator_ros.hil import check_result as C
    from mj_manipulator_ros.hil import runners as R

    protocol = load_protocol()
    soak = next(s for s in protocol.stages if s.runner_name == "soak")
    repeated = protocol.by_id(soak.params["checks_of"])
    calls = []

    def one_run(session, stage, protocol_):
        calls.append(stage.number)
        skew = 0.004 if len(calls) % 2 else inner   # every other run: not measured
        return [C.check(stage, "start_skew", "plan", skew),
                C.check(stage, "tracking_error", "plan", 0.01)]
    monkeypatch.setitem(R.RUNNERS, repeated.runner_name, one_run)
    results = {r.name: r for r in R.RUNNERS["soak"](None, soak, protocol)}
    assert len(calls) == int(soak.params["runs"])
    assert results["start_skew"].status is C.CheckStatus.NOT_MEASURED
    assert results["start_skew"].measured is None
    assert results["tracking_error"].status is C.CheckStatus.PASSED
    assert results["tracking_error"].measured == 0.01


def test_worst_of_measurements() -> None:
    from mj_manipulator_ros.hil.check_result import worst

    assert worst([0.1, 0.3, 0.2]) == 0.3
    assert worst([0.1, float("nan")]) is None and worst([None, 0.1]) is None
    assert worst([0.1, float("inf")]) == float("inf")   # a failure stays a failure


def test_another_robot_with_arms_called_left_and_right_gets_no_openarm_plan(tmp_path) -> None:
    """The shipped plans are the OpenArm's: a robot whose arms are also called left and right,
    with its own joints, is brought up for none of them (before: all of them, and stage 0
    failed on joints it does not have) but for the plan made for it; the OpenArm's
    configuration still gets them all."""
    from mj_manipulator_ros.core.config import config_from_mapping, load_config
    from mj_manipulator_ros.hil.shipped_plans import GENERATED, shipped_plans
    from tiny_arm import tiny_mapping
    other = config_from_mapping(tiny_mapping(tmp_path))      # arms left, right; its own joints
    plans = shipped_plans(other)
    assert list(plans) == [GENERATED]
    assert {j for a in plans[GENERATED].arm_names for j in plans[GENERATED][a].joint_names} == \
        {j for a in other.arms for j in a.joint_names}
    openarm = shipped_plans(load_config(config_file("sim_openarm.yaml")))
    assert set(openarm) == {p.stem for p in (ROOT / "config" / "plans").glob("*.yaml")}
