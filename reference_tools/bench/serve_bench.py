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

The load generator: ``wrk`` (wrk_client.py, a native event loop) for requests answered as one
JSON when it is installed, and for streams from concurrency 256 in the ipc and seed presets;
the Python client (httpx) for the other streams (TTFT, ITL) and wherever wrk is missing
(``--client`` chooses). Each round records the CPU time of the load generator and
of every engine process, so the report says who bounded the throughput (cpu_share.py); the
ipc preset pins the load generator to one core and the engine to the others.

Every msgpack/pickle ratio comes with a bootstrap confidence interval over the rounds
(geometric mean of the per-round ratios) and a verdict: msgpack faster, slower, or not
distinguishable (then with the number of rounds that would likely separate it), given only
where the engine was the bottleneck.
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
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, Sequence

from reference_tools.bench import cpu_share
from reference_tools.bench.cpu_share import Placement, process_cpu_seconds
from reference_tools.bench.serve_render import decisions as decisions  # the command's API: rendering lives there
from reference_tools.bench.serve_render import render_markdown as render_markdown
from reference_tools.bench.serve_render import render_text as render_text
from reference_tools.bench.serve_render import write_json as write_json
from reference_tools.bench.timing import bootstrap_ratio, percentile
from reference_tools.bench.wrk_client import find_wrk, run_wrk

