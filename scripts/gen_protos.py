"""Regenerate the internal protocol modules in ``orbitmq/proto`` from their ``.proto`` files.

Run through ``make protos``; ``tests/test_protos_fresh.py`` fails when the committed output is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent


def generate(out_dir: Path) -> list[Path]:
    protos = sorted((ROOT / "orbitmq" / "proto").glob("*.proto"))
    for proto in protos:
        args = [
            "grpc_tools.protoc",
            f"-I{ROOT}",
            f"--python_out={out_dir}",
            f"--pyi_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            str(proto.relative_to(ROOT)),
        ]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed for {proto}")
    return protos


if __name__ == "__main__":
    generate(ROOT)
    sys.exit(0)
