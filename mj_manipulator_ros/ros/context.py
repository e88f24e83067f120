"""An rclpy Context owned by one component, created and destroyed explicitly.

Every node this package creates lives in an explicit :class:`rclpy.context.Context` rather than
the global default, so that a test, a CLI command or an embedding application can run several
independent ROS graphs in one process and tear each down completely.

rclpy's default SIGINT handler shuts the context down immediately, which would destroy the
action clients before the executor could cancel the arms. Contexts made here therefore install
no signal handlers; the CLI handles Ctrl-C itself and stops the arms first (the first Ctrl-C
a controlled stop, a second a cancel).

Uses only APIs common to Humble, Jazzy and Kilted (no ``with rclpy.init()``).
"""

from __future__ import annotations

import rclpy
from rclpy.context import Context

try:  # Humble and later
    from rclpy.signals import SignalHandlerOptions

    _NO_SIGNALS = {"signal_handler_options": SignalHandlerOptions.NO}
except ImportError:  # pragma: no cover - pre-Humble
    _NO_SIGNALS = {}


class RosContext:
    """An initialised rclpy context that :meth:`close` shuts down (idempotent).

    Args:
        args: ROS command-line arguments (``--ros-args ...``), or None.
        domain_id: DDS domain; None uses ``ROS_DOMAIN_ID`` from the environment.
    """

    def __init__(self, args: list[str] | None = None, domain_id: int | None = None) -> None:
        self.context = Context()
        kwargs = dict(_NO_SIGNALS)
        if domain_id is not None:
            kwargs["domain_id"] = domain_id
        rclpy.init(args=args, context=self.context, **kwargs)

    def ok(self) -> bool:
        return self.context.ok()

    def close(self) -> None:
        """Shut the context down; every node and executor in it stops working."""
        if self.context.ok():
            rclpy.shutdown(context=self.context)

    def __enter__(self) -> "RosContext":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
