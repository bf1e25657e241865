"""python -m reference_tools.proof table [--check] | mutation [NAME ...] [-k SELECTION] [--out FILE]
| sglang-mutants [--only NAME] [--select K] [--out FILE] (in an environment with SGLang: tox -e upstream-mutants)"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reference_tools.proof", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    table = sub.add_parser("table", help="prove every MUST of spec/SPEC.md and write docs/requirements.md")
    table.add_argument("--check", action="store_true", help="exit 1 when the committed table is stale")
    table.add_argument("--no-prove", action="store_true", help="only map requirements to checks (no runs)")
    mutation = sub.add_parser("mutation", help="the whole suite against every mutant; writes docs/mutation.md")
    mutation.add_argument("names", nargs="*", help="only these mutants")
    mutation.add_argument("-k", dest="selection", help="only the checks of this -k selection")
    mutation.add_argument("--out", type=Path, help="write here instead of docs/mutation.md")
    mutation.add_argument("--workers", type=int, default=2)
    sub.add_parser("sglang-mutants", help="bugs planted into the installed SGLang's own source (its own options)",
                   add_help=False)
    if argv is None:
        argv = sys.argv[1:]
    if list(argv[:1]) == ["sglang-mutants"]:
        from reference_tools.proof.sglang_mutants import main as sglang_main

        return sglang_main(list(argv[1:]))
    args = parser.parse_args(argv)
    if args.command == "mutation":
        from reference_tools.proof.mutation import main as mutation_main

        return mutation_main(args.names, args.selection, args.out, args.workers)
    from reference_tools.proof.table import main as table_main

    return table_main(check=args.check, run=not args.no_prove)


if __name__ == "__main__":
    sys.exit(main())
