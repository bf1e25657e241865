"""Serving benchmark: the reference server under load, pickle vs msgpack, side by side.

Drives the server like SGLang's ``bench_serving`` (random prompts of a fixed input length,
``ignore_eos`` so every request produces exactly the output length, Poisson arrivals at a
request rate or all at once, a cap on concurrent requests) over the native ``/generate``
streaming API, and reports request / input / output token throughput, TTFT, ITL and
end-to-end latency (mean, median, p90, p99) for each transport.

For each concurrency level one server per transport runs (both at once, started for that
level with batch width = concurrency: the engine's decode step has a fixed shape, so a wider
batch than needed only adds compute); the load alternates between them in rounds (ABBA
order), so drift and neighbours' load hit both alike. Ratios are per round pair, summarised
by their median.

Presets: ``cpu`` (default) sizes the run for a small CPU machine with the built-in tiny
model, where the model's compute is small and IPC is a visible part of each step; ``ipc``
serves with ``--skip-forward`` (the scheduler's loop without the forward pass), so what is
measured is scheduling, IPC and detokenization; ``gpu`` is the seed's setting (1024
concurrent, 4096 requests, input 1024, output 200) for a GPU and a real checkpoint
(``--model``).

Every msgpack/pickle ratio comes with a bootstrap confidence interval over the rounds
(geometric mean of the per-round ratios) and a verdict: msgpack faster, slower, or not
distinguishable (then with the number of rounds that would likely separate it).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, Sequence

from reference_tools.bench.timing import bootstrap_ratio, percentile

TRANSPORTS = ("pickle", "msgpack")
PRESETS: dict[str, dict[str, Any]] = {
    # Built-in tiny model on a 2-core CPU: a lone request, then a full batch.
    "cpu": dict(concurrency=[1, 256], num_prompts=[16, 512], input_len=128, output_len=32, rounds=3, device="cpu",
                dp_size=1),
    # IPC-bound: no forward pass, short prompts, long outputs streamed token by token, so the
    # step messages (scheduler -> detokenizer -> tokenizer manager, every step) dominate.
    "ipc": dict(concurrency=[1, 256, 1024], num_prompts=[16, 256, 1024], input_len=16, output_len=32, rounds=4,
                device="cpu", dp_size=1, skip_forward=True),
    # The seed's measurement (SGLang PR: Qwen3-0.6B on one GPU): needs --model and a GPU.
    "gpu": dict(concurrency=[1, 1024], num_prompts=[64, 4096], input_len=1024, output_len=200, rounds=2,
                device="cuda", dp_size=1),
}
TINY_MODEL_NOTE = ("model: the built-in tiny Llama-style checkpoint (hidden size 64, 2 layers, byte tokenizer), "
                   "chosen so the model's compute stays small and the IPC between tokenizer manager, scheduler "
                   "and detokenizer (encode, ZeroMQ, decode, every step) is a visible part of the time; each "
                   "concurrency level gets its own servers with batch width = concurrency and context = input + "
                   "output, because the engine's decode step has a fixed shape (batch width x context).")


@dataclass
class Settings:
    preset: str = "cpu"
    transports: list[str] = field(default_factory=lambda: list(TRANSPORTS))
    urls: list[str] = field(default_factory=list)  # target running servers instead of starting them
    concurrency: list[int] = field(default_factory=lambda: [1, 256])
    num_prompts: list[int] = field(default_factory=lambda: [24, 512])
    input_len: int = 128
    output_len: int = 32
    request_rate: float = math.inf
    rounds: int = 3
    warmup: int = 4
    seed: int = 1
    model: Optional[str] = None
    device: str = "cpu"
    dp_size: int = 1
    skip_forward: bool = False  # serve with --skip-forward (the ipc preset)
    stream: bool = True  # requests stream their tokens (SSE); False: one JSON answer per request
    max_running_requests: Optional[int] = None  # None: each level's concurrency
    context_length: Optional[int] = None  # None: input + output (the built-in model), the model's own otherwise
    port: int = 0  # 0: free ports
    startup_timeout: float = 180.0
    request_timeout: float = 600.0
    server_args: list[str] = field(default_factory=list)
    profile_dir: Optional[str] = None  # servers write cProfile files under <dir>/c<concurrency>-<transport>


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", choices=sorted(PRESETS), default="cpu",
                   help="cpu (default): sized for a small CPU machine and the tiny model; ipc: IPC-bound "
                        "(servers run --skip-forward; concurrency 1, 256, 1024); gpu: the seed's settings "
                        "(concurrency 1024, 4096 requests, input 1024, output 200)")
    p.add_argument("--skip-forward", action="store_true", default=None,
                   help="start the servers with --skip-forward (no forward pass; the ipc preset does)")
    p.add_argument("--no-stream", dest="stream", action="store_false", default=None,
                   help="requests ask for one JSON answer instead of a token stream (no TTFT/ITL): the "
                        "tokenizer manager then does no per-token HTTP work")
    p.add_argument("--url", action="append", default=[],
                   help="benchmark a running server instead of starting one (repeatable: one per transport; "
                        "the transport is read from its /get_server_info)")
    p.add_argument("--transport", action="append", choices=list(TRANSPORTS), default=[],
                   help="only this transport (repeatable; default both)")
    p.add_argument("--concurrency", type=_int_list, help="max concurrent requests, comma list (e.g. 1,256)")
    p.add_argument("--num-prompts", type=_int_list, help="requests per run, comma list matching --concurrency")
    p.add_argument("--input-len", type=int, help="prompt tokens per request")
    p.add_argument("--output-len", type=int, help="generated tokens per request (ignore_eos)")
    p.add_argument("--request-rate", type=float, help="requests/s, Poisson arrivals (default inf: all at once)")
    p.add_argument("--rounds", type=int, help="alternating rounds per transport and concurrency (default 3)")
    p.add_argument("--warmup", type=int, help="warm-up requests per server before timing (default 4)")
    p.add_argument("--seed", type=int, help="prompt seed (default 1)")
    p.add_argument("--model", help="checkpoint directory (default: the built-in tiny model)")
    p.add_argument("--device", help="server device: cpu, cuda, auto")
    p.add_argument("--dp-size", type=int, help="data-parallel schedulers per server (default 1)")
    p.add_argument("--max-running-requests", type=int,
                   help="server batch width (default: each level's concurrency; the servers restart per level)")
    p.add_argument("--context-length", type=int,
                   help="server context length (default: input + output with the built-in model)")
    p.add_argument("--port", type=int, help="first server port (default: free ports)")
    p.add_argument("--server-arg", action="append", default=[], help="extra argument for the server (repeatable)")
    p.add_argument("--profile-dir", help="servers run each process under cProfile, files in "
                                         "DIR/c<concurrency>-<transport>/ (summary: python -m "
                                         "reference_tools.bench.profiles DIR/*); profiling slows them down")
    p.add_argument("--format", choices=["text", "markdown"], default="text")
    p.add_argument("--json", metavar="FILE", help="write every number as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of integers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"need positive integers: {text!r}")
    return values


def settings_from_args(args: argparse.Namespace) -> Settings:
    base = dict(PRESETS[args.preset])
    s = Settings(preset=args.preset, **base)
    for name in ("concurrency", "num_prompts", "input_len", "output_len", "request_rate", "rounds", "warmup",
                 "seed", "model", "device", "dp_size", "max_running_requests", "context_length", "port",
                 "skip_forward", "stream", "profile_dir"):
        value = getattr(args, name, None)
        if value is not None:
            setattr(s, name, value)
    if args.concurrency is not None and args.num_prompts is None:
        s.num_prompts = [max(8, 2 * c) for c in s.concurrency]
    s.urls = list(args.url)
    s.transports = list(dict.fromkeys(args.transport)) or list(TRANSPORTS)
    s.server_args = list(args.server_arg)
    validate(s)
    return s


def validate(s: Settings) -> None:
    if len(s.num_prompts) != len(s.concurrency):
        raise ValueError(f"--num-prompts has {len(s.num_prompts)} values for {len(s.concurrency)} concurrency levels")
    if s.input_len < 1 or s.output_len < 1:
        raise ValueError("--input-len and --output-len must be >= 1")
    if s.rounds < 1:
        raise ValueError("--rounds must be >= 1")
    if s.preset == "gpu" and not s.urls and s.model is None:
        raise ValueError("the gpu preset needs a real checkpoint: --model DIR (context >= input + output), "
                         "or --url of a running server")
    if s.model is None and s.input_len + s.output_len > 512 and not s.urls:
        raise ValueError(f"the built-in tiny model has a 512-token context; input {s.input_len} + output "
                         f"{s.output_len} does not fit (use --model)")
    if s.model is not None and not s.urls and not os.path.isfile(os.path.join(s.model, "config.json")):
        raise ValueError(f"--model {s.model}: no config.json there (a Hugging Face-style checkpoint directory)")
    if any(c < 1 for c in s.concurrency) or any(n < 1 for n in s.num_prompts):
        raise ValueError("--concurrency and --num-prompts must be >= 1")
    if s.context_length is not None and s.context_length < s.input_len + s.output_len:
        raise ValueError(f"--context-length {s.context_length} < input {s.input_len} + output {s.output_len}")


def server_context(s: Settings) -> Optional[int]:
    if s.context_length is not None:
        return s.context_length
    return s.input_len + s.output_len if s.model is None else None


# -- servers ------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One reference server process (ipc-conformance serve), started and stopped here."""

    def __init__(self, transport: str, port: int, s: Settings, batch: int) -> None:
        self.transport, self.port = transport, port
        self.url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "reference_impl.server", "--ipc-transport", transport, "--port", str(port),
               "--device", s.device, "--dp-size", str(s.dp_size), "--max-running-requests", str(batch),
               "--log-level", "warning", "--request-timeout", str(s.request_timeout)]
        if s.model:
            cmd += ["--model", s.model]
        if s.skip_forward:
            cmd.append("--skip-forward")
        if s.profile_dir:
            cmd += ["--profile-dir", os.path.join(s.profile_dir, f"c{batch}-{transport}")]
        if server_context(s) is not None:
            cmd += ["--context-length", str(server_context(s))]
        cmd += s.server_args
        self.cmd = cmd
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("IPC_TRANSPORT", None)
        env.pop("SGLANG_USE_PICKLE_IPC", None)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                     start_new_session=True)

    def wait_ready(self, timeout: float) -> dict:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace")[-2000:] if self.proc.stderr else ""
                raise RuntimeError(f"{self.transport} server exited ({self.proc.returncode}): {err}")
            try:
                r = httpx.get(self.url + "/health", timeout=2)
                if r.status_code == 200:
                    return httpx.get(self.url + "/get_server_info", timeout=5).json()
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"{self.transport} server not ready after {timeout:.0f}s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr:
            self.proc.stderr.close()


