"""Rewrite the generated settings tables of the docs from their dataclass fields:
docs/files.md (``execution``, ExecutionSettings) and docs/cosim.md (``sim.cosim``, CosimSettings).

    .venv/bin/python tools/settings_tables.py        # tests check the docs and the fields agree
"""

from __future__ import annotations

from pathlib import Path

from mj_manipulator_ros.core import overrides
from mj_manipulator_ros.core.config import ExecutionSettings
from mj_manipulator_ros.sim.sim_config import CosimSettings

DOCS = Path(__file__).resolve().parents[1] / "docs"
#: (document, settings class, key column header)
TABLES = ((DOCS / "files.md", ExecutionSettings, "`execution` key"),
          (DOCS / "cosim.md", CosimSettings, "`sim.cosim` key"))


def main() -> None:
    for doc, cls, header in TABLES:
        text = doc.read_text()
        start = text.index(f"| {header} | default | meaning | command line |")
        end = text.index("\n\n", start)
        doc.write_text(text[:start] + overrides.settings_table(cls, header) + text[end:])
        print(f"wrote the {header} table of {doc}")


if __name__ == "__main__":
    main()
