"""``mj-manipulator-ros``: the command-line entry point; one subcommand per tool.

Exit codes: 0 success; 1 the operation ran and failed (or found a collision); 2 bad input
(configuration, plan or arguments), nothing moved; 130 interrupted by Ctrl-C (arms stopped).
"""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def _selfcheck(_args: argparse.Namespace) -> int:
    from mj_manipulator_ros.ros.selfcheck import main

    return main()


def _execute(args: argparse.Namespace) -> int:
    from mj_manipulator_ros.core.config import load_config
    from mj_manipulator_ros.core.errors import MjManipulatorError
    from mj_manipulator_ros.core.plan_io import load_plan
    from mj_manipulator_ros.core.sync import FailureReason
    from mj_manipulator_ros.core.validation import validate_plan
    from mj_manipulator_ros.ros.executor import MultiArmExecutor

    try:
        config = load_config(args.config)
        if args.lead is not None:
            config = config.with_execution(start_lead_s=args.lead)
        plan = load_plan(args.plan)
        if args.speed is not None:
            plan = plan.time_scaled(args.speed)
        validate_plan(plan, config)
    except MjManipulatorError as exc:
        print(f"mj-manipulator-ros execute: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        executor = MultiArmExecutor(config)
    except KeyboardInterrupt:
        print("mj-manipulator-ros execute: interrupted before any goal was sent", file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        report = executor.execute(plan)  # Ctrl-C inside: every arm canceled, report says so
    except KeyboardInterrupt:  # before the arms' threads started: nothing was sent
        print("mj-manipulator-ros execute: interrupted before any goal was sent", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        executor.close()
    print(report.to_json() if args.json else report.summary(), flush=True)
    if report.succeeded:
        return EXIT_OK
    f = report.first_failure
    if f is not None and f.reason is FailureReason.EXTERNAL_ABORT and "Ctrl-C" in f.error_string:
        return EXIT_INTERRUPTED
    return EXIT_FAILED


def _demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mj_manipulator_ros.demo import run_demo, summary

    doc = run_demo(Path(args.config) if args.config else None,
                   Path(args.plan) if args.plan else None, Path(args.out), args.speed, args.view)
    print(summary(doc))
    print(f"report written to {args.out}")
    return EXIT_OK if doc["execution"]["status"] == "succeeded" else EXIT_FAILED


def _sim(args: argparse.Namespace) -> int:
    from mj_manipulator_ros.sim.sim_node import run_sim

    return run_sim(args.config, ["mj-manipulator-ros", *args.ros_args])


def _execution_node(args: argparse.Namespace) -> int:
    from mj_manipulator_ros.ros.execution_node import run_node

    return run_node(["mj-manipulator-ros", *args.ros_args], config_path=args.config)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mj-manipulator-ros",
        description="Synchronized multi-arm execution, MuJoCo simulation and HIL bring-up.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("selfcheck", help="two real nodes exchange a FollowJointTrajectory goal")
    p.set_defaults(func=_selfcheck)
    p = sub.add_parser("demo", help="simulated OpenArm pair runs the crossing plan, synchronized")
    p.add_argument("--config", help="default: config/sim_openarm.yaml")
    p.add_argument("--plan", help="default: config/plans/openarm_crossing.yaml")
    p.add_argument("--out", default="demo_report.json")
    p.add_argument("--speed", type=float, default=1.0, help="speed factor (1 = as planned)")
    p.add_argument("--view", action="store_true", help="open the MuJoCo viewer (needs a display)")
    p.set_defaults(func=_demo)

    p = sub.add_parser("sim", help="simulated arms behind FollowJointTrajectory servers")
    p.add_argument("--config", required=True, help="configuration with arms, scene and sim")
    p.add_argument("ros_args", nargs=argparse.REMAINDER, help="--ros-args ... (optional)")
    p.set_defaults(func=_sim)

    p = sub.add_parser("execute", help="run a plan file on live controllers, synchronized")
    p.add_argument("plan", help="plan file (.yaml/.yml/.json), see docs/files.md")
    p.add_argument("--config", required=True, help="executor configuration (YAML)")
    p.add_argument("--lead", type=float, help="start stamp lead, s (overrides the config)")
    p.add_argument("--speed", type=float, help="speed factor, e.g. 0.1 for 10 %% speed")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_execute)

    p = sub.add_parser("execution-node", help="serve the combined FollowJointTrajectory action")
    p.add_argument("--config", required=True, help="executor configuration (YAML)")
    p.add_argument("ros_args", nargs=argparse.REMAINDER, help="--ros-args ... (optional)")
    p.set_defaults(func=_execution_node)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