def process_cpu_seconds(pid: int) -> Optional[float]:
    """utime + stime of a local process (Linux /proc), None elsewhere or when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def server_pids(server_info: dict, main_pid: Optional[int]) -> dict[str, int]:
    """Process name -> pid: the engine's children from /get_server_info, and the HTTP +
    tokenizer manager process itself when this benchmark started it."""
    pids = {name: int(pid) for name, pid in (server_info.get("pids") or {}).items()}
    if main_pid is not None:
        pids["tokenizer_manager"] = main_pid
    return pids


def cpu_snapshot(pids: dict[str, int]) -> dict[str, float]:
    out = {}
    for name, pid in pids.items():
        value = process_cpu_seconds(pid)
        if value is not None:
            out[name] = value
    return out


# -- load -------------------------------------------------------------------------------------
@dataclass
class RequestResult:
    ok: bool
    prompt_len: int
    output_len: int = 0
    ttft: float = math.nan
    latency: float = math.nan
    itl: list[float] = field(default_factory=list)
    error: str = ""


def make_prompts(n: int, input_len: int, seed: int, vocab: int = 256) -> list[list[int]]:
    """Random token ids (bench_serving's 'random' dataset); ids 0-255 are bytes for the tiny model."""
    rnd = random.Random(seed)
    return [[rnd.randrange(vocab) for _ in range(input_len)] for _ in range(n)]


async def _one(client: Any, url: str, ids: list[int], output_len: int, stream: bool = True) -> RequestResult:
    body = {"input_ids": ids, "stream": stream,
            "sampling_params": {"max_new_tokens": output_len, "ignore_eos": True, "temperature": 0.0}}
    res = RequestResult(ok=False, prompt_len=len(ids))
    start = time.perf_counter()
    last = start
    tokens = 0
    try:
        if not stream:
            return await _one_answer(client, url, body, res, start, output_len)
        async with client.stream("POST", url + "/generate", json=body) as resp:
            if resp.status_code != 200:
                res.error = f"HTTP {resp.status_code}: {(await resp.aread())[:200]!r}"
                return res
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    res.error = str(chunk["error"])[:200]
                    return res
                now = time.perf_counter()
                count = chunk.get("meta_info", {}).get("completion_tokens", tokens)
                if count > tokens:
                    if tokens == 0:
                        res.ttft = now - start
                    else:
                        # bench_serving: one inter-token latency per chunk; chunks carrying several
                        # tokens are split evenly so ITL stays per token.
                        res.itl.extend([(now - last) / (count - tokens)] * (count - tokens))
                    tokens, last = count, now
        res.latency = time.perf_counter() - start
        res.output_len = tokens
        res.ok = tokens == output_len
        if not res.ok:
            res.error = f"{tokens} tokens, expected {output_len}"
    except Exception as exc:  # noqa: BLE001 - recorded per request
        res.error = f"{type(exc).__name__}: {exc}"[:200]
    return res


async def _one_answer(client: Any, url: str, body: dict, res: RequestResult, start: float,
                      output_len: int) -> RequestResult:
    """A request that is not streamed: one JSON answer, so no TTFT or ITL, only its latency."""
    resp = await client.post(url + "/generate", json=body)
    if resp.status_code != 200:
        res.error = f"HTTP {resp.status_code}: {resp.content[:200]!r}"
        return res
    res.latency = time.perf_counter() - start
    res.output_len = resp.json().get("meta_info", {}).get("completion_tokens", 0)
    res.ok = res.output_len == output_len
    if not res.ok:
        res.error = f"{res.output_len} tokens, expected {output_len}"
    return res


async def run_load(url: str, prompts: Sequence[list[int]], output_len: int, request_rate: float,
                   max_concurrency: int, seed: int, stream: bool = True) -> tuple[list[RequestResult], float]:
    import httpx

    limits = httpx.Limits(max_connections=max_concurrency + 8, max_keepalive_connections=max_concurrency + 8)
    sem = asyncio.Semaphore(max_concurrency)
    rnd = random.Random(seed)
    async with httpx.AsyncClient(timeout=httpx.Timeout(None), limits=limits) as client:

        async def limited(ids: list[int]) -> RequestResult:
            async with sem:
                return await _one(client, url, ids, output_len, stream)

        tasks = []
        start = time.perf_counter()
        for ids in prompts:
            tasks.append(asyncio.create_task(limited(ids)))
            if math.isfinite(request_rate) and request_rate > 0:
                await asyncio.sleep(rnd.expovariate(request_rate))
        results = await asyncio.gather(*tasks)
        duration = time.perf_counter() - start
    return list(results), duration


# -- metrics ----------------------------------------------------------------------------------
def summarize(results: Sequence[RequestResult], duration: float) -> dict:
    ok = [r for r in results if r.ok]
    ms = 1000.0

    def dist(values: list[float]) -> dict:
        if not values:
            return {"mean": math.nan, "median": math.nan, "p90": math.nan, "p99": math.nan}
        return {"mean": sum(values) / len(values) * ms, "median": percentile(values, 50) * ms,
                "p90": percentile(values, 90) * ms, "p99": percentile(values, 99) * ms}

    itl = [x for r in ok for x in r.itl]
    return {
        "completed": len(ok), "failed": len(results) - len(ok),
        "errors": sorted({r.error for r in results if not r.ok})[:5],
        "duration_s": duration,
        "request_throughput": len(ok) / duration if duration else math.nan,
        "input_throughput": sum(r.prompt_len for r in ok) / duration if duration else math.nan,
        "output_throughput": sum(r.output_len for r in ok) / duration if duration else math.nan,
        "ttft_ms": dist([r.ttft for r in ok]), "itl_ms": dist(itl), "e2e_ms": dist([r.latency for r in ok]),
    }


def pool(runs: Sequence[dict], raw: Sequence[tuple[list[RequestResult], float]]) -> dict:
    """One transport at one concurrency over all rounds: latencies pooled, throughputs by median."""
    results = [r for rs, _ in raw for r in rs]
    total = sum(d for _, d in raw)
    merged = summarize(results, total)
    for key in ("request_throughput", "input_throughput", "output_throughput"):
        merged[key] = percentile([run[key] for run in runs], 50)
        merged[key + "_rounds"] = [run[key] for run in runs]
    # CPU seconds per 100 completed requests, per process, over all rounds.
    done = sum(run["completed"] for run in runs)
    names = sorted({k for run in runs for k in run.get("cpu_s", {})})
    merged["cpu_ms_per_request"] = {k: 1000 * sum(run.get("cpu_s", {}).get(k, 0.0) for run in runs) / done
                                    for k in names} if done else {}
    return merged


# -- the run --------------------------------------------------------------------------------
def log(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)


def run(s: Settings, log: Optional[Callable[[str], None]] = None) -> dict:
    say = log or (lambda _m: None)
    info: dict[str, dict] = {}
    levels = []
    fixed: dict[str, str] = {}
    if s.urls:
        import httpx

        for url in s.urls:
            url = url.rstrip("/")
            server_info = httpx.get(url + "/get_server_info", timeout=10).json()
            transport = server_info.get("transport") or url
            fixed[transport] = url
            info[transport] = server_info
    for concurrency, n in zip(s.concurrency, s.num_prompts):
        servers: list[Server] = []
        try:
            if fixed:
                targets = dict(fixed)
            else:  # fresh servers per level: the decode step's shape is the batch width
                batch = s.max_running_requests or concurrency
                port = s.port
                for transport in s.transports:
                    servers.append(Server(transport, port or _free_port(), s, batch))
                    if port:
                        port += 1
                targets = {}
                for server in servers:
                    say(f"concurrency {concurrency}: starting the {server.transport} server (batch {batch}) ...")
                    info[server.transport] = server.wait_ready(s.startup_timeout)
                    targets[server.transport] = server.url
            order = [t for t in TRANSPORTS if t in targets] + [t for t in targets if t not in TRANSPORTS]
            main_pids = {sv.transport: sv.proc.pid for sv in servers}
            pids = {t: server_pids(info.get(t, {}), main_pids.get(t)) for t in order}
            if s.warmup:
                warm = make_prompts(s.warmup, s.input_len, s.seed + 999)
                for transport in order:
                    asyncio.run(run_load(targets[transport], warm, s.output_len, math.inf,
                                         min(s.warmup, concurrency), s.seed, s.stream))
            prompts = make_prompts(n, s.input_len, s.seed)
            runs: dict[str, list[dict]] = {t: [] for t in order}
            raw: dict[str, list] = {t: [] for t in order}
            for rnd in range(s.rounds):
                for transport in (order if rnd % 2 == 0 else order[::-1]):
                    say(f"concurrency {concurrency}, round {rnd + 1}/{s.rounds}: {transport}, {n} requests ...")
                    before = cpu_snapshot(pids[transport])
                    results, duration = asyncio.run(run_load(targets[transport], prompts, s.output_len,
                                                             s.request_rate, concurrency, s.seed + rnd, s.stream))
                    after = cpu_snapshot(pids[transport])
                    run_summary = summarize(results, duration)
                    run_summary["cpu_s"] = {k: after[k] - before[k] for k in after if k in before}
                    runs[transport].append(run_summary)
                    raw[transport].append((results, duration))
        finally:
            for server in servers:
                server.stop()
        level = {"concurrency": concurrency, "num_prompts": n,
                 "transports": {t: pool(runs[t], raw[t]) for t in order}}
        if "pickle" in runs and "msgpack" in runs:
            level["ratios"] = _ratios(runs["pickle"], runs["msgpack"])
        levels.append(level)
    ok = bool(levels) and all(m["failed"] == 0 for lv in levels for m in lv["transports"].values())
    return {"kind": "serve", "ok": ok, "settings": _settings_json(s), "meta": _meta(s, info),
            "notes": _notes(s), "levels": levels}


SKIP_FORWARD_NOTE = ("IPC-bound: the servers run --skip-forward (the scheduler's whole loop - batching, "
                     "bookkeeping, time stats, step messages, detokenizer, streaming - with a deterministic "
                     "next-token rule instead of the forward pass), so the time measured is the engine around "
                     "the model: HTTP, tokenizer manager, IPC and detokenization.")


def _notes(s: Settings) -> list[str]:
    if s.urls:
        return []
    if s.skip_forward:
        return [SKIP_FORWARD_NOTE]
    return [TINY_MODEL_NOTE] if s.model is None else []


def _ratios(pickle_runs: list[dict], msgpack_runs: list[dict]) -> dict:
    """msgpack / pickle per round pair, as a bootstrap interval of their geometric mean:
    > 1 is msgpack faster for throughputs, < 1 for latencies (the verdict says it in words)."""
    out: dict[str, dict] = {}
    for key in ("request_throughput", "output_throughput"):
        vals = [m[key] / p[key] for p, m in zip(pickle_runs, msgpack_runs) if p[key] and m[key]]
        out[key] = bootstrap_ratio(vals).to_json()
    for key in ("ttft_ms", "itl_ms", "e2e_ms"):
        vals = [m[key]["median"] / p[key]["median"] for p, m in zip(pickle_runs, msgpack_runs)
                if p[key]["median"] and m[key]["median"] and p[key]["median"] == p[key]["median"]]
        out[key + "_median"] = bootstrap_ratio(vals, higher_is_faster=False).to_json()
    # CPU the engine spent per request, all its processes together: what the transport changes,
    # and much less disturbed by neighbours on a shared machine than wall-clock throughput.
    vals = [m_cpu / p_cpu for p_cpu, m_cpu in zip(map(_engine_cpu_ms, pickle_runs), map(_engine_cpu_ms, msgpack_runs))
            if p_cpu and m_cpu]
    out["engine_cpu_ms"] = bootstrap_ratio(vals, higher_is_faster=False).to_json()
    return out


def _engine_cpu_ms(run: dict) -> Optional[float]:
    """CPU ms per completed request over every engine process of one round (None: not measured)."""
    cpu = run.get("cpu_s") or {}
    return 1000 * sum(cpu.values()) / run["completed"] if cpu and run["completed"] else None


def _settings_json(s: Settings) -> dict:
    d = asdict(s)
    d["request_rate"] = "inf" if math.isinf(s.request_rate) else s.request_rate
    return d


def _meta(s: Settings, info: dict) -> dict:
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "servers": {t: {k: v for k, v in i.items() if k in ("transport", "dp_size", "device",
                                                                 "served_model_name", "context_length")}
                        for t, i in info.items()}}
    try:
        meta["loadavg_at_start"] = os.getloadavg()
    except OSError:
        pass
    return meta


