"""Kinematic replay of a plan through the MuJoCo scene, checking every state and between states.

Each checked state: the arms' joints are set on the checker's **own** MjData (never the
simulator's), ``mj_kinematics`` + ``mj_collision`` run, and contacts are attributed to arms by
body. MuJoCo's own filters apply unchanged (contype/conaffinity, parent/child, ``<exclude>``).
Pairs checked, by default: arm-arm, arm-environment (the robot's own fixed structure, the
floor, every other model of the scene) and self-collision within an arm, except the pairs of
the allowed-collision matrix (``model/allowed_collisions.py``: adjacent links, pairs within
the margin in every sampled configuration, and the configuration's own entries).

Distances come from MuJoCo's contacts with every geom's margin raised (on the checker's copy of
the model) so that pairs closer than ``horizon`` report their signed distance. A pair closer
than ``margin`` (default 5 mm) is a **collision**; farther is clear (a near miss when below the
horizon).

**Between states (continuous check).** Every point of an arm's geom g moves at most
``sum_j rho(j, g) * vmax_j * h`` over an interval of length h on which |qdot_j| <= vmax_j, with
the lever arms rho from the model's kinematic tree (``model/reach.py``: hinge and slide joints,
any order of ``joint_names``). vmax comes from the timeline: for a plan, from its splines (as
the controller interpolates them) sampled every 1 ms, plus 1 ms times the largest acceleration;
for a recording, from linear motion between samples. With the bounds B of the arms of a pair
added (twice the arm's for self-collision), an interval with clearances c0, c1 at its ends is
certified when (c0 + c1 - B) / 2 >= margin. Otherwise its midpoint (on the true motion) is
checked like a state and each half is certified the same way, down to ``max_depth`` halvings.

**Guarantee:** an interval reported clear has no pair closer than ``margin`` anywhere on it,
given the motion model above (the plan's splines; linear between recorded samples) and exact
MuJoCo distances. An interval not certified at ``max_depth`` counts against the plan
(``uncertified_intervals``), never as clear.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import sys
import threading
from typing import Callable, Mapping, Optional

import mujoco
import numpy as np

from mj_manipulator_ros.model.collidable import (
    active_geoms, bits_touch, not_collidable, with_contact_margin)
from mj_manipulator_ros.model.allowed_collisions import (RANGE_PAD, AllowReason,
                                                          AllowedCollisionMatrix,
                                                          generate)
from mj_manipulator_ros.model.arm_binding import ArmBinding
from mj_manipulator_ros.model.reach import reach_matrix
from mj_manipulator_ros.core.plan import MultiArmPlan
from mj_manipulator_ros.core.spline_peaks import segment_peaks
from mj_manipulator_ros.check.band import check_band
from mj_manipulator_ros.check.checked_state import CheckedState as _State
from mj_manipulator_ros.check.report import PairHit, ReplayReport
from mj_manipulator_ros.check.timeline import ReplayMode, Timeline, build_timeline
from mj_manipulator_ros.core.errors import JointLimitError, UnsupportedMujocoError

ENV = -1

try:  # the per-state loop in C (check/_contact_kernel.c); PlanReplayChecker._contacts otherwise
    from mj_manipulator_ros.check import _contact_kernel as KERNEL
except ImportError:  # not built (no compiler, no MuJoCo headers), or built for another MuJoCo
    KERNEL = None

#: two spheres (radius 0.1 m, centres 0.3 m apart: a 0.1 m gap), each with a 0.06 m margin
_MARGIN_PROBE = """<mujoco><worldbody>
<geom type="sphere" size="0.1" margin="0.06"/>
<body pos="0.3 0 0"><freejoint/><geom type="sphere" size="0.1" margin="0.06"/></body>
</worldbody></mujoco>"""
_margin_rule_checked = False


def verify_margin_rule() -> None:
    """The checker raises every geom's margin to reach/2 and relies on MuJoCo reporting a pair
    whenever its distance is below the *sum* of the two margins (older MuJoCo took the maximum,
    which would silently halve the distance horizon). Checked once per process on two spheres
    whose gap lies between the two rules.

    Raises:
        UnsupportedMujocoError: this MuJoCo does not sum the margins.
    """
    global _margin_rule_checked
    if _margin_rule_checked:
        return
    m = mujoco.MjModel.from_xml_string(_MARGIN_PROBE)
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    mujoco.mj_collision(m, d)
    summed = d.ncon == 1 and abs(d.contact.dist[0] - 0.1) < 1e-9 and \
        abs(d.contact.includemargin[0] - 0.12) < 1e-9
    if not summed:
        raise UnsupportedMujocoError(
            f"MuJoCo {mujoco.__version__} does not report two geoms 0.1 m apart with margins "
            f"0.06 + 0.06 m (contacts: {d.ncon}, includemargin "
            f"{list(d.contact.includemargin[:d.ncon])}): the replay checker needs the sum of the "
            "two margins; install the MuJoCo version this package pins (see setup.py)")
    _margin_rule_checked = True


#: states per progress report of a replay that reports progress (one batch otherwise)
PROGRESS_ROWS = 200
#: the kernel's rows are split over threads only this many at least per thread (a thread
#: costs about 0.1 ms to start; a state 3-20 us, more the more contacts are near)
PARALLEL_ROWS = 250
#: the bound on joining a replay thread, s (a million states take about 7 s on one core)
JOIN_S = 120.0


class PlanReplayChecker:
    """Args:
        model: the scene's model (only read; the checker works on a copy).
        arms: arm name -> binding (indices into ``model``), in replay order.
        base_qpos: qpos of everything that is not an arm joint, shape (nq,); the arms'
            gripper joints stand there unless a check is given where they are (``grippers``).
        margin: distance below which a pair counts as colliding, m.
        horizon: distances are measured up to this, m (clearances beyond read as >= horizon).
        arm_env, self_collision: check arm-environment / arm-self pairs (both by default).
        max_depth: halvings of an interval before giving up on certifying it.
        allowed: the allowed-collision matrix (default: generated from the model for this
            margin, see ``model/allowed_collisions.py``); its pairs are not counted.
        configured: ``scene.allowed_collisions`` entries added to the generated matrix.
    """

    def __init__(self, model: mujoco.MjModel, arms: Mapping[str, ArmBinding],
                 base_qpos: np.ndarray, margin: float = 0.005, horizon: float = 0.10,
                 arm_env: bool = True, self_collision: bool = True, max_depth: int = 10,
                 allowed: Optional[AllowedCollisionMatrix] = None,
                 configured: tuple = ()) -> None:
        if not 0 <= margin < horizon:
            raise ValueError(f"need 0 <= margin < horizon, got margin={margin}, horizon={horizon}")
        verify_margin_rule()
        if allowed is None:
            allowed = generate(model, arms, base_qpos, margin)
        self.allowed = allowed.with_configured(model, configured, arms) if configured else allowed
        self._allowed_mask = self.allowed.mask(model)
        #: per arm (and "environment"), bodies whose geoms can touch nothing: never checked
        self.not_collidable = not_collidable(model, arms)
        self.overflow_states = 0  # states whose contact buffer filled up (contacts dropped)
        self.arms = dict(arms)
        self.arm_names = list(self.arms)
        self.margin, self.horizon, self.max_depth = margin, horizon, max_depth
        self.arm_env, self.self_collision = arm_env, self_collision
        self.base_qpos = np.array(base_qpos, dtype=float)
        self._lock = threading.Lock()  # one check at a time on the checker's own MjData
        self._ranges_ok: Optional[MultiArmPlan] = None  # the last plan found inside the ranges
        #: the latest synchronized continuous replay: (report, plan, grippers as stood)
        self._synchronized: Optional[tuple] = None
        # Copies of the model: geom margins raised so that pairs closer than `horizon` report a
        # distance (continuous check, clearances), or only up to `margin` (discrete check:
        # collisions only); "pairs" is "near" with arm-arm pairs only (the stop band's).
        self._models = {}
        for name, reach in (("near", horizon), ("pairs", horizon), ("tight", max(margin, 1e-6))):
            mm = with_contact_margin(model, reach)
            self._models[name] = (mm, mujoco.MjData(mm), reach)
        self.model, self.data, self._reach_now = self._models["near"]
        m = self.model
        self.body_owner = np.full(m.nbody, ENV)  # body -> owning arm index (ENV: environment)
        for k, arm in enumerate(self.arms.values()):
            for b in arm.body_ids:
                self.body_owner[b] = k
        self.geom_owner = self.body_owner[m.geom_bodyid]
        n = len(self.arm_names)
        # owner x owner -> category (ENV = -1 indexes the last row/column)
        owners = np.arange(-1, n)
        table = self._categories(owners[:, None].repeat(n + 1, 1), owners[None, :].repeat(n + 1, 0))
        self._pair_category = np.empty((n + 1, n + 1), dtype=int)
        for i, a in enumerate(owners):
            for k, b in enumerate(owners):
                self._pair_category[a, b] = table[i, k]
        #: the batch loop (``_clearances``): the C kernel where built; None runs the reference
        self.kernel = KERNEL
        #: threads the kernel's rows are split over (this process's cores, at most 4), and
        #: each model's spare MjData for them (id of the model -> MjData, made once)
        self.workers = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                           else os.cpu_count() or 1)
        self._spares: dict[int, list] = {}
        self._owner_rows = np.where(self.geom_owner == ENV, n, self.geom_owner).astype(np.int32)
        self._category_rows = np.ascontiguousarray(self._pair_category, dtype=np.int32)
        self._allowed_u8 = np.ascontiguousarray(self._allowed_mask, dtype=np.uint8)
        self._ncat = (n + 1) ** 2   # category codes lo * (n + 1) + hi
        self.narrowed = {name: self._narrow(mm, arm_arm_only=(name == "pairs"))
                         for name, (mm, _, _) in self._models.items()}
        # the arm joints' columns (a gripper joint holds still through a replay)
        self._rho = {name: reach_matrix(self.model, arm, self.base_qpos)[:, :len(arm.joint_ids)]
                     for name, arm in self.arms.items()}
        #: the pose of everything but the arm joints in the check running (gripper joints set)
        self._base = self.base_qpos
        #: gripper joint -> (arm, index in its GripperBinding), made once
        self._gripper_where = {joint: (name, k) for name, arm in self.arms.items()
                               for k, joint in enumerate(arm.gripper.joint_names)}

    def _narrow(self, mm: mujoco.MjModel, arm_arm_only: bool) -> str:
        """Let MuJoCo test only the pairs the check counts, so that skipped pairs cost nothing:
        one contype bit per body with collision geoms, each body's conaffinity the bits of the
        bodies it is checked against (requested categories, minus the allowed-collision matrix).
        With more than 31 such bodies, one bit per arm (categories only). Done only when the
        model's own contype/conaffinity let every pair of active geoms collide (then the new bits
        never enable a pair the model filters out; parent/child and <exclude> filters still
        apply). Either way every contact is also filtered after mj_collision, so the result never
        depends on this. Returns "bodies", "arms" or "none"."""
        ct, ca = mm.geom_contype, mm.geom_conaffinity
        active = active_geoms(mm)
        combos = {(int(a), int(b)) for a, b in zip(ct[active], ca[active])}
        if not all(bits_touch(*one, *other) for one in combos for other in combos):
            return "none"
        bodies = sorted({int(b) for b in mm.geom_bodyid[active]})
        own = self.body_owner[bodies]
        cat = self._pair_category[own[:, None], own[None, :]]
        if arm_arm_only:
            cat = np.where((own[:, None] != ENV) & (own[None, :] != ENV)
                           & (own[:, None] != own[None, :]), cat, -1)
        collide = (cat >= 0) & ~self._allowed_mask[np.ix_(bodies, bodies)]
        if len(bodies) <= 31:
            bit = {b: 1 << k for k, b in enumerate(bodies)}
            for k, b in enumerate(bodies):
                aff = 0
                for j in np.flatnonzero(collide[k]):
                    aff |= bit[bodies[j]]
                geoms = np.flatnonzero(active & (mm.geom_bodyid == b))
                mm.geom_contype[geoms] = bit[b]
                mm.geom_conaffinity[geoms] = aff
            return "bodies"
        n = len(self.arm_names)
        if n + 1 > 31:
            return "none"
        env_bit, arm_bits = 1 << n, (1 << n) - 1
        env = self.arm_env and not arm_arm_only
        for g in np.flatnonzero(active):
            o = self.geom_owner[g]
            if o == ENV:
                mm.geom_contype[g] = env_bit if env else 0
                mm.geom_conaffinity[g] = arm_bits if env else 0
            else:
                mine = 1 << int(o)
                mm.geom_contype[g] = mine
                mm.geom_conaffinity[g] = (arm_bits & ~mine) | (env_bit if env else 0) \
                    | (mine if self.self_collision and not arm_arm_only else 0)
        return "arms"

    @classmethod
    def from_scene(cls, scene, **kwargs) -> "PlanReplayChecker":
        """From a :class:`mj_manipulator_ros.model.scene.Scene` (or anything with model, arms,
        initial_qpos), with its configuration's ``allowed_collisions``."""
        config = getattr(scene, "config", None)
        if config is not None and "configured" not in kwargs:
            kwargs["configured"] = tuple(config.allowed_collisions)
        return cls(scene.model, scene.arms, scene.initial_qpos, **kwargs)

    def scope(self) -> dict:
        """What a check covers: the categories of pairs, the allowed pairs per reason, and the
        configuration's own entries (listed: a configured pair is never skipped silently)."""
        cats = ["arm-arm"] + (["arm-environment"] if self.arm_env else []) + \
            (["self"] if self.self_collision else [])
        count = self.allowed.count()
        return {"checked": cats,
                "not_collidable": {k: list(v) for k, v in self.not_collidable.items()},
                "allowed": {k: v for k, v in count.items() if k != AllowReason.FILTERED.value},
                "configured": [p.describe() for p in self.allowed.pairs
                               if p.reason is AllowReason.CONFIGURED]}

    # ---- construction helpers -----------------------------------------------------------------
    # ---- one state ------------------------------------------------------------------------------
    def _categories(self, oa: np.ndarray, ob: np.ndarray) -> np.ndarray:
        """Category code per contact: arm pair (i, k) -> i * n + k with i <= k, env as n; -1 = skip."""
        n = len(self.arm_names)
        a = np.where(oa == ENV, n, oa)
        b = np.where(ob == ENV, n, ob)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        code = lo * (n + 1) + hi
        keep = np.zeros(a.shape, dtype=bool)
        keep |= (lo != hi) & (hi < n)                       # arm-arm
        if self.arm_env:
            keep |= (lo < n) & (hi == n)
        if self.self_collision:
            keep |= (lo == hi) & (lo < n)
        return np.where(keep, code, -1)

    def _qpos(self, poses: Mapping[str, np.ndarray]) -> np.ndarray:
        """Full qpos rows (..., nq) from arm poses (..., J)."""
        first = np.asarray(next(iter(poses.values())))
        q = np.broadcast_to(self._base, first.shape[:-1] + self._base.shape).copy()
        for name, arm in self.arms.items():
            q[..., arm.qpos_adr] = poses[name]
        return q

    def _contacts(self, qpos: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
        """One state on the current model: (whether the contact buffer filled, and of the
        contacts counted: category (K,), distance (K,) m, geoms (K, 2)). The reference of the
        C kernel (``_clearances``)."""
        m, d = self.model, self.data
        d.qpos[:] = qpos
        try:
            mujoco.mj_kinematics(m, d)
            full = d.warning[mujoco.mjtWarning.mjWARN_CONTACTFULL]
            before = full.number
            mujoco.mj_collision(m, d)
        except mujoco.FatalError:   # raised, its data left clean for the next call (as the
            mujoco.mj_resetData(m, d)   # kernel leaves its own)
            raise
        overflow = full.number != before   # contacts were dropped: not certifiable
        if d.ncon == 0:
            return overflow, np.empty(0, int), np.empty(0), np.empty((0, 2), int)
        contact = d.contact
        pairs = (contact.geom >= 0).all(axis=1)   # (a flex contact has no geom pair)
        geoms, dist = contact.geom[pairs], contact.dist[pairs]
        cat = self._pair_category[self.geom_owner[geoms[:, 0]], self.geom_owner[geoms[:, 1]]]
        bodies = self.model.geom_bodyid[geoms]
        keep = (cat >= 0) & ~self._allowed_mask[bodies[:, 0], bodies[:, 1]]
        return overflow, cat[keep], dist[keep], geoms[keep]

    def _evaluate(self, poses: Mapping[str, np.ndarray] | np.ndarray) -> _State:
        overflow, cat, dist, geoms = self._contacts(
            poses if isinstance(poses, np.ndarray) else self._qpos(poses))
        state = _State()
        if overflow:
            state.overflow = True
            self.overflow_states += 1
        for c in set(cat.tolist()):
            state.clearance[c] = float(dist[cat == c].min())
        for k in np.flatnonzero(dist < self.margin):
            state.hits.append((int(cat[k]), int(geoms[k, 0]), int(geoms[k, 1]), float(dist[k])))
        return state

    def _clearances(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Many states on the current model: ``rows`` (N, nq) of qpos -> (the smallest distance
        of the contacts counted per category code, (N, (n + 1)^2) m, +inf where none; whether
        the contact buffer filled, (N,) bool). Nothing is counted here (``overflow_states``):
        the states that matter are evaluated again with :meth:`_evaluate`. The C kernel where
        built (one call, the GIL released), else :meth:`_contacts` per row: the same figures."""
        rows = np.ascontiguousarray(rows, dtype=float).reshape(-1, self.model.nq)
        out = np.full((rows.shape[0], self._ncat), np.inf)
        full = np.zeros(rows.shape[0], dtype=np.uint8)
        if self.kernel is not None and rows.shape[0]:
            self._kernel_rows(rows, out, full)
            return out, full.astype(bool)
        for k, row in enumerate(rows):
            overflow, cat, dist, _ = self._contacts(row)
            full[k] = overflow
            for c in set(cat.tolist()):
                out[k, c] = float(dist[cat == c].min())
        return out, full.astype(bool)

    def _kernel_rows(self, rows: np.ndarray, out: np.ndarray, full: np.ndarray) -> None:
        """The kernel over ``rows``, split over up to ``workers`` threads (at least
        ``PARALLEL_ROWS`` rows each), each on its own MjData of the current model (this
        checker's, and spares made once per model): the kernel releases the GIL, so the
        threads run on as many cores. Rows are independent: the figures are the same however
        they are split. A thread that cannot be started leaves its rows to this one."""
        n = rows.shape[0]
        parts = max(1, min(self.workers, n // PARALLEL_ROWS))
        cuts = np.linspace(0, n, parts + 1).astype(int)
        spares = self._spares.setdefault(id(self.model), [])
        while len(spares) < parts - 1:
            spares.append(mujoco.MjData(self.model))
        datas = [self.data] + spares[:parts - 1]
        errors: list[BaseException] = []

        def run(k: int) -> None:
            a, b = cuts[k], cuts[k + 1]
            try:
                self.kernel.clearances(self.model._address, datas[k]._address, rows[a:b],
                                       self._owner_rows, self._category_rows, self._allowed_u8,
                                       out[a:b], full[a:b])
            except BaseException as exc:  # noqa: BLE001 - raised below, in the caller's thread
                errors.append(exc)
        threads = []
        for k in range(1, parts):
            t = threading.Thread(target=run, args=(k,), name=f"mjmr-replay-{k}", daemon=True)
            try:
                t.start()
                threads.append(t)
            except RuntimeError:   # no thread to be had (the process's limit): done here
                run(k)
        try:
            run(0)
            for t in threads:
                t.join(JOIN_S)
                if t.is_alive():
                    raise RuntimeError(f"replay thread {t.name} still running after {JOIN_S:g} "
                                       f"s ({n} states in {parts} parts)")
        finally:   # a thread still running keeps its MjData: never handed to another check
            busy = {id(datas[k]) for k, t in enumerate(threads, start=1) if t.is_alive()}
            spares[:] = [d for d in spares if id(d) not in busy]
        if errors:
            raise errors[0]

    def _states(self, rows: np.ndarray, codes) -> tuple[list, np.ndarray]:
        """The states of ``rows`` (N, nq) for a report: those with a contact of a category in
        ``codes`` under the margin, or whose buffer filled, evaluated in full (:meth:`_evaluate`,
        which counts the overflow); every other one is one shared empty state (no hit). Returns
        (the states, the clearance table of :meth:`_clearances`)."""
        table, full = self._clearances(rows)
        clean = _State()
        states = [clean] * rows.shape[0]
        codes = list(codes)
        near = (table[:, codes] < self.margin).any(axis=1) if codes else np.zeros(len(rows), bool)
        for k in np.flatnonzero(near | full):
            states[k] = self._evaluate(rows[k])
        return states, table

    def _category_arms(self, code: int) -> tuple[Optional[int], Optional[int]]:
        n = len(self.arm_names)
        lo, hi = divmod(code, n + 1)
        return lo, (None if hi == n else hi)

    def _all_categories(self) -> list[int]:
        n = len(self.arm_names)
        out = []
        for i in range(n):
            for k in range(i, n + 1):
                if (k == n and self.arm_env) or (k == i and self.self_collision) or (i < k < n):
                    out.append(i * (n + 1) + k)
        return out

    # ---- the whole replay -----------------------------------------------------------------------
    def check(self, plan: Optional[MultiArmPlan] = None, mode: ReplayMode | str = "synchronized",
              dt: Optional[float] = None, continuous: bool = True,
              skews: Optional[Mapping[str, float]] = None, every: int = 1,
              timeline: Optional[Timeline] = None,
              progress: Optional[Callable[[int, int], None]] = None,
              skew: Optional[float] = None,
              grippers: Optional[Mapping[str, float]] = None,
              diagonal: Optional[ReplayReport] = None) -> ReplayReport:
        """Replay and check. Give a ``plan`` (with ``mode``/``dt``/``skews``) or a ready
        ``timeline`` (e.g. from a recording, with mode ``recorded``). ``grippers``: where the
        arms' gripper joints stand (joint -> rad or m, as measured); a gripper joint not given
        stands at the reference pose. The report says where each stood.

        ``diagonal`` (band mode): this checker's latest synchronized, continuous report, of the
        same plan object with the same grippers, clear: its arm-arm states are the band's at
        d = 0 and are taken from it, not evaluated again (any other report: ignored).

        Raises:
            JointLimitError: a gripper position outside its joint's range (widened by
                ``RANGE_PAD``), where the allowed-collision matrix's proofs do not hold.
            ValueError: a name in ``grippers`` that is no arm's gripper joint.

        Thread-safe: the checker's MjData has one owner at a time (concurrent checks wait)."""
        with self._lock:
            self._base, held = self._gripper_pose(grippers or {})
            try:
                report = self._check_mode(plan, mode, dt, continuous, skews, every, timeline,
                                          progress, skew, self._diagonal(diagonal, plan, held))
            finally:
                self._base = self.base_qpos
            out = dataclasses.replace(report, grippers=held) if held else report
            if ReplayMode(mode) is ReplayMode.SYNCHRONIZED and continuous and timeline is None \
                    and dt is None and every == 1 and plan is not None:
                self._synchronized = (out, plan, held)   # the band's diagonal, for its check
            return out

    def _diagonal(self, report: Optional[ReplayReport], plan, held: dict
                  ) -> Optional[dict[int, np.ndarray]]:
        """Pair code -> clearance (T,) of the band's states at d = 0, from ``report`` where it
        is this checker's latest synchronized report of ``plan`` with the grippers at
        ``held``, clear with no full contact buffer; else None."""
        last = self._synchronized
        if report is None or last is None or report is not last[0] or plan is not last[1] \
                or held != last[2] or not report.collision_free:
            return None
        n = len(self.arm_names)
        return {min(i, k) * (n + 1) + max(i, k): report.clearance_traces[f"{a}-{b}"]
                for (i, a), (k, b) in itertools.combinations(enumerate(self.arm_names), 2)
                if f"{a}-{b}" in report.clearance_traces}

    def gripper_positions(self) -> dict[str, float]:
        """Every arm's gripper joint at the reference pose (joint -> rad or m)."""
        return {n: float(self.base_qpos[a]) for arm in self.arms.values()
                for n, a in zip(arm.gripper.joint_names, arm.gripper.qpos_adr)}

    def _gripper_pose(self, grippers: Mapping[str, float]) -> tuple[np.ndarray, dict]:
        """The base pose with the gripper joints where ``grippers`` has them, and where every
        gripper joint stands in it (joint -> value)."""
        where = self._gripper_where
        unknown = sorted(set(grippers) - set(where))
        if unknown:
            raise ValueError(f"gripper position(s) given for {unknown}: not a gripper joint of "
                             f"any arm; the gripper joints are {sorted(where)}")
        base = self.base_qpos.copy()
        for joint, value in grippers.items():
            name, k = where[joint]
            g = self.arms[name].gripper
            value = float(value)
            lo, hi = g.lower[k] - RANGE_PAD, g.upper[k] + RANGE_PAD
            if not lo <= value <= hi:   # also refuses nan
                raise JointLimitError(
                    f"arm {name!r}: gripper joint {joint!r} stands at {value:.4f}, outside the "
                    f"model's range [{g.lower[k]:.4f}, {g.upper[k]:.4f}] widened by "
                    f"{RANGE_PAD:g}; the allowed-collision matrix's proofs do not hold there",
                    arm=name, joint=joint)
            base[g.qpos_adr[k]] = value
        return base, {j: float(base[self.arms[a].gripper.qpos_adr[k]])
                      for j, (a, k) in where.items()}

    def _check_mode(self, plan, mode, dt, continuous, skews, every, timeline, progress,
                    skew, diagonal=None) -> ReplayReport:
        if ReplayMode(mode) is not ReplayMode.BAND:
            return self._check(plan, mode, dt, continuous, skews, every, timeline, progress)
        if plan is None or skew is None:
            raise ValueError("the band replay needs a plan and a skew (s)")
        self.model, self.data, self._reach_now = self._models["pairs"]
        self._check_ranges(plan, None)
        overflow_before = self.overflow_states
        report = check_band(self, plan, skew, diagonal=diagonal)
        overflow = self.overflow_states - overflow_before
        return dataclasses.replace(report, contact_overflow_states=overflow) \
            if overflow else report

    def _check(self, plan, mode, dt, continuous, skews, every, timeline, progress) -> ReplayReport:
        mode = ReplayMode(mode)
        self.model, self.data, self._reach_now = self._models["near" if continuous else "tight"]
        horizon = self._reach_now
        if timeline is None:
            if plan is None:
                raise ValueError("check() needs a plan or a timeline")
            timeline = build_timeline(plan, mode, dt, skews, order=self.arm_names
                                      if set(plan.arm_names) == set(self.arm_names) else None)
        missing = [a for a in self.arm_names if a not in timeline.positions]
        if missing:
            raise ValueError(f"the timeline has no poses for arm(s) {missing}")
        self._check_ranges(plan, timeline)
        idx = np.arange(0, len(timeline), max(1, every))
        if idx[-1] != len(timeline) - 1:
            idx = np.append(idx, len(timeline) - 1)
        times = timeline.times[idx]
        poses = {a: timeline.positions[a][idx] for a in self.arm_names}
        if progress is None and sys.stderr.isatty() and idx.size > 2000:
            progress = _terminal_progress
        categories = self._all_categories()
        overflow_before = self.overflow_states
        clearance = {c: np.full(idx.size, horizon) for c in categories}
        states = []
        rows = self._qpos(poses)
        batch = PROGRESS_ROWS if progress is not None else max(idx.size, 1)
        for start in range(0, idx.size, batch):
            chunk, table = self._states(rows[start:start + batch], categories)
            states.extend(chunk)
            for c in categories:
                clearance[c][start:start + len(chunk)] = np.minimum(table[:, c], horizon)
            if progress is not None:
                progress(start + len(chunk), idx.size)
        between = []  # (time, _State) found colliding between states
        uncertified = 0
        extra_states = 0
        if continuous and idx.size > 1:
            if timeline.pose_at is None or timeline.speed_bound is None:
                raise ValueError("the continuous check needs a timeline with pose_at and "
                                 "speed_bound (build_timeline / timeline_from_recording)")
            for k in self._uncertified(timeline, idx, clearance, categories):
                found, unc, n_extra = self._interval(timeline, idx, int(k), clearance, categories)
                between.extend(found)
                uncertified += unc
                extra_states += n_extra
        report = self._report(mode, times, states, clearance, between, uncertified, extra_states,
                              continuous)
        overflow = self.overflow_states - overflow_before
        return dataclasses.replace(report, contact_overflow_states=overflow) if overflow else report

    def _check_ranges(self, plan: Optional[MultiArmPlan], timeline: Optional[Timeline]) -> None:
        """The matrix's proven pairs hold inside the joint ranges: refuse a replay that leaves
        them, at its states and, for a plan, anywhere on its splines (exact extremes)."""
        if not self.allowed.bounded_joints():
            return
        if timeline is not None:
            self.allowed.check_poses(self.model, self.arms, timeline.positions, timeline.times)
        if plan is None or plan is self._ranges_ok or not all(a in plan.arms
                                                               for a in self.arm_names):
            return
        positions, times = {}, None
        for a in self.arm_names:
            traj = plan[a]
            peaks = segment_peaks(traj)
            positions[a] = np.vstack([traj.positions, peaks.position_min, peaks.position_max])
            times = np.concatenate([traj.times, traj.times[:-1], traj.times[:-1]])
        self.allowed.check_poses(self.model, self.arms, positions, times)
        self._ranges_ok = plan   # the gate checks one plan twice (synchronized, band)

    def _bound(self, arm: str, dq: np.ndarray) -> float:
        """Max displacement (m) of any geom of the arm when its joints travel at most dq (J,)."""
        return float(np.max(self._rho[arm] @ np.abs(dq), initial=0.0))

    def _uncertified(self, timeline: Timeline, idx, clearance, categories) -> np.ndarray:
        """The intervals between checked states that :meth:`_interval` must look at: all of them
        where the timeline has no batch speed bound; otherwise those whose first test (the same
        figures for every interval at once) does not certify them, with 1e-12 m to spare (a
        product summed in another order may differ in its last bits: such an interval is
        looked at, never skipped)."""
        times = timeline.times[idx]
        if timeline.speed_bounds is None:
            return np.arange(idx.size - 1)
        span = np.diff(times)
        speed = timeline.speed_bounds(times[:-1], times[1:])
        travel = {a: np.max(self._rho[a] @ (np.abs(speed[a]) * span[:, None]).T, axis=0,
                            initial=0.0) for a in self.arm_names}
        todo = np.zeros(span.size, dtype=bool)
        for c in categories:
            i, j = self._category_arms(c)
            ai, aj = self.arm_names[i], (None if j is None else self.arm_names[j])
            b = travel[ai] if aj is None else (2 * travel[ai] if aj == ai
                                               else travel[ai] + travel[aj])
            ca, cb = clearance[c][:-1], clearance[c][1:]
            todo |= ((ca + cb - b) / 2.0 < self.margin + 1e-12) & (np.minimum(ca, cb) >= self.margin)
        return np.flatnonzero(todo)

    def _interval(self, timeline: Timeline, idx, k, clearance, categories):
        """Certify interval k (between checked states k and k+1), splitting it on the true
        motion where needed. Returns (collisions found between states, uncertified, extra)."""
        times = timeline.times[idx]
        c0 = {c: clearance[c][k] for c in categories}
        c1 = {c: clearance[c][k + 1] for c in categories}
        found, extra, uncertified = [], 0, 0
        stack = [(c0, c1, float(times[k]), float(times[k + 1]), 0)]
        while stack:
            ca, cb, ta, tb, depth = stack.pop()
            speed = timeline.speed_bound(ta, tb)
            travel = {a: self._bound(a, speed[a] * (tb - ta)) for a in self.arm_names}
            todo = []
            for c in categories:
                i, j = self._category_arms(c)
                ai, aj = self.arm_names[i], (None if j is None else self.arm_names[j])
                b = travel[ai] if aj is None else (2 * travel[ai] if aj == ai
                                                   else travel[ai] + travel[aj])
                # not certified, and neither end already colliding (those count as states)
                if (ca[c] + cb[c] - b) / 2.0 < self.margin and min(ca[c], cb[c]) >= self.margin:
                    todo.append(c)
            if not todo:
                continue
            if depth >= self.max_depth:
                uncertified += 1
                continue
            tm = 0.5 * (ta + tb)
            s = self._evaluate(timeline.pose_at(tm))
            extra += 1
            cm = {c: min(s.clearance.get(c, self.horizon), self.horizon) for c in categories}
            if s.hits:
                found.append((tm, s))
                continue  # a collision between states: reported; no need to split further
            stack.append((ca, cm, ta, tm, depth + 1))
            stack.append((cm, cb, tm, tb, depth + 1))
        return found, uncertified, extra

    def _report(self, mode, times, states, clearance, between, uncertified, extra, continuous):
        colliding = [k for k, s in enumerate(states) if s.hits]
        hits = [(times[k], s) for k, s in enumerate(states) if s.hits] + list(between)
        pairs: dict[tuple, dict] = {}
        worst_time, worst = None, -np.inf
        for t, s in sorted(hits, key=lambda x: x[0]):
            for cat, g1, g2, dist in s.hits:
                if self.geom_owner[g1] > self.geom_owner[g2] or (
                        self.geom_owner[g1] == ENV and self.geom_owner[g2] != ENV):
                    g1, g2 = g2, g1
                key = (g1, g2)
                pen = max(0.0, -dist)
                entry = pairs.setdefault(key, {"cat": cat, "max_penetration": pen, "first_time": t,
                                               "min_distance": dist, "count": 0})
                entry["max_penetration"] = max(entry["max_penetration"], pen)
                entry["min_distance"] = min(entry["min_distance"], dist)
                entry["count"] += 1
                if -dist > worst:
                    worst, worst_time = -dist, t
        m = self.model
        pair_hits = []
        for (g1, g2), e in pairs.items():
            names = tuple(self._owner_name(g) for g in (g1, g2))
            pair_hits.append(PairHit(
                names, (m.body(m.geom_bodyid[g1]).name, m.body(m.geom_bodyid[g2]).name),
                (m.geom(g1).name or f"geom{g1}", m.geom(g2).name or f"geom{g2}"),
                e["max_penetration"], e["min_distance"], e["first_time"], e["count"]))
        pair_hits.sort(key=lambda p: (-p.max_penetration, p.first_time))
        min_clear = {}
        for c, trace in clearance.items():
            i, j = self._category_arms(c)
            label = "-".join([self.arm_names[i], "environment" if j is None else
                              ("self" if j == i else self.arm_names[j])])
            k = int(np.argmin(trace))
            min_clear[label] = {"distance": float(trace[k]), "time": float(times[k]),
                                "at_least": bool(trace[k] >= self._reach_now)}
        if worst_time is None:  # no collision: the worst state is the closest approach
            trace_min = min(((float(np.min(t)), float(times[int(np.argmin(t))]))
                             for t in clearance.values()), default=(None, None))
            worst_time = trace_min[1]
        first = min((t for t, _ in hits), default=None)
        return ReplayReport(
            mode=ReplayMode(mode).value, states_checked=len(states),
            colliding_states=len(colliding), first_collision_time=first,
            pairs=tuple(pair_hits), min_clearance=min_clear, continuous=continuous,
            between_state_collisions=len(between), uncertified_intervals=uncertified,
            extra_states_checked=extra, margin=self.margin, horizon=self._reach_now,
            worst_time=worst_time, times=times, clearance_traces={
                lbl: clearance[c] for lbl, c in zip(min_clear, clearance)}, scope=self.scope())

    def _owner_name(self, g: int) -> str:
        o = self.geom_owner[g]
        return "environment" if o == ENV else self.arm_names[o]

    def poses_at(self, plan_or_timeline, t: float, mode="synchronized", skews=None) -> dict:
        """Arm poses at time t of a replay (for rendering the worst state)."""
        tl = plan_or_timeline if isinstance(plan_or_timeline, Timeline) else build_timeline(
            plan_or_timeline, mode, None, skews, order=self.arm_names)
        k = int(np.argmin(np.abs(tl.times - t)))
        return {a: tl.positions[a][k] for a in self.arm_names}


def _terminal_progress(done: int, total: int) -> None:
    width = 40
    filled = int(width * done / total)
    sys.stderr.write(f"\rchecking [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()
