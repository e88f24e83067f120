"""What each bring-up stage does and measures, one file per stage runner. Thresholds come from
hil/stages.yaml only.

Each runner is named for what its stage checks (the stage's ``id`` or ``runner`` in
hil/stages.yaml, looked up in :data:`RUNNERS`) and returns
:class:`~mj_manipulator_ros.hil.check_result.CheckResult`s; the stage passes when every one
passes. Motions come from :mod:`mj_manipulator_ros.hil.motions`.
"""

from __future__ import annotations

import functools
from typing import Callable

from mj_manipulator_ros.hil.check_result import CheckResult
from mj_manipulator_ros.hil.runners.connected import connected
from mj_manipulator_ros.hil.runners.each_arm_alone import each_arm_alone
from mj_manipulator_ros.hil.runners.fault_rehearsal import fault_rehearsal
from mj_manipulator_ros.hil.runners.offline_consistency import offline_consistency
from mj_manipulator_ros.hil.runners.small_motion import small_motion
from mj_manipulator_ros.hil.runners.soak import soak
from mj_manipulator_ros.hil.runners.stop_latency import stop_latency
from mj_manipulator_ros.hil.runners.synchronized import synchronized

#: runner name (a stage's ``id`` or ``runner``) -> the runner of a stage with a session
RUNNERS: dict[str, Callable[..., list[CheckResult]]] = {
    "connected": connected, "small_motion": small_motion, "stop_latency": stop_latency,
    "each_arm_alone": each_arm_alone, "synchronized": synchronized,
    "fault_rehearsal": fault_rehearsal}
RUNNERS["soak"] = functools.partial(soak, runners=RUNNERS)
#: runners that need no session (nothing is connected)
OFFLINE_RUNNERS = {"offline_consistency": offline_consistency}