TRANSPORTS = ("pickle", "msgpack")
CLIENTS = ("auto", "wrk", "python")
PRESETS: dict[str, dict[str, Any]] = {
    # Built-in tiny model on a 2-core CPU: a lone request, then a full batch.
    "cpu": dict(concurrency=[1, 256], num_prompts=[16, 512], input_len=128, output_len=32, rounds=3, device="cpu",
                dp_size=1),
    # IPC-bound: no forward pass, short prompts, long outputs streamed token by token, so the
    # step messages (scheduler -> detokenizer -> tokenizer manager, every step) dominate.
    # IPC-bound: no forward pass, short prompts, long outputs, so the step messages (scheduler ->
    # detokenizer -> tokenizer manager) dominate; answered as one JSON (native client: wrk) and
    # streamed token by token; load generator and engine on separate cores.
    "ipc": dict(concurrency=[1, 256, 1024], num_prompts=[128, 512, 1024], input_len=16, output_len=128, rounds=4,
                device="cpu", dp_size=1, skip_forward=True, streams=[False, True], pin=True, json_prompts_factor=4,
                wrk_streams_from=256),
    # The seed's shape on CPU (SGLang PR: 1024 input / 200 output tokens, concurrency 1 and 1024), IPC-bound
    # and pinned as the ipc preset is, JSON answers (wrk) and streams; the built-in tiny model has a
    # 512-token context, so the preset serves a copy of it whose config allows SEED_POSITIONS.
    # Every round lasts 10 s or more (shorter ones moved 0.87x-1.12x between sittings of one tree):
    # JSON answers come back 8-15x as fast as streams, so their levels send 8x the requests.
    "seed": dict(concurrency=[1, 1024], num_prompts=[640, 2048], input_len=1024, output_len=200, rounds=2,
                 device="cpu", dp_size=1, skip_forward=True, streams=[False, True], pin=True,
                 model_positions=2048, json_prompts_factor=8, wrk_streams_from=256),
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
    streams: list[bool] = field(default_factory=lambda: [True])  # True: SSE token stream; False: one JSON answer
    client: str = "auto"  # load generator: wrk, python, auto (wrk for JSON answers when installed)
    pin: bool = False  # load generator and engine on separate cores (cpu_share.plan_placement)
    json_prompts_factor: int = 1  # JSON-answer levels send this many times the requests (they are quick)
    # --client auto streams through wrk from this concurrency on (None: never): at c=1024 a Python
    # client reading a chunk per token, not the engine, bounds the throughput.
    wrk_streams_from: Optional[int] = None
    max_running_requests: Optional[int] = None  # None: each level's concurrency
    context_length: Optional[int] = None  # None: input + output (the built-in model), the model's own otherwise
    # Without --model: serve a copy of the built-in tiny checkpoint whose config allows this many
    # positions (the seed preset; made once under the engine's cache directory). None: the model itself.
    model_positions: Optional[int] = None
    port: int = 0  # 0: free ports
    startup_timeout: float = 180.0
    request_timeout: float = 600.0
    server_args: list[str] = field(default_factory=list)
    profile_dir: Optional[str] = None  # servers write cProfile files under <dir>/c<concurrency>[-json]-<transport>


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", choices=sorted(PRESETS), default="cpu",
                   help="cpu (default): sized for a small CPU machine and the tiny model; ipc: IPC-bound "
                        "(servers run --skip-forward; concurrency 1, 256, 1024; output 128; JSON answers "
                        "through wrk, then streams (through wrk from concurrency 256); load generator and "
                        "engine pinned to separate cores); "
                        "seed: the seed's shape on CPU (input 1024, output 200, concurrency 1 and 1024, "
                        "otherwise as ipc, every round 10 s or more; a copy of the tiny model with a 2048-token "
                        "context; add --dp-size 2 "
                        "where the cores allow); gpu: the seed's settings on a GPU (concurrency 1024, 4096 "
                        "requests, input 1024, output 200; needs --model)")
    p.add_argument("--skip-forward", action="store_true", default=None,
                   help="start the servers with --skip-forward (no forward pass; the ipc preset does)")
    p.add_argument("--no-stream", dest="stream", action="store_false", default=None,
                   help="requests ask for one JSON answer instead of a token stream (no TTFT/ITL): the "
                        "tokenizer manager then does no per-token HTTP work")
    p.add_argument("--stream", dest="stream", action="store_true",
                   help="only streamed requests (the ipc preset runs both)")
    p.add_argument("--client", choices=list(CLIENTS), default=None,
                   help="load generator: wrk (native, Debian package wrk; end-to-end latency only), python "
                        "(httpx; TTFT and ITL), auto (default: wrk for JSON answers when installed, python "
                        "for streams; the ipc and seed presets stream through wrk too from concurrency 256)")
    p.add_argument("--pin", dest="pin", action="store_true", default=None,
                   help="load generator on one core, every engine process on the others (the ipc preset does)")
    p.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin")
    p.add_argument("--url", action="append", default=[],
                   help="benchmark a running server instead of starting one (repeatable: one per transport; "
                        "the transport is read from its /get_server_info)")
    p.add_argument("--transport", action="append", choices=list(TRANSPORTS), default=[],
                   help="only this transport (repeatable; default both)")
    p.add_argument("--concurrency", type=_int_list, help="max concurrent requests, comma list (e.g. 1,256)")
    p.add_argument("--num-prompts", type=_int_list,
                   help="requests per run, comma list matching --concurrency (default: the preset's for its own "
                        "levels, its JSON levels multiplied as in the preset; 2 x concurrency for others)")
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
                                         "DIR/c<concurrency>[-json]-<transport>/ (summary: python -m "
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
                 "skip_forward", "profile_dir", "client", "pin"):
        value = getattr(args, name, None)
        if value is not None:
            setattr(s, name, value)
    if getattr(args, "stream", None) is not None:
        s.streams = [args.stream]
    if args.concurrency is not None and args.num_prompts is None:
        # A level of the preset keeps its request count (and its JSON levels' factor): one level
        # of a preset runs as it does in the whole preset; another level gets two per slot.
        counts = dict(zip(base["concurrency"], base["num_prompts"]))
        s.num_prompts = [counts.get(c, max(8, 2 * c)) for c in s.concurrency]
    if args.num_prompts is not None:
        s.json_prompts_factor = 1  # the counts asked for, as given
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
    need = s.input_len + s.output_len
    if s.model is None and not s.urls:
        if s.model_positions is None and need > 512:
            raise ValueError(f"the built-in tiny model has a 512-token context; input {s.input_len} + output "
                             f"{s.output_len} does not fit (use --model)")
        if s.model_positions is not None and need > s.model_positions:
            raise ValueError(f"the {s.preset} preset's copy of the tiny model has a {s.model_positions}-token "
                             f"context; input {s.input_len} + output {s.output_len} does not fit (use --model)")
    if s.model is not None and not s.urls:
        if not os.path.isfile(os.path.join(s.model, "config.json")):
            raise ValueError(f"--model {s.model}: no config.json there (a Hugging Face-style checkpoint directory)")
        positions = model_positions(s.model)
        if positions is not None and need > positions:
            raise ValueError(f"--model {s.model}: its context ({positions} positions, config.json "
                             f"max_position_embeddings) is too small for input {s.input_len} + output "
                             f"{s.output_len}")
    if any(c < 1 for c in s.concurrency) or any(n < 1 for n in s.num_prompts):
        raise ValueError("--concurrency and --num-prompts must be >= 1")
    if s.client == "wrk" and find_wrk() is None:
        raise ValueError("--client wrk: wrk is not installed (Debian: apt-get install -y --no-install-recommends "
                         "wrk), or use --client python")
    if s.preset == "seed" and s.client == "auto" and find_wrk() is None and any(
            _wants_wrk(s, stream, c) for stream in s.streams for c in s.concurrency):
        raise ValueError("the seed preset sends its JSON answers, and its streams from concurrency "
                         f"{s.wrk_streams_from}, through wrk, which is not installed (Debian: apt-get install -y "
                         "--no-install-recommends wrk); or --client python")
    if not s.urls and s.dp_size < 1:
        raise ValueError("--dp-size must be >= 1")
    if not s.urls and s.dp_size > 1:
        cores = engine_cores(s)
        if s.dp_size > len(cores):
            raise ValueError(f"--dp-size {s.dp_size} is more than the {len(cores)} core(s) the engine may use "
                             f"({_core_list(cores)}{', the load generator has its own' if s.pin else ''}); "
                             f"use --dp-size {len(cores)}{' or --no-pin' if s.pin else ''}")
    if s.context_length is not None and s.context_length < s.input_len + s.output_len:
        raise ValueError(f"--context-length {s.context_length} < input {s.input_len} + output {s.output_len}")