# -- rendering ------------------------------------------------------------------------------
_ROWS = [("completed / failed", None), ("request throughput (req/s)", "request_throughput"),
         ("input token throughput (tok/s)", "input_throughput"),
         ("output token throughput (tok/s)", "output_throughput")]


def _table(report: dict) -> tuple[list[str], list[list[str]]]:
    levels = report["levels"]
    transports = list(levels[0]["transports"]) if levels else []
    header = ["metric"] + [f"{t} @{lv['concurrency']}" for lv in levels for t in transports] + \
             [f"msgpack/pickle @{lv['concurrency']}" for lv in levels if "ratios" in lv]
    rows = []

    def cells(fn: Callable[[dict], str], ratio: Callable[[dict], str]) -> list[str]:
        out = [fn(lv["transports"][t]) for lv in levels for t in transports]
        return out + [ratio(lv["ratios"]) for lv in levels if "ratios" in lv]

    rows.append(["completed / failed (all rounds)"]
                + cells(lambda m: f"{m['completed']} / {m['failed']}", lambda r: ""))
    for label, key in _ROWS[1:]:
        rows.append([label] + cells(lambda m, k=key: f"{m[k]:,.1f}",
                                    lambda r, k=key: _ci_cell(r.get(k))))
    procs = sorted({p for lv in levels for m in lv["transports"].values() for p in m.get("cpu_ms_per_request", {})},
                   key=lambda p: (p != "tokenizer_manager", p))
    for proc in procs:
        rows.append([f"CPU ms per request: {proc}"] + cells(
            lambda m, p=proc: f"{m.get('cpu_ms_per_request', {}).get(p, math.nan):,.2f}", lambda r: ""))
    if procs:
        rows.append(["CPU ms per request: engine, all processes"] + cells(
            lambda m: f"{sum(m.get('cpu_ms_per_request', {}).values()):,.2f}",
            lambda r: _ci_cell(r.get("engine_cpu_ms"))))
    for metric, label in (("ttft_ms", "TTFT"), ("itl_ms", "ITL"), ("e2e_ms", "end-to-end latency")):
        for stat in ("mean", "median", "p90", "p99"):
            rows.append([f"{label} {stat} (ms)"] + cells(
                lambda m, a=metric, b=stat: f"{m[a][b]:,.2f}",
                lambda r, a=metric, b=stat: _ci_cell(r.get(a + "_median")) if b == "median" else ""))
    return header, rows


