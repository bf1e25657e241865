"""python -m reference_tools.fuzz: run the fuzz targets for a fixed budget and report.

    python -m reference_tools.fuzz list
    python -m reference_tools.fuzz TARGET|all [--seconds S] [--engine atheris|random] [--corpus DIR]
                                           [--artifacts DIR] [--json]
    python -m reference_tools.fuzz replay TARGET FILE...      # re-run saved inputs (crash files)

Every target runs in a child process (a crash, a hang or a memory blow-up ends the child,
never the caller). The last line of output is one JSON summary per target:
{"target", "engine", "seconds", "runs", "crashes": [{"file", "error"}], "known"}.
Exit status 1 when any target crashed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

TARGET_NAMES = ("decode", "decode_trusted", "struct_fields", "ext_payloads", "frames", "pickle_wrapper",
                "testee_frames", "testee_requests")


def _have_atheris() -> bool:
    try:
        import atheris  # noqa: F401 - only whether it imports
    except ImportError:
        return False
    return True


# -- child side --------------------------------------------------------------------------------
def _write_seeds(name: str, corpus_dir: Path) -> int:
    from reference_tools.fuzz.targets import TARGETS

    corpus_dir.mkdir(parents=True, exist_ok=True)
    seeds = TARGETS[name].seeds()
    for i, seed in enumerate(seeds):
        (corpus_dir / f"seed-{i:04d}").write_bytes(seed)
    return len(seeds)


def _child_atheris(args: argparse.Namespace) -> None:
    import atheris

    with atheris.instrument_imports(include=["reference_impl", "reference_tools.fuzz.targets",
                                             "reference_tools.fuzz.corpus", "conformance.testee"]):
        import reference_impl.codec
        import reference_impl.testee  # noqa: F401 - imported here to be instrumented
        from conformance.testee import protocol  # noqa: F401 - imported here to be instrumented
        from reference_tools.fuzz import targets

    fn = _ignoring(targets.TARGETS[args.target].fn, args.ignore)
    corpus = Path(args.corpus)
    _write_seeds(args.target, corpus)
    argv = [sys.argv[0], str(corpus), f"-max_total_time={int(args.seconds)}", f"-timeout={args.timeout}",
            f"-rss_limit_mb={args.rss_limit_mb}", f"-max_len={args.max_len}", "-print_final_stats=1",
            f"-artifact_prefix={args.artifacts.rstrip('/')}/{args.target}-", f"-seed={args.seed}"]
    if args.runs:
        argv.append(f"-runs={args.runs}")
    atheris.Setup(argv, fn)
    atheris.Fuzz()


def _ignoring(fn, patterns: list[str]):
    """fn, but failures whose `Type: message` matches one of the patterns count as handled:
    to keep exploring past a finding that is already known."""
    if not patterns:
        return fn
    regex = re.compile("|".join(f"(?:{p})" for p in patterns))

    def wrapped(data: bytes) -> None:
        try:
            fn(data)
        except Exception as exc:
            if not regex.search(f"{type(exc).__name__}: {exc}"):
                raise

    return wrapped


_INTERESTING = [b"\x00", b"\xff", b"\x7f", b"\x80", b"\xc0", b"\xc1", b"\xdd\x7f\xff\xff\xff", b"\xc6\xff\xff\xff\xff",
                b"\xc9\x7f\xff\xff\xff\x02", b"\x91" * 64, b"\xa2\xff\xfe", b"\xd4\x02\x00", b"\xcf" + b"\xff" * 8]


def _mutate(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        pos = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[pos % len(b)] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            b[pos % len(b)] = rng.randrange(256)
        elif op == 2:
            b[pos:pos] = rng.choice(_INTERESTING)
        elif op == 3 and b:
            del b[pos:pos + rng.randint(1, 16)]
        elif op == 4:
            b = b[:pos]
        elif op == 5 and seeds:
            other = rng.choice(seeds)
            cut = rng.randrange(len(other) + 1)
            b = b[:pos] + other[cut:]
        elif op == 6 and b:
            chunk = b[pos:pos + rng.randint(1, 32)]
            b[pos:pos] = chunk
    return bytes(b)


class _Timeout(BaseException):
    pass


def _child_random(args: argparse.Namespace) -> None:
    """No atheris: seeded random mutation of the seed corpus (not coverage-guided)."""
    from reference_tools.fuzz.targets import TARGETS, run_one

    seeds = TARGETS[args.target].seeds()
    if args.corpus and Path(args.corpus).is_dir():
        seeds += [p.read_bytes() for p in sorted(Path(args.corpus).iterdir()) if p.is_file()]
    rng = random.Random(args.seed)
    ignore = re.compile("|".join(f"(?:{p})" for p in args.ignore)) if args.ignore else None
    artifacts = Path(args.artifacts)
    artifacts.mkdir(parents=True, exist_ok=True)

    def on_alarm(signum: int, frame: object) -> None:
        raise _Timeout()

    signal.signal(signal.SIGALRM, on_alarm)
    runs, crashes, deadline = 0, [], time.monotonic() + args.seconds
    queue = list(seeds)
    while time.monotonic() < deadline and (not args.runs or runs < args.runs):
        data = queue.pop() if queue else _mutate(rng, rng.choice(seeds) if seeds else b"", seeds)
        data = data[:args.max_len]
        signal.alarm(args.timeout)
        try:
            error = run_one(args.target, data)
            if error is not None and ignore is not None and ignore.search(error):
                error = None
        except _Timeout:
            error = f"timeout: more than {args.timeout} s on one input"
        finally:
            signal.alarm(0)
        runs += 1
        if error is not None:
            import hashlib

            path = artifacts / f"{args.target}-crash-{hashlib.sha1(data).hexdigest()}"
            path.write_bytes(data)
            crashes.append({"file": str(path), "error": error})
            print(f"CRASH {path}: {error}", file=sys.stderr, flush=True)
            if len(crashes) >= args.max_crashes:
                break
    print(f"Done {runs} runs in {int(args.seconds)} second(s)", file=sys.stderr)
    print("RANDOM-RESULT " + json.dumps({"runs": runs, "crashes": crashes}), file=sys.stderr, flush=True)
    os._exit(1 if crashes else 0)


# -- parent side -------------------------------------------------------------------------------
def run_target(name: str, *, seconds: float, engine: str, artifacts: Path, corpus: Optional[Path] = None,
               runs: int = 0, timeout: int = 10, rss_limit_mb: int = 3072, max_len: int = 1 << 16, seed: int = 1,
               ignore: tuple[str, ...] = (), verbose: bool = False) -> dict:
    """Fuzz one target in a child process for `seconds`; the summary dict."""
    from reference_tools.fuzz.targets import TARGETS

    artifacts.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{name}-") as tmp:
        corpus_dir = corpus or Path(tmp) / "corpus"
        cmd = [sys.executable, "-m", "reference_tools.fuzz", "_child", name, "--engine", engine,
               "--seconds", str(seconds), "--artifacts", str(artifacts), "--corpus", str(corpus_dir),
               "--timeout", str(timeout), "--rss-limit-mb", str(rss_limit_mb), "--max-len", str(max_len),
               "--seed", str(seed), "--runs", str(runs), *(f"--ignore={p}" for p in ignore)]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                              timeout=seconds + 120)
        elapsed = time.monotonic() - t0
    out = proc.stdout
    if verbose:
        sys.stderr.write(out)
    done = re.findall(r"Done (\d+) runs in", out)
    stat = re.findall(r"stat::number_of_executed_units:\s*(\d+)", out)
    summary = {"target": name, "engine": engine, "seconds": round(elapsed, 1),
               "runs": int(done[-1]) if done else int(stat[-1]) if stat else 0, "crashes": [],
               "known": TARGETS[name].known}
    if engine == "random":
        result = re.findall(r"RANDOM-RESULT (.*)", out)
        if result:
            summary.update(json.loads(result[-1]))
    else:
        for path in re.findall(r"Test unit written to (\S+)", out):
            error = _python_error(out) or "libFuzzer: " + ";".join(re.findall(r"ERROR: libFuzzer: (.*)", out))
            summary["crashes"].append({"file": path, "error": error})
    if proc.returncode != 0 and not summary["crashes"]:
        summary["crashes"].append({"file": None, "error": f"fuzzer exited with {proc.returncode}: "
                                                           + "\n".join(out.splitlines()[-15:])})
    return summary


def _python_error(out: str) -> str:
    match = re.search(r"=== Uncaught Python exception: ===\n(.*?)(?:\n==\d+==|\Z)", out, re.S)
    if not match:
        return ""
    lines = [line for line in match.group(1).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reference_tools.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", help="a target name, 'all', 'list', or 'replay'")
    parser.add_argument("extra", nargs="*", help="replay: TARGET FILE...")
    parser.add_argument("--seconds", type=float, default=30.0, help="budget per target (default 30)")
    parser.add_argument("--runs", type=int, default=0, help="stop after this many inputs (0: time only)")
    parser.add_argument("--engine", choices=["atheris", "random"], default=None,
                        help="atheris (coverage-guided; the default when installed) or random mutation")
    parser.add_argument("--corpus", type=Path, help="keep the corpus here (default: a temporary directory)")
    parser.add_argument("--artifacts", type=Path, default=Path("fuzz-artifacts"), help="crash inputs go here")
    parser.add_argument("--timeout", type=int, default=10, help="seconds one input may take (default 10)")
    parser.add_argument("--rss-limit-mb", type=int, default=3072, help="memory limit of the fuzzing process")
    parser.add_argument("--max-len", type=int, default=1 << 16, help="longest input (bytes)")
    parser.add_argument("--max-crashes", type=int, default=5, help="random engine: stop after this many")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ignore", action="append", default=[], metavar="REGEX",
                        help="treat failures matching REGEX ('Type: message') as handled, to explore past a "
                             "known finding (repeatable)")
    parser.add_argument("--json", action="store_true", help="print only the JSON summaries")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the fuzzer's own output")
    args = parser.parse_args(argv)

    if args.target == "_child":  # internal: the child process of run_target
        args.target = args.extra[0]
        args.artifacts = str(args.artifacts)
        if args.engine == "atheris":
            _child_atheris(args)
        else:
            _child_random(args)
        return 0

    from reference_tools.fuzz.targets import TARGETS

    if args.target == "list":
        for name, t in TARGETS.items():
            print(f"{name:16s} {t.doc}" + (f"  [known: {t.known}]" if t.known else ""))
        return 0
    if args.target == "replay":
        from reference_tools.fuzz.targets import run_one

        name, files = args.extra[0], args.extra[1:]
        bad = 0
        for f in files:
            error = run_one(name, Path(f).read_bytes())
            bad += error is not None
            print(f"{f}: {error or 'ok'}")
        return 1 if bad else 0
    names = list(TARGETS) if args.target == "all" else [args.target]
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        parser.error(f"unknown target {unknown[0]!r}; see `python -m reference_tools.fuzz list`")
    engine = args.engine or ("atheris" if _have_atheris() else "random")
    if engine == "atheris" and not _have_atheris():
        parser.error("atheris is not installed (pip install -e '.[fuzz]'); use --engine random")
    failed = False
    for name in names:
        summary = run_target(name, seconds=args.seconds, engine=engine, artifacts=args.artifacts,
                             corpus=args.corpus / name if args.corpus else None, runs=args.runs,
                             timeout=args.timeout, rss_limit_mb=args.rss_limit_mb, max_len=args.max_len,
                             seed=args.seed, ignore=tuple(args.ignore), verbose=args.verbose)
        failed |= bool(summary["crashes"])
        if not args.json:
            status = "CRASH" if summary["crashes"] else "ok"
            print(f"{name:16s} {engine:8s} {summary['runs']:8d} inputs in {summary['seconds']:6.1f} s  {status}",
                  file=sys.stderr)
            for crash in summary["crashes"]:
                print(f"    {crash['file']}: {crash['error'][:300]}", file=sys.stderr)
        print(json.dumps(summary), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