def engine_cores(s: Settings) -> tuple[int, ...]:
    """The cores the engine's processes may use: the pinned placement's, else all of this process's."""
    placement = cpu_share.plan_placement(s.pin)
    return placement.engine or tuple(sorted(os.sched_getaffinity(0)))


def _core_list(cores: Sequence[int]) -> str:
    return f"core{'s' if len(cores) != 1 else ''} {','.join(map(str, cores))}"


def model_positions(model: str) -> Optional[int]:
    """max_position_embeddings of a checkpoint's config.json (None when it does not say)."""
    try:
        with open(os.path.join(model, "config.json")) as fh:
            value = json.load(fh).get("max_position_embeddings")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value > 0 else None


def long_context_checkpoint(positions: int, root: Optional[str] = None) -> str:
    """A copy of the built-in tiny checkpoint whose config allows `positions` positions (same
    weights: the model is rotary, no table grows), made once under the engine's cache directory
    (IPC_ENGINE_CACHE, else ~/.cache/ipc-conformance/models), written atomically."""
    import shutil
    import tempfile
    from pathlib import Path

    from reference_impl.engine import checkpoint

    base = Path(root) if root else checkpoint.cache_root()
    target = base / f"{checkpoint.TINY_MODEL_NAME}-ctx{positions}"
    if model_positions(str(target)) == positions and (target / checkpoint.WEIGHTS_FILE).exists():
        return str(target)
    tiny = checkpoint.ensure_default_checkpoint(base)
    staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=base))
    try:
        for item in tiny.iterdir():
            shutil.copy2(item, staging / item.name)
        config = json.loads((staging / "config.json").read_text())
        config["max_position_embeddings"] = positions
        (staging / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(staging, target)
        except OSError:
            if model_positions(str(target)) != positions:
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return str(target)


def server_context(s: Settings) -> Optional[int]:
    if s.context_length is not None:
        return s.context_length
    return s.input_len + s.output_len if s.model is None or s.model_positions is not None else None


# -- servers ------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One reference server process (ipc-conformance serve), started and stopped here."""

    def __init__(self, transport: str, port: int, s: Settings, batch: int, cores: Sequence[int] = (),
                 label: str = "") -> None:
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
            cmd += ["--profile-dir", os.path.join(s.profile_dir, f"c{batch}{label}-{transport}")]
        if server_context(s) is not None:
            cmd += ["--context-length", str(server_context(s))]
        cmd += s.server_args
        self.cmd = cmd
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("IPC_TRANSPORT", None)
        env.pop("SGLANG_USE_PICKLE_IPC", None)
        pin = (lambda: os.sched_setaffinity(0, set(cores))) if cores else None  # its children inherit it
        # Its log goes to a file, not a pipe nobody reads while the rounds run (a full pipe blocks
        # the server's next log line). Profiled, a server stopping after a wrk round that cut off
        # 1024 streams did not write its profiles within 20 s: killed, they were lost.
        self.log = tempfile.TemporaryFile()
        self.stop_timeout = 60.0 if s.profile_dir else 20.0  # a profiled server writes its profiles first
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log, env=env,
                                     start_new_session=True, preexec_fn=pin)

    def log_tail(self) -> str:
        self.log.seek(0, os.SEEK_END)
        self.log.seek(max(0, self.log.tell() - 2000))
        return self.log.read().decode(errors="replace")

    def wait_ready(self, timeout: float) -> dict:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.transport} server exited ({self.proc.returncode}): {self.log_tail()}")
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
                self.proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


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


