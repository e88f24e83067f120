"""``mj-manipulator-ros``: the command-line entry point; one subcommand per tool."""

from __future__ import annotations

import argparse
import sys


def _selfcheck(_args: argparse.Namespace) -> int:
    from mj_manipulator_ros.ros.selfcheck import main

    return main()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mj-manipulator-ros",
        description="Synchronized multi-arm execution, MuJoCo simulation and HIL bring-up.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("selfcheck", help="two real nodes exchange a FollowJointTrajectory goal")
    p.set_defaults(func=_selfcheck)
    p = sub.add_parser("demo", help="the main demo (for now: the system self-check)")
    p.set_defaults(func=_selfcheck)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
