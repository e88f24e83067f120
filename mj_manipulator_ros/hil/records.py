"""Bring-up records and the gate.

``hil/results/<UTC timestamp>/``: ``checks.jsonl`` (every check and event, one JSON per line),
``summary.md``, ``timeline.png`` (joint positions of every arm against time, the start stamp and
each arm's motion onset marked). ``hil/results/state.json`` keeps, per setup fingerprint, the
last stage passed: a stage runs only when every earlier one passed for the same fingerprint.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Optional, Sequence

from mj_manipulator_ros.core.config import ExecutorConfig


def fingerprint(config: ExecutorConfig, target: str) -> str:
    """Hash of what the stages prove things about: arms, joints (in order), actions, limits,
    execution settings, scene, the bring-up's own section (``hil``: its plans and thresholds)
    and the target ("hardware" or "sim")."""
    doc = {"target": target,
           "arms": [{"name": a.name, "joints": list(a.joint_names), "action": a.action_name,
                     "limits": {j: l.__dict__ for j, l in sorted(a.joint_limits.items())}}
                    for a in config.arms],
           "execution": config.execution.__dict__, "scene": config.extra.get("scene"),
           "hil": config.extra.get("hil")}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


class GateState:
    def __init__(self, root: Path) -> None:
        self.path = root / "state.json"
        self.data = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def last_passed(self, fp: str) -> int:
        return int(self.data.get(fp, {}).get("last_passed", -1))

    def record_pass(self, fp: str, stage: int, results_dir: Path, forced: bool) -> None:
        entry = self.data.setdefault(fp, {"last_passed": -1})
        if forced or stage <= entry["last_passed"] + 1:  # passes only extend an unbroken chain
            entry["last_passed"] = max(entry["last_passed"], stage)
        entry["updated"] = _now_iso()
        entry["results"] = str(results_dir)
        if forced:
            entry.setdefault("forced_stages", []).append(stage)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.data, indent=2))


def _now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class RunRecord:
    """One invocation's results folder."""

    def __init__(self, root: Path, header: dict) -> None:
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        self.dir = root / stamp
        self.dir.mkdir(parents=True, exist_ok=False)
        self.header = header
        self.lines: list[dict] = []
        self.scene_line = ""
        self._file = (self.dir / "checks.jsonl").open("w")
        self.event("start", **header)

    def _write(self, doc: dict) -> None:
        doc = {"time": _now_iso(), **doc}
        self.lines.append(doc)
        self._file.write(json.dumps(doc) + "\n")
        self._file.flush()

    def event(self, kind: str, **fields) -> None:
        self._write({"event": kind, **fields})

    def attach_scene(self, scene, role: str) -> None:
        """Keep the composed scene beside the records (scene.xml) and its physics step in
        checks.jsonl. ``role``: what the scene was used for ("simulation", "replay check")."""
        info = scene.save(self.dir / "scene.xml")
        self.scene_line = f"{role}: `scene.xml`, {scene.physics_summary()}"
        self.event("scene", role=role, **info)

    def check(self, result) -> None:
        self._write(result.to_dict())

    def close(self, stages: list[tuple[int, str, str]], timeline: Optional[tuple] = None,
              arm_joints: Optional[dict] = None, bags: Sequence[tuple[int, Path]] = ()) -> None:
        self._file.close()
        (self.dir / "summary.md").write_text(self._summary(stages) + _bags_section(self.dir, bags))
        if timeline is not None and arm_joints:
            try:
                plot_timeline(self.dir / "timeline.png", *timeline, arm_joints)
            except Exception as exc:  # noqa: BLE001 - a plotting problem must not lose the records
                (self.dir / "timeline.txt").write_text(f"timeline.png not written: {exc}\n")

    def _summary(self, stages: list[tuple[int, str, str]]) -> str:
        h = self.header
        out = ["# Bring-up results", "",
               f"- configuration: `{h.get('config')}`", f"- target: {h.get('target')}",
               f"- setup fingerprint: `{h.get('fingerprint')}`", f"- started: {self.lines[0]['time']}"]
        if self.scene_line:
            out.append(f"- scene ({self.scene_line})")
        forced = [e for e in self.lines if e.get("event") == "forced"]
        for e in forced:
            out.append(f"- **gate forced** for stage {e['stage']}: {e['reason']}")
        for e in (x for x in self.lines if x.get("event") == "interrupted"):
            out.append(f"- **interrupted by the operator**: {e.get('detail', '')}")
        out.append("")
        for number, name, status in stages:
            out += [f"## Stage {number}: {name}: **{status}**", "",
                    "| check | subject | measured | threshold | result | detail |",
                    "| --- | --- | --- | --- | --- | --- |"]
            for c in (x for x in self.lines if x.get("stage") == number and "name" in x):
                m = "" if c["measured"] is None else f"{c['measured']:.4g}"
                t = "" if c["threshold"] is None else f"{c['threshold']:g} {c['unit']}"
                detail = str(c["detail"]).replace("|", "/")[:160]
                status = c.get("status", "passed" if c["pass"] else "failed")
                shown = {"passed": "pass", "not_applicable": "n/a"}.get(status, f"**{status}**")
                out.append(f"| {c['name']} | {c['subject']} | {m} | {t} | {shown} | {detail} |")
            out.append("")
        return "\n".join(out)


def _bags_section(root: Path, bags: Sequence[tuple[int, Path]]) -> str:
    """Where each run's bag is and how to open it."""
    written = [(stage, p) for stage, p in bags if (p / "metadata.yaml").is_file()]
    if not written:
        return ""
    out = ["## Recordings", "",
           "Every run that moved is recorded as a bag (rosbag2, MCAP): joint states, each arm's "
           "action feedback and status, the goals as sent, the executor's events "
           "(`/mj_manipulator/events`), with the plan, configuration, report and scene inside "
           "(`custom_data` in metadata.yaml). Open with `ros2 bag info <bag>`, `ros2 bag play "
           "<bag>`, Foxglove Studio or PlotJuggler (open the `.mcap` file); replay-check with "
           "`mj-manipulator-ros check-plan <bag> --mode recorded --config CONFIG`.", "",
           "| stage | bag |", "| --- | --- |"]
    for stage, p in written:
        rel = p.relative_to(root) if p.is_relative_to(root) else p
        out.append(f"| {stage} | [`{rel}`]({rel}) |")
    return "\n".join(out) + "\n"


def plot_timeline(path: Path, plan, report, samples, arm_joints: dict) -> None:
    """Joint positions of every arm against time; start stamp and motion onsets marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mj_manipulator_ros.hil.analysis import onset

    arms = [a for a in arm_joints if a in plan.arms]
    fig, axes = plt.subplots(len(arms), 1, figsize=(10, 2.6 * len(arms)), sharex=True, squeeze=False)
    t0 = report.start_stamp or (samples.stamps[0] if len(samples) else 0.0)
    for ax, arm in zip(axes[:, 0], arms):
        s = samples.arm(arm_joints[arm])
        for k, j in enumerate(arm_joints[arm]):
            ax.plot(s.stamps - t0, s.positions[:, k], lw=1, label=j)
        ax.axvline(0.0, color="k", ls="--", lw=1, label="start stamp")
        t_on = onset(s, t0, 0.002) if report.start_stamp else None
        if t_on is not None:
            ax.axvline(t_on - t0, color="r", lw=1, label=f"onset {1e3 * (t_on - t0):.1f} ms")
        ax.set_ylabel(f"{arm} (rad)")
        ax.legend(fontsize=6, ncol=3, loc="upper right")
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("time from the start stamp (s)")
    fig.suptitle(f"joint positions: {report.status.value}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