def pool(runs: Sequence[dict], raw: Sequence[Optional[tuple[list[RequestResult], float]]]) -> dict:
    """One transport at one level over all rounds: latencies pooled (wrk rounds, which keep no
    per-request results: the median of their per-round figures), throughputs by median, CPU
    per request and CPU shares over all rounds."""
    kept = [r for r in raw if r is not None]
    results = [r for rs, _ in kept for r in rs]
    merged = summarize(results, sum(d for _, d in kept))
    if not kept:
        merged["completed"] = sum(run["completed"] for run in runs)
        merged["failed"] = sum(run["failed"] for run in runs)
        merged["errors"] = sorted({e for run in runs for e in run["errors"]})[:5]
        for key in ("ttft_ms", "itl_ms", "e2e_ms"):
            merged[key] = {stat: percentile([run[key][stat] for run in runs if run[key][stat] == run[key][stat]], 50)
                           for stat in ("mean", "median", "p90", "p99")}
    for key in ("request_throughput", "input_throughput", "output_throughput"):
        merged[key] = percentile([run[key] for run in runs], 50)
        merged[key + "_rounds"] = [run[key] for run in runs]
    # CPU seconds per completed request, per process, over all rounds.
    done = sum(run["completed"] for run in runs)
    names = sorted({k for run in runs for k in run.get("cpu_s", {})})
    merged["cpu_ms_per_request"] = {k: 1000 * sum(run.get("cpu_s", {}).get(k, 0.0) for run in runs) / done
                                    for k in names} if done else {}
    merged["round_s"] = [run["duration_s"] for run in runs]
    merged["shares"] = pool_shares(runs)
    merged["client"] = runs[0].get("client") if runs else None
    return merged


def pool_shares(runs: Sequence[dict]) -> dict:
    """CPU shares over all rounds (CPU seconds / wall seconds; 1.0 = one core for the whole time),
    and the bottleneck that they imply."""
    wall = sum(run.get("wall_s", 0.0) for run in runs)
    if not wall:
        return {}
    names = sorted({k for run in runs for k in run.get("cpu_s", {})}, key=lambda p: (p != "tokenizer_manager", p))
    processes = {k: sum(run.get("cpu_s", {}).get(k, 0.0) for run in runs) / wall for k in names}
    client = sum(run.get("client_cpu_s", 0.0) for run in runs) / wall
    placement = runs[0].get("placement", {})
    shared = max(1, len(runs[0].get("cores_shared", [])) or 1)
    client_cores = len(placement.get("client") or []) or shared
    engine_cores = len(placement.get("engine") or []) or shared
    engine = sum(processes.values())
    busy = [run["engine_cores_busy"] for run in runs if run.get("engine_cores_busy") is not None]
    out = {"client": client, "processes": processes, "engine": engine,
           "client_of_its_cores": client / client_cores, "engine_of_its_cores": engine / engine_cores,
           "engine_cores_busy": sum(busy) / len(busy) if busy else None}
    out["bottleneck"] = cpu_share.bottleneck(out["client_of_its_cores"], out["engine_of_its_cores"],
                                             out["engine_cores_busy"])
    return out


# -- the run --------------------------------------------------------------------------------
def log(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)


def _wants_wrk(s: Settings, stream: bool, concurrency: int) -> bool:
    """Whether --client auto sends a level through wrk: JSON answers, and streams from the
    preset's wrk_streams_from."""
    return not stream or (s.wrk_streams_from is not None and concurrency >= s.wrk_streams_from)


def client_for(s: Settings, stream: bool, concurrency: int = 1) -> str:
    """wrk or python for a level (auto: _wants_wrk, when wrk is installed)."""
    if s.client == "auto":
        return "wrk" if _wants_wrk(s, stream, concurrency) and find_wrk() else "python"
    return s.client


