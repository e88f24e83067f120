"""Rewrite the generated settings table of docs/files.md from the ExecutionSettings fields.

    .venv/bin/python tools/settings_tables.py        # test_launch.py checks the two agree
"""

from __future__ import annotations

from pathlib import Path

from mj_manipulator_ros.core import overrides
from mj_manipulator_ros.core.config import ExecutionSettings

DOC = Path(__file__).resolve().parents[1] / "docs" / "files.md"
HEADER = "| `execution` key | default | meaning | command line |"


def main() -> None:
    text = DOC.read_text()
    start = text.index(HEADER)
    end = text.index("\n\n", start)
    DOC.write_text(text[:start] + overrides.settings_table(ExecutionSettings, "`execution` key")
                   + text[end:])
    print(f"wrote the execution settings table of {DOC}")


if __name__ == "__main__":
    main()
