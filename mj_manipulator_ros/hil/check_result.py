"""A bring-up check's outcome: what was measured, against which threshold, and whether it
lets its stage pass. Thresholds come from hil/stages.yaml only (or, named, from the setup)."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Iterable, Optional

import numpy as np

from mj_manipulator_ros.core.report import ExecutionReport
from mj_manipulator_ros.hil.stages import Stage


class CheckStatus(str, enum.Enum):
    """How a check ended. Only ``passed`` and ``not_applicable`` let a stage pass."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_MEASURED = "not_measured"      # nothing was measured: blocks the stage
    NOT_APPLICABLE = "not_applicable"  # the check does not apply, for a measured reason


@dataclass(frozen=True)
class CheckResult:
    stage: int
    name: str
    subject: str            # arm, plan, "plan/arm", or "" for the whole setup
    measured: Optional[float]
    threshold: Optional[float]
    unit: str
    status: CheckStatus
    detail: str = ""

    @property
    def passed(self) -> bool:
        """Does this check let its stage pass?"""
        return self.status in (CheckStatus.PASSED, CheckStatus.NOT_APPLICABLE)

    def to_dict(self) -> dict:
        return {"stage": self.stage, "name": self.name, "subject": self.subject,
                "measured": None if self.measured is None or not np.isfinite(self.measured)
                else float(self.measured), "threshold": self.threshold, "unit": self.unit,
                "pass": self.passed, "status": self.status.value, "detail": self.detail}


def check(stage: Stage, name: str, subject: str, measured: Optional[float], detail: str = "",
          passed: Optional[bool] = None, threshold: Optional[float] = None) -> CheckResult:
    """A check of ``stage``: ``measured`` against its threshold (``threshold`` where the figure
    comes from the setup, not ``hil/stages.yaml``; or ``passed`` given). A value that was not
    measured (None or NaN) is ``not_measured`` and blocks the stage."""
    spec = stage.check(name)
    if threshold is not None:
        spec = dataclasses.replace(spec, threshold=threshold)
    if measured is None or (isinstance(measured, float) and np.isnan(measured)):
        status = CheckStatus.NOT_MEASURED
    else:
        ok = spec.passes(measured) if passed is None else passed
        status = CheckStatus.PASSED if ok else CheckStatus.FAILED
    return CheckResult(stage.number, name, subject, measured, spec.threshold, spec.unit, status,
                       detail)


def worst(values: Iterable[Optional[float]]) -> Optional[float]:
    """The largest of measurements aggregated over runs or arms; None (not measured) when any
    of them was not measured (None or NaN): an aggregate never turns "nothing measured" into a
    figure (``max(0.0, nan)`` is 0.0)."""
    out = None
    for v in values:
        if v is None or (isinstance(v, (float, np.floating)) and np.isnan(v)):
            return None
        out = float(v) if out is None else max(out, float(v))
    return out


def not_applicable(stage: Stage, name: str, subject: str, measured: float, detail: str) -> CheckResult:
    """A check that does not apply, with the measurement that says so (e.g. colliding states)."""
    spec = stage.check(name)
    return CheckResult(stage.number, name, subject, measured, spec.threshold, spec.unit,
                       CheckStatus.NOT_APPLICABLE, detail)




def report_detail(report: ExecutionReport) -> str:
    """An execution report on one line, for a check's detail."""
    return report.summary().replace("\n", " | ")
