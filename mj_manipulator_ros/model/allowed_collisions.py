"""The allowed-collision matrix (ACM): the body pairs the replay check does not count, each with
its reason, generated from the model as MoveIt's setup assistant generates its own.

A pair is listed when:

- ``filtered``: MuJoCo itself never reports it (both bodies fixed to the world, one rigid body,
  parent and child, an ``<exclude>``, or no geom pair whose contype/conaffinity match). Listed
  for the reader; the check needs nothing from it.
- ``adjacent``: parent and child joined by a joint that MuJoCo's parent filter does not cover
  (the parent is fixed to the world, e.g. an arm's first link on its base link). Never the
  world body itself: it holds the floor and every fixed object, which stay checked.
- ``always``: the two bodies (of one arm, or an arm's and a fixed one) are within the margin
  in every one of ``samples`` configurations drawn uniformly within the arms' joint ranges
  (seeded: the same model gives the same matrix). Checking them would refuse every plan. Two
  arms in contact in every pose are a broken scene, never allowed.
- ``never``: proven never closer than the margin anywhere in the joint ranges (a certified
  lower bound over every configuration of the joints the pair's distance depends on, see
  ``model/pair_distance.py``; at most two such joints). Skipping these is only an
  optimization: they cannot collide, so a check with or without them counts the same
  collisions (the clearances a report prints are those of the checked pairs; MuJoCo's
  box-box collider can read two boxes up to 0.5 mm closer than the exact distance the proof
  uses). The bound holds inside the joint ranges widened by ``RANGE_PAD``: the replay check
  refuses poses outside. It is tried only where MuJoCo's distance is exact for every geom-type
  pair of the two bodies (``pair_distance.inexact_distance``: never a heightfield or an SDF);
  the others stay checked, listed in ``unprovable`` with the reason.
- ``never_touch``: proven never closer than ``TOUCH_CLEARANCE`` (1 mm) in the joint ranges, by
  the same bound, though inside the margin somewhere in them: the robot's own design, like the
  OpenArm's wrist (link5 and the hand's base are 2.3 mm apart at the limits of joint 6, and
  inside 5 mm in 40 % of the wrist's range). Such a pair cannot collide in any plan within the
  ranges; checking it against the margin would refuse plans that use the wrist.
- ``gripper``: two bodies that only an arm's gripper joints (``arms[].gripper_joints``) move
  relative to each other (a gripper's two fingers): no plan commands those joints, so no plan
  changes their distance; their contact is the gripper's own, or its grasp.
- ``configured``: ``scene.allowed_collisions`` in the configuration, with the user's reason.
  Every report of a check that skips such a pair says so.

Pairs that depend on more joints and are not always in contact stay checked, however far apart
they are in the samples: sampling can miss the configuration that brings them together.

Only arm bodies can be in an ``adjacent``/``always`` pair with anything: every other body is
held at the reference pose in a replay. The matrix is cached on disk by a fingerprint of the
whole compiled model (every array and option: ``mj_saveModel``), the arms, the reference pose,
the margin and the sampling (``cache_dir``).
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import ConfigError, JointLimitError
from mj_manipulator_ros.model.arm_binding import ArmBinding
from mj_manipulator_ros.model.collidable import active_geoms, can_touch, with_contact_margin
from mj_manipulator_ros.model.pair_distance import (MAX_EVALUATIONS, MAX_JOINTS, certify_pair,
                                                    inexact_distance)
from mj_manipulator_ros.model.reach import reach_matrix

log = logging.getLogger(__name__)

#: configurations sampled for the "always" pairs (MoveIt's setup assistant: 10,000)
DEFAULT_SAMPLES = 10000
_SEED = 20261201
_FORMAT = 8   # bump when the generation changes: old cache entries are then ignored
#: limited joint ranges are widened by this on each side for the ``never`` bound, rad or m
RANGE_PAD = 0.01
#: a ``never_touch`` pair is proven at least this far apart, m
TOUCH_CLEARANCE = 0.001


class AllowReason(str, enum.Enum):
    """Why a pair is in the matrix."""

    FILTERED = "filtered"       # MuJoCo never reports it
    ADJACENT = "adjacent"       # parent and child across a joint, parent fixed to the world
    ALWAYS = "always"           # within the margin in every sampled configuration
    NEVER = "never"             # proven never within the margin in the joint ranges
    NEVER_TOUCH = "never_touch"  # proven never within TOUCH_CLEARANCE in the joint ranges
    GRIPPER = "gripper"         # moved relative to each other only by gripper joints
    CONFIGURED = "configured"   # scene.allowed_collisions


_PROVEN = (AllowReason.NEVER, AllowReason.NEVER_TOUCH)

#: keys a ``scene.allowed_collisions`` entry must set to ``true`` to allow a pair that silences
#: more than one part of the robot's safety: key -> how every report prints it
EXPLICIT_KEYS = {
    "between_arms": "BETWEEN ARMS",          # a body of one arm and a body of another arm
    "whole_fixed_body": "WHOLE FIXED BODY",  # the world body, or a fixed body holding a ground
}
_ENTRY_KEYS = {"a", "b", "reason"}


@dataclass(frozen=True)
class AllowedPair:
    """One pair of bodies not counted by the check.

    Attributes:
        bodies: the two body names, in model order.
        reason: see :class:`AllowReason`.
        detail: the evidence (e.g. the sampled distances) or the configuration's text.
        joints: for ``never``: the joints the bound covers (their ranges widened by
            ``RANGE_PAD``).
    """

    bodies: tuple[str, str]
    reason: AllowReason
    detail: str
    joints: tuple[str, ...] = ()
    #: for ``configured``: what the entry stated explicitly (:data:`EXPLICIT_KEYS`)
    stated: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"a": self.bodies[0], "b": self.bodies[1], "reason": self.reason.value,
                "detail": self.detail, "joints": list(self.joints), "stated": list(self.stated)}

    def describe(self) -> str:
        """``a x b (reason)``, with what the entry stated in capitals (``BETWEEN ARMS``)."""
        stated = "".join(f" [{EXPLICIT_KEYS[k]}]" for k in self.stated)
        return f"{self.bodies[0]} x {self.bodies[1]} ({self.detail}){stated}"


@dataclass(frozen=True)
class UnprovablePair:
    """A pair the ``never`` bound was not tried on: MuJoCo's distance is not exact for one of
    its geom-type pairs (``pair_distance.inexact_distance``). It stays checked.

    Attributes:
        bodies: the two body names, in model order.
        detail: why, naming the geoms.
    """

    bodies: tuple[str, str]
    detail: str

    def to_dict(self) -> dict:
        return {"a": self.bodies[0], "b": self.bodies[1], "detail": self.detail}


@dataclass(frozen=True)
class AllowedCollisionMatrix:
    """The matrix of one model.

    Attributes:
        pairs: every listed pair.
        samples: configurations sampled for ``always``.
        margin: the distance below which a sampled pair counted as in contact, m.
        fingerprint: of the model, arms, margin and sampling the matrix was generated for.
        unprovable: pairs left checked because their distance is not exact (not in ``pairs``).
    """

    pairs: tuple[AllowedPair, ...]
    samples: int
    margin: float
    fingerprint: str
    unprovable: tuple[UnprovablePair, ...] = ()

    def skipped(self) -> tuple[AllowedPair, ...]:
        """The pairs the check skips: everything but ``filtered`` (which MuJoCo never reports)."""
        return tuple(p for p in self.pairs if p.reason is not AllowReason.FILTERED)

    def mask(self, model: mujoco.MjModel) -> np.ndarray:
        """(nbody, nbody) bool, symmetric: True where the check skips the pair."""
        out = np.zeros((model.nbody, model.nbody), dtype=bool)
        for p in self.skipped():
            a, b = (_body_id(model, n, "allowed collision") for n in p.bodies)
            out[a, b] = out[b, a] = True
        return out

    def bounded_joints(self) -> frozenset:
        """Joint names whose range the ``never`` pairs rely on."""
        return frozenset(j for p in self.pairs if p.reason in _PROVEN for j in p.joints)

    def check_poses(self, model: mujoco.MjModel, arms: Mapping[str, ArmBinding],
                    positions: Mapping[str, np.ndarray], times: np.ndarray) -> None:
        """Refuse poses outside the ranges the ``never`` pairs are proven in.

        Args:
            positions: arm -> (M, J) joint positions; times: (M,) s, for the message.

        Raises:
            JointLimitError: naming arm, joint, value, time and the range.
        """
        bounded = self.bounded_joints()
        for name, arm in arms.items():
            q = np.asarray(positions[name])
            for k, joint in enumerate(arm.joint_names):
                if joint not in bounded or not np.isfinite(arm.lower[k]):
                    continue
                lo, hi = arm.lower[k] - RANGE_PAD, arm.upper[k] + RANGE_PAD
                bad = np.flatnonzero((q[:, k] < lo) | (q[:, k] > hi))
                if bad.size:
                    i = int(bad[0])
                    raise JointLimitError(
                        f"arm {name!r}, joint {joint!r}: the replay reaches {q[i, k]:.4f} at "
                        f"{times[i]:.3f} s, outside the model's range [{arm.lower[k]:.4f}, "
                        f"{arm.upper[k]:.4f}] widened by {RANGE_PAD:g}; the allowed-collision "
                        "matrix proves its 'never' pairs only inside it (are the "
                        "configuration's joint limits wider than the model's?)")

    def count(self) -> dict[str, int]:
        """Pairs per reason."""
        return {r.value: sum(p.reason is r for p in self.pairs) for r in AllowReason}

    def with_configured(self, model: mujoco.MjModel, entries: Sequence[Mapping[str, object]],
                        arms: Optional[Mapping[str, ArmBinding]] = None
                        ) -> "AllowedCollisionMatrix":
        """The matrix plus ``scene.allowed_collisions`` entries ``{a, b, reason}`` (body names).

        Two kinds of pair silence more than one part of the robot and are refused unless the
        entry says so (``true``; printed with the pair by every report that skips it):
        ``between_arms``, a body of one arm and a body of another (``arms``); and
        ``whole_fixed_body``, the world body or a body fixed to the world that holds a ground
        (plane or heightfield): every fixed obstacle it holds is silenced at once.

        Raises:
            ConfigError: an unknown body (with the bodies available), a pair of one body, an
                empty reason, a pair listed twice by the configuration, a pair of one of the
                two kinds above without its key, or a key set where it does not apply.
        """
        owner = {b: name for name, arm in (arms or {}).items() for b in arm.body_ids}
        extra, seen = [], set()
        for i, e in enumerate(entries):
            where = f"scene.allowed_collisions[{i}]"
            if not isinstance(e, Mapping) or not _ENTRY_KEYS <= set(e) \
                    or not set(e) <= _ENTRY_KEYS | set(EXPLICIT_KEYS):
                raise ConfigError(f"{where}: expected {{a: BODY, b: BODY, reason: TEXT}} and "
                                  f"optionally {', '.join(f'{k}: true' for k in EXPLICIT_KEYS)}; "
                                  f"got {e!r}")
            a, b = (_body_id(model, str(e[k]), where) for k in ("a", "b"))
            if a == b:
                raise ConfigError(f"{where}: a and b are the same body {e['a']!r}")
            reason = str(e["reason"] or "").strip()
            if not reason:
                raise ConfigError(f"{where}: the pair {e['a']!r} x {e['b']!r} needs a reason "
                                  "(it is printed with every check that skips it)")
            key = (min(a, b), max(a, b))
            if key in seen:
                raise ConfigError(f"{where}: the pair {e['a']!r} x {e['b']!r} is listed twice")
            seen.add(key)
            stated = _stated(model, e, a, b, owner, where)
            extra.append(AllowedPair((model.body(key[0]).name, model.body(key[1]).name),
                                     AllowReason.CONFIGURED, reason, stated=stated))
        return AllowedCollisionMatrix(self.pairs + tuple(extra), self.samples, self.margin,
                                      self.fingerprint, self.unprovable)

    def to_dict(self) -> dict:
        return {"samples": self.samples, "margin": self.margin, "fingerprint": self.fingerprint,
                "count": self.count(), "pairs": [p.to_dict() for p in self.pairs],
                "unprovable": [p.to_dict() for p in self.unprovable]}

    @classmethod
    def from_dict(cls, d: Mapping) -> "AllowedCollisionMatrix":
        pairs = tuple(AllowedPair((p["a"], p["b"]), AllowReason(p["reason"]), p["detail"],
                                  tuple(p.get("joints", ())), tuple(p.get("stated", ())))
                      for p in d["pairs"])
        unprovable = tuple(UnprovablePair((p["a"], p["b"]), p["detail"])
                           for p in d.get("unprovable", ()))
        return cls(pairs, int(d["samples"]), float(d["margin"]), str(d["fingerprint"]),
                   unprovable)

    def table(self, include_filtered: bool = False) -> str:
        """One line per pair (the ``filtered`` ones counted unless ``include_filtered``)."""
        c = self.count()
        lines = [f"allowed collisions: {len(self.skipped())} pairs not checked "
                 f"({c['adjacent']} adjacent, {c['always']} always within "
                 f"{self.margin * 1e3:g} mm in {self.samples} samples, {c['never']} proven "
                 f"never within it, {c['never_touch']} proven never to touch, "
                 f"{c['configured']} configured); {c['filtered']} more that MuJoCo never "
                 "reports"]
        for p in self.pairs:
            if p.reason is AllowReason.FILTERED and not include_filtered:
                continue
            stated = "".join(f" [{EXPLICIT_KEYS[k]}]" for k in p.stated)
            lines.append(f"  {p.bodies[0]} x {p.bodies[1]}: {p.reason.value} ({p.detail}){stated}")
        if self.unprovable:
            lines.append(f"{len(self.unprovable)} pairs checked, not proven: MuJoCo's distance is "
                         "not exact for their geom types")
            lines += [f"  {p.bodies[0]} x {p.bodies[1]}: {p.detail}" for p in self.unprovable]
        return "\n".join(lines)


def generate(model: mujoco.MjModel, arms: Mapping[str, ArmBinding], qpos: np.ndarray,
             margin: float, samples: int = DEFAULT_SAMPLES,
             cache_dir: Optional[Path] = None) -> AllowedCollisionMatrix:
    """The generated matrix (no configured pairs) of ``model`` with ``arms`` moving and every
    other joint at ``qpos``; read from the cache when this fingerprint was generated before.

    Args:
        model: the model (only read).
        arms: arm name -> binding.
        qpos: the reference pose, (nq,).
        margin: m; a sampled pair closer than this is in contact.
        samples: configurations to sample (>= 1).
        cache_dir: where to keep matrices (default :func:`default_cache_dir`; None there: none).
    """
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    fp = fingerprint(model, arms, qpos, margin, samples)
    folder = cache_dir if cache_dir is not None else default_cache_dir()
    path = folder / f"acm-{fp[:24]}.json" if folder is not None else None
    acm = _cached(path, fp)
    if acm is not None:
        return acm
    if path is None:
        return _generate(model, arms, qpos, margin, samples, fp, folder, None)
    # processes started together (the simulator, the execution node, a check) make one matrix:
    # the first generates it, the others wait for its file (bounded: past the wait, generate)
    with _generation_lock(folder, path.with_suffix(".lock")):
        acm = _cached(path, fp)   # made while this process waited
        return acm if acm is not None else _generate(model, arms, qpos, margin, samples, fp,
                                                     folder, path)


#: how long a process waits for another one generating the same matrix, s
LOCK_WAIT_S = 300.0


@contextlib.contextmanager
def _generation_lock(folder: Path, lock: Path):
    """An exclusive lock on ``lock`` (an advisory ``flock``), waited for at most
    ``LOCK_WAIT_S`` on the monotonic clock; without it (no folder, a timeout) the body runs
    unlocked, as it would with no cache."""
    handle = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(lock, "a")
    except OSError:
        handle = None
    held = False
    deadline = time.monotonic() + LOCK_WAIT_S
    while handle is not None and not held:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = True
        except OSError:
            if time.monotonic() > deadline:
                log.warning("waited %.0f s for another process generating %s; generating it "
                            "here too", LOCK_WAIT_S, lock.with_suffix(".json"))
                break
            time.sleep(0.05)
    try:
        yield
    finally:
        if handle is not None:
            if held:
                fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()


def _cached(path: Optional[Path], fp: str) -> Optional["AllowedCollisionMatrix"]:
    """The matrix cached at ``path`` when it is there, readable and of this fingerprint."""
    if path is None or not path.is_file():
        return None
    try:
        acm = AllowedCollisionMatrix.from_dict(json.loads(path.read_text()))
        if acm.fingerprint == fp:
            return acm
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring the unreadable allowed-collision cache %s: %s", path, exc)
    return None


def _generate(model: mujoco.MjModel, arms: Mapping[str, ArmBinding], qpos: np.ndarray,
              margin: float, samples: int, fp: str, folder: Optional[Path],
              path: Optional[Path]) -> "AllowedCollisionMatrix":
    """Generate the matrix (and cache it at ``path`` when given)."""
    log.info("generating the allowed-collision matrix (%d samples; once per model%s)", samples,
             f", cached in {folder}" if folder is not None else "")
    pairs = list(_filtered_and_adjacent(model, arms))
    skip = {(min(a, b), max(a, b)) for a, b in
            ((_body_id(model, p.bodies[0], ""), _body_id(model, p.bodies[1], "")) for p in pairs)}
    pairs += _always(model, arms, qpos, margin, samples, skip)
    proven, unprovable = _never(model, arms, qpos, margin, {frozenset(p.bodies) for p in pairs})
    for p in unprovable:
        log.info("allowed collisions: %s x %s stays checked, not proven: %s", *p.bodies, p.detail)
    acm = AllowedCollisionMatrix(tuple(pairs + proven), samples, margin, fp, tuple(unprovable))
    if path is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(acm.to_dict(), indent=1))
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("could not cache the allowed-collision matrix in %s: %s", folder, exc)
    return acm


def default_cache_dir() -> Optional[Path]:
    """``$MJ_MANIPULATOR_CACHE`` (empty: no cache), else ``$XDG_CACHE_HOME`` or ``~/.cache``,
    under ``mj_manipulator_ros``."""
    env = os.environ.get("MJ_MANIPULATOR_CACHE")
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mj_manipulator_ros"


def fingerprint(model: mujoco.MjModel, arms: Mapping[str, ArmBinding], qpos: np.ndarray,
                margin: float, samples: int) -> str:
    """sha256 of what the generated matrix depends on: the whole compiled model (every array,
    option and name, as ``mj_saveModel`` writes it: any edit regenerates, none can leave a stale
    matrix), the arms' joints, the reference pose, the margin and the generation's settings.
    65-100 ms for the OpenArm pair (a 78 MB model)."""
    h = hashlib.sha256()
    buffer = np.empty(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buffer)
    h.update(buffer)
    h.update(json.dumps({"arms": {a: list(b.joint_names) + ([{"gripper": list(
                             b.gripper.joint_names)}] if b.gripper.joint_names else [])
                                  for a, b in arms.items()},
                         "margin": float(margin), "samples": int(samples), "seed": _SEED,
                         "format": _FORMAT, "mujoco": mujoco.__version__, "pad": RANGE_PAD,
                         "never": [MAX_JOINTS, MAX_EVALUATIONS]},
                        sort_keys=True).encode())
    h.update(np.asarray(qpos, dtype=float).tobytes())
    return h.hexdigest()


# ---- generation ------------------------------------------------------------------------------
def _active_bodies(model: mujoco.MjModel) -> dict[int, list[int]]:
    """body -> its geoms that take part in collisions."""
    out: dict[int, list[int]] = {}
    for g in np.flatnonzero(active_geoms(model)):
        out.setdefault(int(model.geom_bodyid[g]), []).append(int(g))
    return out


def _filtered_and_adjacent(model: mujoco.MjModel,
                           arms: Mapping[str, ArmBinding]) -> Iterable[AllowedPair]:
    bodies = _active_bodies(model)
    weld, parent = model.body_weldid, model.body_parentid
    excluded = {int(s) for s in model.exclude_signature[:model.nexclude]}
    filter_parent = not model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT
    moving = set().union(*(a.body_ids for a in arms.values())) if arms else set()
    ids = sorted(bodies)
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            wa, wb = int(weld[a]), int(weld[b])
            pa, pb = int(weld[parent[wa]]), int(weld[parent[wb]])
            names = (model.body(a).name, model.body(b).name)
            why = None
            if wa == 0 and wb == 0:
                why = "both fixed to the world"
            elif wa == wb:
                why = "one rigid body"
            elif filter_parent and wa != 0 and wb != 0 and (pa == wb or pb == wa):
                why = "parent and child (MuJoCo's parent filter)"
            elif (a << 16) + b in excluded:
                why = "<exclude> in the model"
            elif not any(can_touch(model, g, h) for g in bodies[a] for h in bodies[b]):
                why = "contype/conaffinity never match"
            if why is not None:
                yield AllowedPair(names, AllowReason.FILTERED, why)
            elif (a in moving or b in moving) and ((parent[b] == a and a != 0)
                                                   or (parent[a] == b and b != 0)):
                child = b if parent[b] == a else a
                joints = [model.joint(j).name for j in range(
                    model.body_jntadr[child], model.body_jntadr[child] + model.body_jntnum[child])]
                if joints:
                    yield AllowedPair(names, AllowReason.ADJACENT,
                                      f"joined by {', '.join(joints)}; the parent is fixed to "
                                      "the world, so MuJoCo's parent filter does not apply")


def _never(model: mujoco.MjModel, arms: Mapping[str, ArmBinding], qpos: np.ndarray,
           margin: float, listed: set) -> tuple[list[AllowedPair], list[UnprovablePair]]:
    """Pairs (one body an arm's) whose distance depends on at most ``MAX_JOINTS`` arm joints
    and is certified at or above ``margin`` over their ranges; and the pairs that qualified but
    were not tried, their distance not being exact."""
    if not arms:
        return [], []
    bodies = _active_bodies(model)
    moved_by: dict[int, set] = {b: set() for b in bodies}   # body -> arm joints moving it
    lip: dict[tuple[int, int], float] = {}                   # (joint, body) -> m per unit
    for arm in arms.values():
        rho = reach_matrix(model, arm, qpos)   # the arm's joints, then its gripper's
        for k, j in enumerate([*arm.joint_ids, *arm.gripper.joint_ids]):
            for b, geoms in bodies.items():
                if b in arm.body_ids and rho[geoms, k].max() > 0:
                    moved_by[b].add(int(j))
                    lip[(int(j), b)] = float(rho[geoms, k].max())
    data = mujoco.MjData(model)
    out, unprovable = [], []
    ids = sorted(bodies)
    gripper = {int(j) for arm in arms.values() for j in arm.gripper.joint_ids}
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            names = (model.body(a).name, model.body(b).name)
            if frozenset(names) in listed or not (moved_by[a] or moved_by[b]):
                continue
            joints = sorted(moved_by[a] ^ moved_by[b])
            if joints and set(joints) <= gripper:
                moved = tuple(model.joint(j).name for j in joints)
                out.append(AllowedPair(names, AllowReason.GRIPPER,
                                       f"moved relative to each other only by gripper joints "
                                       f"{', '.join(moved)}, which no plan commands: a plan "
                                       "cannot change their distance (the gripper's own "
                                       "contact, or its grasp)", moved))
                continue
            if len(joints) > MAX_JOINTS:
                continue
            pairs = [(g, h) for g in bodies[a] for h in bodies[b] if can_touch(model, g, h)]
            if not pairs:
                continue
            inexact = [why for g, h in pairs if (why := inexact_distance(model, g, h))]
            if inexact:
                more = f"; and {len(inexact) - 2} more geom pairs" if len(inexact) > 2 else ""
                unprovable.append(UnprovablePair(names, "; ".join(inexact[:2]) + more))
                continue
            lipschitz = np.array([lip[(j, a)] if j in moved_by[a] else lip[(j, b)] for j in joints])
            reason = AllowReason.NEVER
            bound = certify_pair(model, data, qpos, pairs, joints, lipschitz, margin, RANGE_PAD)
            if bound is None and TOUCH_CLEARANCE < margin:
                reason = AllowReason.NEVER_TOUCH
                bound = certify_pair(model, data, qpos, pairs, joints, lipschitz,
                                     TOUCH_CLEARANCE, RANGE_PAD)
            if bound is None:
                continue
            over = ", ".join(bound.joints) or "no arm joint (fixed)"
            out.append(AllowedPair(names, reason,
                                   f"certified >= {bound.lower * 1e3:.1f} mm over {over} in "
                                   f"their ranges +- {RANGE_PAD:g}; closest measured "
                                   f"{bound.closest * 1e3:.1f} mm in {bound.evaluations} boxes",
                                   bound.joints))
    return out, unprovable


def _always(model: mujoco.MjModel, arms: Mapping[str, ArmBinding], qpos: np.ndarray,
            margin: float, samples: int, skip: set) -> list[AllowedPair]:
    """Pairs with an arm body within ``margin`` in every sampled configuration. Candidates come
    from MuJoCo's own collision pass on the first sample; each later sample measures only the
    remaining candidates (``mj_geomDistance``), dropping a pair the first time it is clear."""
    if not arms:
        return []
    m = with_contact_margin(model, margin)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(_SEED)
    lo = {n: np.concatenate([np.where(np.isfinite(a.lower), a.lower, -np.pi), a.gripper.lower])
          for n, a in arms.items()}
    hi = {n: np.concatenate([np.where(np.isfinite(a.upper), a.upper, np.pi), a.gripper.upper])
          for n, a in arms.items()}
    adr = {n: np.concatenate([a.qpos_adr, a.gripper.qpos_adr]) for n, a in arms.items()}
    moving = set().union(*(a.body_ids for a in arms.values()))
    owner = {b: n for n, a in arms.items() for b in a.body_ids}

    def pose() -> None:
        d.qpos[:] = qpos
        for n, a in arms.items():
            d.qpos[adr[n]] = rng.uniform(lo[n], hi[n])
        mujoco.mj_kinematics(m, d)

    pose()
    mujoco.mj_collision(m, d)
    cand: dict[tuple[int, int], list] = {}   # body pair -> [geom pairs, min, max distance]
    for k in range(d.ncon):
        g1, g2 = (int(x) for x in d.contact.geom[k])
        b1, b2 = int(m.geom_bodyid[g1]), int(m.geom_bodyid[g2])
        key = (min(b1, b2), max(b1, b2))
        o1, o2 = owner.get(b1), owner.get(b2)
        if key in skip or not (b1 in moving or b2 in moving) or d.contact.dist[k] >= margin \
                or (o1 is not None and o2 is not None and o1 != o2):
            continue  # an arm with another arm in every pose is a broken scene: stays checked
        cand.setdefault(key, [[], np.inf, -np.inf])
    bodies = _active_bodies(model)
    for key, entry in cand.items():
        entry[0] = [(g, h) for g in bodies[key[0]] for h in bodies[key[1]]]
    for s in range(samples):
        if s > 0:
            if not cand:
                break
            pose()
        for key in list(cand):
            pairs, _, _ = cand[key]
            dist = min(mujoco.mj_geomDistance(m, d, g, h, margin, None) for g, h in pairs)
            if dist >= margin:
                del cand[key]
                continue
            cand[key][1] = min(cand[key][1], dist)
            cand[key][2] = max(cand[key][2], dist)
    return [AllowedPair((model.body(a).name, model.body(b).name), AllowReason.ALWAYS,
                        f"within {margin * 1e3:g} mm in all {samples} samples: "
                        f"{closest * 1e3:.2f} to {farthest * 1e3:.2f} mm")
            for (a, b), (_, closest, farthest) in sorted(cand.items())]


def _stated(model: mujoco.MjModel, entry: Mapping[str, object], a: int, b: int,
            owner: Mapping[int, str], where: str) -> tuple[str, ...]:
    """The explicit keys an entry for bodies ``a``, ``b`` needs, checked against what it set.

    Raises:
        ConfigError: a key the pair needs is not ``true``, or a key is set that does not apply.
    """
    names = (model.body(a).name, model.body(b).name)
    why = {}
    if a in owner and b in owner and owner[a] != owner[b]:
        why["between_arms"] = (f"{names[0]!r} belongs to arm {owner[a]!r} and {names[1]!r} to "
                               f"arm {owner[b]!r}: skipping it silences a collision between "
                               "two arms")
    wholes = [n for n, body in zip(names, (a, b)) if _holds_fixed_world(model, body)]
    if wholes:
        geoms = [model.geom(g).name or f"geom {g}" for body in (a, b)
                 if _holds_fixed_world(model, body) for g in _collidable_geoms(model, body)]
        why["whole_fixed_body"] = (f"{wholes[0]!r} is fixed to the world and holds "
                                   f"{geoms[:6]}{' ...' if len(geoms) > 6 else ''}: skipping it "
                                   "silences every one of them (the floor, fixed obstacles) at "
                                   "once; name the body of the one obstacle instead")
    for key in EXPLICIT_KEYS:
        value = entry.get(key, False)
        if not isinstance(value, bool):
            raise ConfigError(f"{where}.{key}: expected true or false, got {value!r}")
        if key in why and not value:
            raise ConfigError(f"{where}: refused: {why[key]}. If that is really meant, say so "
                              f"with `{key}: true` (every report then prints the pair as "
                              f"{EXPLICIT_KEYS[key]})")
        if value and key not in why:
            raise ConfigError(f"{where}.{key}: true, but the pair {names[0]!r} x {names[1]!r} is "
                              f"not {EXPLICIT_KEYS[key].lower()} (remove the key)")
    return tuple(k for k in EXPLICIT_KEYS if k in why)


def _collidable_geoms(model: mujoco.MjModel, body: int) -> list[int]:
    """The geoms of ``body`` that MuJoCo can report in a contact (contype or conaffinity)."""
    return [int(g) for g in np.flatnonzero(active_geoms(model) & (model.geom_bodyid == body))]


def _holds_fixed_world(model: mujoco.MjModel, body: int) -> bool:
    """The world body itself, or a body welded to it that holds a ground (plane, heightfield)."""
    if body == 0:
        return True
    grounds = (mujoco.mjtGeom.mjGEOM_PLANE, mujoco.mjtGeom.mjGEOM_HFIELD)
    return model.body_weldid[body] == 0 and any(
        model.geom_type[g] in grounds for g in _collidable_geoms(model, body))


def _body_id(model: mujoco.MjModel, name: str, where: str) -> int:
    b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
    if b < 0:
        names = [model.body(i).name for i in range(model.nbody)]
        raise ConfigError(f"{where}: body {name!r} is not in the model; bodies: {names}")
    return b
