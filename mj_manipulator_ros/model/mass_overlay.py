"""A mass overlay: the bodies whose mass and centre of mass the robot's model has wrong, as
measured (``hil/load_fit.py`` fits them from the arm's efforts at rest and writes one).

::

    {"bodies": {"openarm_left_link3": {"mass": 1.29, "com": [-0.003, -0.0005, -0.109]}, ...},
     ...}                       # anything else (the fit's estimates and errors) is kept, unread

``mass`` in kg, ``com`` in m in the body's own frame (MJCF's ``inertial pos``). A body's
rotational inertia is scaled with its mass (its shape is kept; the overlay measures statics).

Named in a configuration (``scene.mass_overlay: FILE``) it is applied to the scene's model
before anything compiles it, so everything built from the scene carries it: the replay check,
the simulator's own copy, the actuator twin, gravity compensation and the torque controllers'
feed-forward, the bring-up's gravity model. The simulator's injected model-mismatch faults
(``sim/model_mismatch.py``) are the simulated arm's truth against the description: where one is
set, the simulator's copy has the overlaid bodies set back to the description's, then the
fault (the checks keep the overlay).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Union

import mujoco
import numpy as np

from mj_manipulator_ros.core.errors import ConfigError


@dataclass(frozen=True)
class BodyInertial:
    """One body's corrected statics: mass (kg), centre of mass (m, (3,), body frame)."""

    mass: float
    com: tuple[float, float, float]


def parse_overlay(raw: object, where: str) -> dict[str, BodyInertial]:
    """The overlay's bodies from its parsed JSON; ``where`` names it in errors.

    Raises:
        ConfigError: not a mapping with ``bodies``, or a body whose mass is not a positive
            finite number or whose ``com`` is not three finite numbers.
    """
    bodies = raw.get("bodies") if isinstance(raw, Mapping) else None
    if not isinstance(bodies, Mapping) or not bodies:
        raise ConfigError(f"{where}: expected a mapping with 'bodies': {{BODY: {{mass: KG, com: "
                          f"[X, Y, Z]}}}}, got {str(raw)[:120]!r}")
    out = {}
    for name, v in bodies.items():
        mass = v.get("mass") if isinstance(v, Mapping) else None
        com = v.get("com") if isinstance(v, Mapping) else None
        if not isinstance(mass, (int, float)) or not math.isfinite(mass) or mass <= 0:
            raise ConfigError(f"{where}: body {name!r}: mass {mass!r}; expected a positive "
                              "number of kg")
        if (not isinstance(com, (list, tuple)) or len(com) != 3
                or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in com)):
            raise ConfigError(f"{where}: body {name!r}: com {com!r}; expected [x, y, z] in m "
                              "(the body's frame)")
        out[str(name)] = BodyInertial(float(mass), tuple(float(x) for x in com))
    return out


def read_overlay(path: Union[str, Path]) -> dict[str, BodyInertial]:
    """Read an overlay file (module docstring).

    Raises:
        ConfigError: unreadable, not JSON, or not an overlay (:func:`parse_overlay`).
    """
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"mass overlay {str(path)!r}: cannot read it as JSON: {e}") from e
    return parse_overlay(raw, f"mass overlay {str(path)!r}")


def overlay_spec(spec: mujoco.MjSpec, bodies: Mapping[str, BodyInertial], where: str) -> None:
    """Set the bodies' statics in a model spec before it compiles (in place).

    Raises:
        ConfigError: a body the spec does not have (naming the arms' bodies it has).
    """
    compiled = None
    for name, v in bodies.items():
        body = spec.body(name)
        if body is None:
            known = [b.name for b in spec.bodies if b.name][:40]
            raise ConfigError(f"{where}: body {name!r} is not in the scene's model; its bodies: "
                              f"{known}")
        if not body.explicitinertial:   # inferred from its geoms: take what they compile to
            compiled = compiled or spec.compile()
            b = mujoco.mj_name2id(compiled, mujoco.mjtObj.mjOBJ_BODY, name)
            body.mass, body.ipos = float(compiled.body_mass[b]), compiled.body_ipos[b].copy()
            body.iquat, body.inertia = compiled.body_iquat[b].copy(), compiled.body_inertia[b].copy()
            body.fullinertia = [np.nan, 0, 0, 0, 0, 0]
        if body.mass > 0:
            body.inertia = np.asarray(body.inertia) * (v.mass / body.mass)
        body.mass = v.mass
        body.ipos = v.com
        body.explicitinertial = True


def apply_overlay(model: mujoco.MjModel, overlay: Mapping) -> None:
    """Set the bodies' masses and centres of mass an overlay (its parsed JSON) says in a
    compiled model (in place), and recompute the model's derived constants.

    Raises:
        ConfigError: not an overlay, or a body the model does not have.
    """
    for name, v in parse_overlay(overlay, "mass overlay").items():
        b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
        if b < 0:
            raise ConfigError(f"mass overlay: body {name!r} is not in the model")
        if model.body_mass[b] > 0:   # the rotational inertia scales with the mass
            model.body_inertia[b] *= v.mass / model.body_mass[b]
        model.body_mass[b] = v.mass
        model.body_ipos[b] = v.com
    mujoco.mj_setConst(model, mujoco.MjData(model))