def one_round(url: str, client: str, prompts: Sequence[list[int]], s: Settings, concurrency: int, seed: int,
              stream: bool, pids: dict[str, int], placement: Placement) -> tuple[dict, Optional[tuple]]:
    """One round against one server: its summary with CPU seconds per engine process, the load
    generator's CPU seconds, the wall time and how busy the engine's cores were."""
    cores = list(placement.engine) or sorted(os.sched_getaffinity(0))
    before, cores_before = cpu_snapshot(pids), cpu_share.core_times()
    t0, c0 = time.perf_counter(), time.process_time()
    raw = None
    if client == "wrk":
        w = run_wrk(url, prompts, s.output_len, concurrency, len(prompts), stream, timeout_s=s.request_timeout)
        wall, client_cpu = time.perf_counter() - t0, w.cpu_s + (time.process_time() - c0)
        summary = _wrk_summary(w, s.input_len, s.output_len, len(prompts))
    else:
        results, duration = asyncio.run(run_load(url, prompts, s.output_len, s.request_rate, concurrency, seed,
                                                 stream))
        wall, client_cpu = time.perf_counter() - t0, time.process_time() - c0
        summary = summarize(results, duration)
        raw = (results, duration)
    after, cores_after = cpu_snapshot(pids), cpu_share.core_times()
    summary.update(cpu_s={k: after[k] - before[k] for k in after if k in before}, client=client,
                   client_cpu_s=client_cpu, wall_s=wall, placement=placement.to_json(), cores_shared=cores,
                   engine_cores_busy=cpu_share.busy_share(cores_before, cores_after, cores))
    return summary, raw


def _wrk_summary(w: Any, input_len: int, output_len: int, sent: int) -> dict:
    nan = {"mean": math.nan, "median": math.nan, "p90": math.nan, "p99": math.nan}
    d = w.duration if w.duration == w.duration and w.duration > 0 else math.nan
    return {"completed": w.ok, "failed": sent - w.ok, "errors": [w.error] if w.error else [], "duration_s": d,
            "request_throughput": w.ok / d, "input_throughput": w.ok * input_len / d,
            "output_throughput": w.ok * output_len / d, "ttft_ms": dict(nan), "itl_ms": dict(nan),
            "e2e_ms": dict(w.latency_ms) if w.latency_ms else dict(nan)}


IDLE_WAIT_S = 60.0  # how long a round's end waits for the server to finish the requests wrk cut off


