"""Run the reference serving engine: ``python -m reference_impl.server`` or ``ipc-conformance serve``.

    python -m reference_impl.server [--model DIR] [--dp-size N] [--device auto|cpu|cuda] [--port P]
                                    [--ipc-transport pickle|msgpack] ...

Without --model the built-in tiny Llama-style checkpoint is written to the cache
directory on first use (a few hundred KB, no download). This module imports
nothing heavy until main() runs, so the CLI stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Optional, Sequence

if TYPE_CHECKING:
    from reference_impl.engine.config import EngineConfig


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--model", "--model-path", dest="model", metavar="DIR",
                        help="Hugging Face-style checkpoint directory (config.json + *.safetensors); "
                             "default: the built-in tiny model; 'stub': a deterministic rule instead of the "
                             "forward pass that records what it produced under --tap-dir (pipeline runs)")
    parser.add_argument("--dp-size", type=int, default=1, help="data-parallel scheduler processes (default 1)")
    parser.add_argument("--load-balance-method", default="round_robin",
                        choices=["round_robin", "total_requests", "total_tokens"],
                        help="how the data-parallel controller picks a rank for a request without routed_dp_rank: "
                             "in turn, the fewest requests or the fewest tokens it has sent there (default "
                             "round_robin)")
    parser.add_argument("--device", default="auto",
                        help="auto (cuda when torch sees a GPU), cpu, cuda or cuda:N (default auto)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--ipc-transport", choices=["pickle", "msgpack"],
                        help="wire format between processes (default: env IPC_TRANSPORT, else msgpack)")
    parser.add_argument("--served-model-name", help="model name for the OpenAI API (default: the directory name)")
    parser.add_argument("--max-running-requests", type=int, default=8,
                        help="continuous-batching width per scheduler (default 8)")
    parser.add_argument("--context-length", type=int, help="default: the model's max_position_embeddings")
    parser.add_argument("--stream-interval", type=int, default=1, help="tokens per streamed chunk (default 1)")
    parser.add_argument("--request-timeout", type=float, default=300.0, help="seconds (default 300)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    parser.add_argument("--max-request-bytes", type=int, default=64 << 20,
                        help="largest HTTP request body accepted; larger ones get 413 (default 64 MiB)")
    parser.add_argument("--exit-on-child-death", action="store_true",
                        help="when an engine process dies, fail the waiting requests and shut the whole server "
                             "down (exit status 3) instead of serving 503 until stopped")
    parser.add_argument("--skip-forward", action="store_true",
                        help="IPC-bound mode: no forward pass; each step's next token comes from a deterministic "
                             "rule (printable ASCII), so the time left is scheduling, IPC and detokenization. "
                             "Generation only (no logprobs, hidden states, embeddings or weight updates)")
    parser.add_argument("--profile-dir", help="run each engine process's loop under cProfile and write "
                                              "<dir>/<process>.prof when the server stops")
    parser.add_argument("--start-method", default="spawn", choices=["spawn", "forkserver"],
                        help="how the engine processes start: spawn (each imports the engine itself) or forkserver "
                             "(imported once, each process forked from it: faster start-up) (default spawn)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--trace-dir", help="write OpenTelemetry spans as JSON lines here, one file per process")
    parser.add_argument("--tap-dir", help="test hook: record every received IPC frame here, one file per process")
    parser.add_argument("--debug-skip-unwrap", action="append", default=[], metavar="PROCESS",
                        help="test hook: PROCESS's receive path skips the PickleWrapper unwrap "
                             "(e.g. controller); proves the conformance checks catch it. Never in production")
    return parser


def build_parser() -> argparse.ArgumentParser:
    return add_arguments(argparse.ArgumentParser(prog="ipc-conformance serve", description=__doc__.split("\n\n")[0]))


def config_from_args(args: argparse.Namespace) -> "EngineConfig":
    """The engine's configuration from the command line (ValueError: a value the user must fix)."""
    from reference_impl.engine.config import EngineConfig

    if args.model not in (None, "stub") and not os.path.isfile(os.path.join(args.model, "config.json")):
        raise ValueError(f"--model {args.model}: no config.json there (give a Hugging Face-style checkpoint "
                         "directory, or leave --model out for the built-in tiny model)")

    return EngineConfig(
        model_path=args.model, dp_size=args.dp_size, load_balance_method=args.load_balance_method,
        device=args.device, host=args.host, port=args.port,
        transport=args.ipc_transport, served_model_name=args.served_model_name,
        max_running_requests=args.max_running_requests, context_length=args.context_length,
        stream_interval=args.stream_interval, request_timeout_s=args.request_timeout,
        threads_per_process=args.threads, log_level=args.log_level, trace_dir=args.trace_dir,
        tap_dir=args.tap_dir, debug_skip_unwrap=tuple(args.debug_skip_unwrap),
        max_request_bytes=args.max_request_bytes, exit_on_child_death=args.exit_on_child_death,
        skip_forward=args.skip_forward, profile_dir=args.profile_dir, start_method=args.start_method,
    )


def main(argv: Optional[Sequence[str]] = None, *, fast_exit: bool = True) -> int:
    """Serve until SIGINT / SIGTERM. With fast_exit (the command line), the process exits right
    after the engine is down, skipping seconds of interpreter teardown with torch loaded."""
    parser = build_parser()
    args = parser.parse_args(argv)
    code = 0
    try:
        config = config_from_args(args)
        from reference_impl.engine.launcher import EngineFailure, EngineStartupError, launch_server

        try:
            launch_server(config)
        except EngineStartupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            code = 1
        except EngineFailure as exc:
            print(f"error: {exc}", file=sys.stderr)
            code = 3
    except ValueError as exc:  # a bad option value: one line, argparse's form and exit status
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        code = 2
    if fast_exit:
        from reference_impl.engine.runtime import fast_exit as _exit

        _exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