def _ci_cell(ci: Optional[dict]) -> str:
    if not ci or ci["center"] != ci["center"]:
        return ""
    if ci["lo"] != ci["lo"]:
        return f"{ci['center']:.2f}x"
    return f"{ci['center']:.2f}x [{ci['lo']:.2f}-{ci['hi']:.2f}]"


def decisions(report: dict) -> list[str]:
    """One line per level: the output-throughput verdict from its interval, and when it is
    not distinguishable, how many rounds would likely tell."""
    lines = []
    for lv in report["levels"]:
        ci = lv.get("ratios", {}).get("output_throughput")
        if not ci:
            continue
        line = (f"concurrency {lv['concurrency']}: {ci['verdict']} (output tok/s msgpack/pickle "
                f"{_ci_cell(ci)}, {int(ci['level'] * 100)}% bootstrap interval over {ci['n']} rounds)")
        if ci["verdict"].startswith("not distinguishable"):
            if ci.get("rounds_needed"):
                line += f"; about {ci['rounds_needed']} rounds would separate a difference this size from 1.0"
            elif ci["n"] > 1:
                line += "; the centre is at 1.0: no number of rounds would separate it"
        cpu = lv["ratios"].get("engine_cpu_ms")
        if cpu and cpu["center"] == cpu["center"]:
            word = {"msgpack faster": "msgpack cheaper", "msgpack slower": "msgpack costlier"}.get(
                cpu["verdict"], cpu["verdict"])
            line += f"; engine CPU per request msgpack/pickle {_ci_cell(cpu)}: {word}"
        lines.append(line)
    return lines


