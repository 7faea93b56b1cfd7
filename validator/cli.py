"""Command line: a thin layer that parses flags and forwards them to keyword-only functions."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="validator", description="Grade LLM-layer challenges.")
    sub = parser.add_subparsers(dest="command", required=True)

    sb = sub.add_parser("submit-build", help="grade your student/layers.py and print the report")
    sb.add_argument("--challenge", action="append", dest="challenges", metavar="ID",
                    help="grade only this challenge (repeatable); default: all")
    sb.add_argument("--student", metavar="PATH", help="a layers.py file or a directory holding one")
    sb.add_argument("--answers", metavar="PATH", help="answers YAML (default: answers.yaml beside layers.py)")
    sb.add_argument("--json", dest="json_path", metavar="PATH", help="also write the report as JSON")
    sb.add_argument("--seed", type=int, help="replay a run: the seed printed in a report")
    sb.add_argument("--check", action="append", dest="checks", metavar="ID",
                    help="run only this check (repeatable), e.g. to reproduce a failure")
    sb.add_argument("--profile", choices=["quick", "default", "ci"],
                    help="hypothesis effort (default: 'ci' when $CI is set, else 'default')")
    sb.add_argument("--no-input", dest="interactive", action="store_false", default=None,
                    help="never prompt for missing answers")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    kwargs = {k: v for k, v in vars(args).items() if k != "command"}
    if args.command == "submit-build":
        from validator.submit import main as submit_main
        return submit_main(**kwargs)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
