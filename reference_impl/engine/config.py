"""Launch configuration shared by every engine process, and the IPC endpoint names.

One EngineConfig is built by the launcher (from the command line) and handed,
pickled, to every spawned process; IpcNames says which ipc:// endpoint each
process binds. Nothing here imports torch, so the CLI stays light.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass, field
from typing import Optional

#: Process names as they appear in logs, traces, the tap and /get_server_info.
TOKENIZER_MANAGER = "tokenizer_manager"
CONTROLLER = "controller"
DETOKENIZER = "detokenizer"


#: The data-parallel controller's routing methods (SGLang's names; controller.py).
LOAD_BALANCE_METHODS = ("round_robin", "total_requests", "total_tokens")


def scheduler_name(dp_rank: int) -> str:
    return f"scheduler_{dp_rank}"


@dataclass(frozen=True)
class EngineConfig:
    """Everything a process needs to know. Immutable; resolved() fills the defaults."""

    model_path: Optional[str] = None  # None: the built-in tiny checkpoint (written on first use); "stub": stub_model.py
    dp_size: int = 1
    load_balance_method: str = "round_robin"  # how the controller picks a rank: LOAD_BALANCE_METHODS
    device: str = "auto"  # "auto" | "cpu" | "cuda" | "cuda:N"
    host: str = "127.0.0.1"
    port: int = 30000
    transport: Optional[str] = None  # "pickle" | "msgpack"; None: env IPC_TRANSPORT, else msgpack
    served_model_name: Optional[str] = None
    max_running_requests: int = 8  # continuous-batching width per scheduler (the decode batch shape)
    context_length: Optional[int] = None  # None: the model's max_position_embeddings
    stream_interval: int = 1  # a streaming request gets a chunk every N decode steps
    request_timeout_s: float = 300.0  # hard bound on one request inside the tokenizer manager
    startup_timeout_s: float = 120.0
    threads_per_process: int = 1  # torch intra-op threads; fixed so results do not depend on load
    log_level: str = "info"
    trace_dir: Optional[str] = None  # OpenTelemetry spans as JSON lines, one file per process
    tap_dir: Optional[str] = None  # test hook: every received IPC frame, one file per process
    max_request_bytes: int = 64 << 20  # HTTP request bodies beyond this are refused with 413
    # When a child process dies: False = keep serving 503s (and /health 503) until stopped or
    # restarted by a supervisor; True = fail the waiting requests, then shut everything down
    # and exit with status 3 (SGLang's behaviour: a dead scheduler takes the server down).
    exit_on_child_death: bool = False
    # Test hook: processes whose receive path skips the PickleWrapper unwrap (e.g.
    # ("controller",)), to prove that the conformance checks notice. Never in production.
    debug_skip_unwrap: tuple[str, ...] = ()
    # IPC-bound mode (like SGLang's skip-forward / dummy-weight modes): the scheduler runs its
    # whole loop, but the model step is a deterministic next-token rule that costs nothing, so
    # what remains is batching, bookkeeping, time stats, IPC and detokenization.
    skip_forward: bool = False
    profile_dir: Optional[str] = None  # each process's loop under cProfile, written here on exit
    # How the engine processes start: "spawn" (each imports the engine and torch itself) or
    # "forkserver" (one server process imports them once and forks each child: faster to start
    # on a small machine; CUDA is never initialised in it).
    start_method: str = "spawn"

    def resolved(self) -> "EngineConfig":
        from reference_impl import codec

        transport = codec.resolve_transport(self.transport)  # env var when None; validates
        if self.load_balance_method not in LOAD_BALANCE_METHODS:
            raise ValueError(f"unknown load_balance_method {self.load_balance_method!r}; choose one of "
                             f"{', '.join(LOAD_BALANCE_METHODS)}")
        if self.start_method not in ("spawn", "forkserver"):
            raise ValueError(f"unknown start_method {self.start_method!r}; choose spawn or forkserver")
        if self.dp_size < 1:
            raise ValueError(f"dp_size must be >= 1, got {self.dp_size}")
        if self.max_running_requests < 1:
            raise ValueError(f"max_running_requests must be >= 1, got {self.max_running_requests}")
        if self.max_request_bytes < 1:
            raise ValueError(f"max_request_bytes must be >= 1, got {self.max_request_bytes}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0-65535, got {self.port}")
        for name in ("context_length", "stream_interval", "threads_per_process"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.request_timeout_s <= 0:
            raise ValueError(f"request_timeout_s must be > 0, got {self.request_timeout_s}")
        device = resolve_device(self.device)
        model_path = self.model_path
        if model_path == "stub":
            from .stub_model import ensure_stub_checkpoint

            model_path = str(ensure_stub_checkpoint())
        elif model_path is None:
            from .checkpoint import ensure_default_checkpoint

            model_path = str(ensure_default_checkpoint())
        name = self.served_model_name or os.path.basename(os.path.normpath(model_path))
        return dataclasses.replace(self, transport=transport, device=device, model_path=model_path,
                                   served_model_name=name)

    def scheduler_device(self, dp_rank: int) -> str:
        """cuda ranks spread over the visible GPUs; cpu stays cpu."""
        if self.device == "cuda":
            import torch

            return f"cuda:{dp_rank % max(1, torch.cuda.device_count())}"
        return self.device


def resolve_device(device: str) -> str:
    """'auto' picks cuda when torch sees a GPU; asking for cuda without one is an error."""
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"unknown device {device!r}; choose auto, cpu or cuda")
    if device == "cpu":
        return device
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available():
        raise ValueError(f"--device {device} requested but torch.cuda.is_available() is False")
    return device


@dataclass(frozen=True)
class IpcNames:
    """The ipc:// endpoints, all inside one private directory (mode 0700).

    Receivers bind, senders connect (PUSH -> PULL everywhere):
      tokenizer_manager  <- detokenizer (outputs), schedulers + controller (control replies, errors)
      controller         <- tokenizer_manager
      schedulers[r]      <- controller
      detokenizer        <- schedulers
    """

    ipc_dir: str
    tokenizer_manager: str
    controller: str
    detokenizer: str
    schedulers: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def create(cls, dp_size: int) -> "IpcNames":
        # A short prefix: unix socket paths are limited to ~107 bytes.
        ipc_dir = tempfile.mkdtemp(prefix="ipce-")
        os.chmod(ipc_dir, 0o700)

        def name(stem: str) -> str:
            return f"ipc://{os.path.join(ipc_dir, stem)}"

        return cls(
            ipc_dir=ipc_dir,
            tokenizer_manager=name("tokenizer_manager"),
            controller=name("controller"),
            detokenizer=name("detokenizer"),
            schedulers=tuple(name(f"scheduler_{r}") for r in range(dp_size)),
        )