def wait_idle(url: str, timeout: float = IDLE_WAIT_S, poll_timeout: float = 5.0) -> bool:
    """Until the server holds no request (wrk leaves its last ones in flight; the server aborts
    them), at most `timeout` s: True once idle (or gone, or not saying: nothing to wait for),
    False at the deadline. A server too busy to answer a poll within `poll_timeout` is not idle
    (taking it for idle let a profiled server be stopped with a thousand streams still running,
    and would let the next round start beside them on the engine's core)."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info = httpx.get(url + "/get_server_info", timeout=poll_timeout).json()
            if info.get("in_flight", {}).get("requests", 0) == 0:
                return True
        except httpx.TimeoutException:
            continue  # busy: ask again
        except (httpx.HTTPError, ValueError):
            return True
        time.sleep(0.1)
    return False


def _settle(url: str, transport: str, say: Callable[[str], None]) -> None:
    if not wait_idle(url):
        say(f"the {transport} server still held requests {IDLE_WAIT_S:g} s after its round; "
            "the next round runs beside them")


def run(s: Settings, log: Optional[Callable[[str], None]] = None) -> dict:
    say = log or (lambda _m: None)
    info: dict[str, dict] = {}
    levels = []
    fixed: dict[str, str] = {}
    placement = cpu_share.plan_placement(s.pin and not s.urls)
    if s.model is None and s.model_positions is not None and not s.urls:
        s.model = long_context_checkpoint(s.model_positions)
        say(f"model: the tiny checkpoint with a {s.model_positions}-token context, {s.model}")
    load_at_start = _loadavg()
    own_affinity = os.sched_getaffinity(0)
    if s.urls:
        import httpx

        for url in s.urls:
            url = url.rstrip("/")
            server_info = httpx.get(url + "/get_server_info", timeout=10).json()
            transport = server_info.get("transport") or url
            fixed[transport] = url
            info[transport] = server_info
    try:
        cpu_share.pin_self(placement.client)  # the load generator (this process, wrk) on its core
        for stream in s.streams:
            for concurrency, n in zip(s.concurrency, s.num_prompts):
                n = n if stream else n * s.json_prompts_factor
                levels.append(_level(s, stream, concurrency, n, fixed, info, placement, say))
    finally:
        os.sched_setaffinity(0, own_affinity)
    ok = bool(levels) and all(m["failed"] == 0 for lv in levels for m in lv["transports"].values())
    meta = _meta(s, info, placement)
    meta["loadavg_at_start"], meta["loadavg_at_end"] = load_at_start, _loadavg()
    return {"kind": "serve", "ok": ok, "settings": _settings_json(s), "meta": meta, "notes": _notes(s),
            "levels": levels}


def _loadavg() -> Optional[tuple[float, float, float]]:
    try:
        return os.getloadavg()
    except OSError:
        return None


def _level(s: Settings, stream: bool, concurrency: int, n: int, fixed: dict[str, str], info: dict[str, dict],
           placement: Placement, say: Callable[[str], None]) -> dict:
    client = client_for(s, stream, concurrency)
    mode = "stream" if stream else "json"
    servers: list[Server] = []
    try:
        if fixed:
            targets = dict(fixed)
        else:  # fresh servers per level: the decode step's shape is the batch width
            batch = s.max_running_requests or concurrency
            port = s.port
            for transport in s.transports:
                servers.append(Server(transport, port or _free_port(), s, batch, placement.engine,
                                      "" if stream else "-json"))
                if port:
                    port += 1
            targets = {}
            for server in servers:
                say(f"concurrency {concurrency} ({mode}): starting the {server.transport} server (batch {batch}) ...")
                info[server.transport] = server.wait_ready(s.startup_timeout)
                targets[server.transport] = server.url
        order = [t for t in TRANSPORTS if t in targets] + [t for t in targets if t not in TRANSPORTS]
        main_pids = {sv.transport: sv.proc.pid for sv in servers}
        pids = {t: server_pids(info.get(t, {}), main_pids.get(t)) for t in order}
        if s.warmup:
            warm = make_prompts(s.warmup, s.input_len, s.seed + 999)
            for transport in order:
                one_round(targets[transport], client, warm, s, min(s.warmup, concurrency), s.seed, stream,
                          pids[transport], placement)
                _settle(targets[transport], transport, say)
        prompts = make_prompts(n, s.input_len, s.seed)
        runs: dict[str, list[dict]] = {t: [] for t in order}
        raw: dict[str, list] = {t: [] for t in order}
        for rnd in range(s.rounds):
            for transport in (order if rnd % 2 == 0 else order[::-1]):
                say(f"concurrency {concurrency} ({mode}, {client}), round {rnd + 1}/{s.rounds}: {transport}, "
                    f"{n} requests ...")
                summary, results = one_round(targets[transport], client, prompts, s, concurrency, s.seed + rnd,
                                             stream, pids[transport], placement)
                runs[transport].append(summary)
                raw[transport].append(results)
                _settle(targets[transport], transport, say)
    finally:
        for server in servers:
            server.stop()
    level = {"concurrency": concurrency, "num_prompts": n, "stream": stream, "client": client,
             "transports": {t: pool(runs[t], raw[t]) for t in order}}
    level["bottleneck"] = cpu_share.level_bottleneck([m.get("shares", {}) for m in level["transports"].values()])
    if "pickle" in runs and "msgpack" in runs:
        level["ratios"] = _ratios(runs["pickle"], runs["msgpack"])
    return level


SKIP_FORWARD_NOTE = ("IPC-bound: the servers run --skip-forward (the scheduler's whole loop - batching, "
                     "bookkeeping, time stats, step messages, detokenizer, streaming - with a deterministic "
                     "next-token rule instead of the forward pass), so the time measured is the engine around "
                     "the model: HTTP, tokenizer manager, IPC and detokenization.")


def _notes(s: Settings) -> list[str]:
    if s.urls:
        return []
    copy = ([f"model: a copy of the built-in tiny checkpoint whose config allows {s.model_positions} positions "
             f"(the built-in one allows 512), served with context input + output"]
            if s.model_positions is not None and s.model and os.path.basename(s.model).endswith(
                f"-ctx{s.model_positions}") else [])
    if s.skip_forward:
        return [SKIP_FORWARD_NOTE] + copy
    return ([TINY_MODEL_NOTE] if s.model is None else []) + copy


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


def _meta(s: Settings, info: dict, placement: Placement) -> dict:
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "placement": placement.to_json(), "wrk": find_wrk(),
            "servers": {t: {k: v for k, v in i.items() if k in ("transport", "dp_size", "device",
                                                                 "served_model_name", "context_length")}
                        for t, i in info.items()}}
    return meta
