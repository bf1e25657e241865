"""`ipc-conformance bench codec|serve`: the command line of the benchmarks."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Optional

from conformance.errors import USAGE_EXIT, UsageError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'64MiB', '1 KiB', '1048576' -> bytes."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 64MiB)")
    value, unit = float(match.group(1)), (match.group(2) or "b").lower()
    scale = {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[unit[0]]
    return int(value * scale)


def _codec(args: argparse.Namespace) -> int:
    from reference_tools.bench import codec_bench as cb

    progress = None if args.quiet else cb.main_progress
    try:
        report = cb.run(impl=args.impl, payload_filter=args.payload, reps=args.reps, min_time=args.min_time,
                        max_tensor_bytes=args.max_tensor_bytes, tiny=args.tiny, clock=args.clock,
                        collect=args.gc, progress=progress)
    except (ValueError, RuntimeError) as exc:  # unknown --impl, SGLang asked for but not importable
        raise UsageError(str(exc)) from None
    out = cb.render_markdown(report) if args.format == "markdown" else cb.render_text(report)
    sys.stdout.write(out)
    if args.json:
        cb.write_json(report, args.json)
        print(f"wrote {args.json}", file=sys.stderr)
    if args.plot:
        from reference_tools.bench.plot import plot_codec

        plot_codec(report, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def _serve(args: argparse.Namespace) -> int:
    from reference_tools.bench import serve_bench as sb

    try:
        settings = sb.settings_from_args(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    report = sb.run(settings, log=None if args.quiet else sb.log)
    out = sb.render_markdown(report) if args.format == "markdown" else sb.render_text(report)
    sys.stdout.write(out)
    if args.json:
        sb.write_json(report, args.json)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0 if report["ok"] else 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="benchmarks: pickle vs msgpack, codec and end to end (ratios, one run)")
    commands = bench.add_subparsers(dest="bench_command", required=True)

    c = commands.add_parser("codec", help="encode / decode / round trip per message, every transport side by side")
    c.add_argument("--impl", default="auto",
                   help="reference, sglang or reference,sglang (default auto: both when SGLang is installed)")
    c.add_argument("--payload", action="append", default=[],
                   help="only payloads whose name contains this text (repeatable), e.g. 'x1024' or 'tensor'")
    c.add_argument("--reps", type=int, default=15,
                   help="timed repetitions per case (default 15; large payloads a third)")
    c.add_argument("--min-time", type=float, default=0.004,
                   help="seconds per timed batch of calls, small payloads (default 0.004)")
    c.add_argument("--max-tensor-bytes", type=parse_size, default=None,
                   help="skip tensor payloads larger than this (e.g. 1MiB; default: all, up to 256 MiB)")
    c.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                   help="cpu: process CPU time (default; robust when other work shares the cores), wall: elapsed")
    c.add_argument("--gc", action="store_true",
                   help="leave the cyclic garbage collector running while timing (default: paused, like timeit)")
    c.add_argument("--tiny", action="store_true", help="a few small payloads (a smoke run)")
    c.add_argument("--format", choices=["text", "markdown"], default="text")
    c.add_argument("--json", metavar="FILE", help="write every number (and the targets) as JSON")
    c.add_argument("--plot", metavar="PNG", help="write a plot: round-trip bytes/s by payload size")
    c.add_argument("--quiet", action="store_true", help="no progress on stderr")
    c.set_defaults(func=_codec)

    s = commands.add_parser("serve", help="end to end: the reference server under load, pickle vs msgpack alternating")
    from reference_tools.bench.serve_bench import add_arguments

    add_arguments(s)
    s.set_defaults(func=_serve)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="ipc-conformance")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as exc:  # as `ipc-conformance bench` says it: one line, no traceback
        print(f"{parser.prog} bench {args.bench_command}: error: {exc}", file=sys.stderr)
        return USAGE_EXIT


if __name__ == "__main__":
    sys.exit(main())
