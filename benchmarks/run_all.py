"""Run the benchmarks: ``python -m benchmarks.run_all [--quick] [names...]`` (``make bench`` runs all).

Each benchmark module exposes ``run(quick: bool) -> dict`` and gets one JSON file in ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from benchmarks.common import write_result

BENCHES = [
    "store",
    "e2e",
    "filter",
    "delivery",
    "oms",
    "logappender",
    "celery",
    "spark",
    "ha",
    "failover",
    "metrics",
    "dashboard",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("names", nargs="*", default=BENCHES, help=f"benchmarks to run (default: {BENCHES})")
    args = parser.parse_args(argv)
    for name in args.names:
        try:
            module = importlib.import_module(f"benchmarks.bench_{name}")
        except ModuleNotFoundError as exc:
            print(f"skipping {name}: {exc}", file=sys.stderr)
            continue
        result = module.run(quick=args.quick)
        path = write_result(name, result)
        print(json.dumps(result.get("summary", result), indent=2))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