def render_text(report: dict) -> str:
    header, rows = _table(report)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = _intro(report) + ["", "  ".join(h.ljust(w) for h, w in zip(header, widths)),
                              "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines += ["", RATIO_NOTE, ""] + decisions(report)
    return "\n".join(lines) + "\n"


RATIO_NOTE = ("msgpack/pickle: geometric mean of the per-round ratios [95% bootstrap interval] (throughput: "
              ">1 = msgpack faster; latency and CPU per request: <1 = msgpack faster / cheaper).")


def render_markdown(report: dict) -> str:
    header, rows = _table(report)
    lines = _intro(report) + ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", RATIO_NOTE, ""] + [f"- {d}" for d in decisions(report)]
    return "\n".join(lines) + "\n"


def _intro(report: dict) -> list[str]:
    s = report["settings"]
    meta = report["meta"]
    lines = [f"preset {s['preset']}: input {s['input_len']} tokens, output {s['output_len']} tokens (ignore_eos), "
             f"request rate {s['request_rate']}, concurrency {s['concurrency']}, requests {s['num_prompts']}, "
             f"{s['rounds']} alternating round(s) per transport"]
    lines.append(f"machine: {meta['cpus']} CPUs, {meta['platform']}, python {meta['python']}"
                 + (f", load average at start {meta['loadavg_at_start'][0]:.1f}" if "loadavg_at_start" in meta else ""))
    servers = meta.get("servers", {})
    if servers:
        lines.append("servers: " + "; ".join(f"{t}: " + ", ".join(f"{k}={v}" for k, v in i.items())
                                             for t, i in servers.items()))
    for note in report.get("notes", []):
        lines.append(note)
    bad = [(lv["concurrency"], t, m["errors"]) for lv in report["levels"] for t, m in lv["transports"].items()
           if m["failed"]]
    for c, t, errors in bad:
        lines.append(f"FAILED requests at concurrency {c} ({t}): {errors}")
    return lines


def write_json(report: dict, path: str) -> None:
    with open(path, "w") as fh:
        json.dump(report, fh, indent=1, default=lambda o: None if isinstance(o, float) and math.isnan(o) else str(o))
        fh.write("\n")
