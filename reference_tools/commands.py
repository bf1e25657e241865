"""The reference's subcommands of `ipc-conformance` (entry point group `ipc_conformance.commands`):
`serve` (the reference serving engine) and `bench` (its benchmarks). Each hook adds its parser to
the CLI's subcommands; nothing heavy (torch, the engine) is imported until a command runs, so the
CLI stays fast and works where the `reference` extra is not installed."""

from __future__ import annotations

import argparse

from conformance.errors import UsageError

#: What installs the reference engine's dependencies (torch, fastapi, uvicorn, ...).
EXTRA_HINT = "pip install 'ipc-conformance[serve]'"


#: The top-level modules of the serve extra: one missing is the user's install, said in one line.
SERVE_MODULES = {"torch", "fastapi", "uvicorn", "httpx", "safetensors", "opentelemetry", "starlette"}


def _serve(args: argparse.Namespace) -> int:
    from reference_impl.server import main as serve_main  # light: torch, uvicorn, ... only when serving

    try:
        code: int = serve_main(args.serve_args)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in SERVE_MODULES:
            raise
        raise UsageError(f"the reference engine needs {exc.name!r}, which is not installed: {EXTRA_HINT}") from None
    return code


def serve(sub: argparse._SubParsersAction) -> None:
    # The serve options live in reference_impl/server.py; prefix_chars="\0" hands every
    # argument after `serve` (including --help) to it untouched.
    parser = sub.add_parser("serve", add_help=False, prefix_chars="\0",
                            help="run the reference serving engine (see `ipc-conformance serve --help`)")
    parser.add_argument("serve_args", nargs=argparse.REMAINDER)
    parser.set_defaults(func=_serve)


def bench(sub: argparse._SubParsersAction) -> None:
    from reference_tools.bench.cli import add_parser  # light: the benchmarks import on use

    add_parser(sub)
