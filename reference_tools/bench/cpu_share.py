"""Who used the CPU during a benchmark round: per-process CPU shares, core pinning, the bottleneck.

A throughput ratio says something about the transports only when the engine bounds the
throughput. Each round therefore records the CPU time of the load generator and of every
engine process (Linux ``/proc/<pid>/stat``: utime + stime), and how busy the cores were
(``/proc/stat``, every process on them, the neighbours' included). A share is CPU seconds over
wall seconds: 100% is one core kept busy for the whole round.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Sequence

# A side whose CPU share of the cores it may use reaches this is saturated: it bounds the throughput.
SATURATED = 0.5
# Below this share the load generator is idle enough that it cannot be what limits a round.
CLIENT_IDLE = 0.25
# Cores this busy (every process on them) have no time left: when the engine's are, and the load
# generator is not saturated, the engine's side bounds the round even if other processes (the
# neighbours on a shared machine) took part of its cores.
CORES_FULL = 0.9


@dataclass(frozen=True)
class Placement:
    """Which cores the load generator and the engine may use (empty: not pinned)."""

    client: tuple[int, ...]
    engine: tuple[int, ...]
    note: str

    @property
    def pinned(self) -> bool:
        return bool(self.client and self.engine)

    def to_json(self) -> dict:
        return {"client": list(self.client), "engine": list(self.engine), "pinned": self.pinned, "note": self.note}


def plan_placement(pin: bool, cpus: Optional[Sequence[int]] = None) -> Placement:
    """The load generator on the first core this process may use, the engine on all the others;
    no pinning on a single core or when not asked."""
    available = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    if not pin:
        return Placement((), (), f"not pinned: the load generator and the engine share cores {_cores(available)}")
    if len(available) < 2:
        return Placement((), (), f"not pinned: only core {_cores(available)} is available, so the load "
                                 "generator and the engine share it")
    client, engine = (available[0],), tuple(available[1:])
    return Placement(client, engine, f"pinned: load generator on core {_cores(client)}, every engine process "
                                     f"(HTTP server + tokenizer manager, controller, scheduler(s), detokenizer) on "
                                     f"core{'s' if len(engine) > 1 else ''} {_cores(engine)}")


def _cores(cores: Sequence[int]) -> str:
    return ",".join(str(c) for c in cores)


def pin_self(cores: Sequence[int]) -> None:
    """Pin this process (and what it starts from now on) to cores; no-op when empty."""
    if cores:
        os.sched_setaffinity(0, set(cores))


def process_cpu_seconds(pid: int) -> Optional[float]:
    """utime + stime of a local process (Linux /proc), None elsewhere or when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def core_times() -> dict[int, tuple[float, float]]:
    """Per core: (busy, total) jiffies since boot from /proc/stat ({} where it cannot be read)."""
    out: dict[int, tuple[float, float]] = {}
    try:
        with open("/proc/stat") as fh:
            for line in fh:
                if line.startswith("cpu") and line[3:4].isdigit():
                    name, *vals = line.split()
                    nums = [float(v) for v in vals[:8]]
                    idle = nums[3] + nums[4]  # idle + iowait
                    out[int(name[3:])] = (sum(nums) - idle, sum(nums))
    except OSError:
        pass
    return out


def busy_share(before: dict[int, tuple[float, float]], after: dict[int, tuple[float, float]],
               cores: Sequence[int]) -> Optional[float]:
    """How busy these cores were between two core_times() readings (every process on them), 0..1."""
    busy = total = 0.0
    for core in cores:
        if core in before and core in after:
            busy += after[core][0] - before[core][0]
            total += after[core][1] - before[core][1]
    return busy / total if total > 0 else None


def bottleneck(client_share: Optional[float], engine_share: Optional[float],
               engine_cores_busy: Optional[float] = None) -> str:
    """Who bounded a round, from the shares of the cores each side may use (0..1): 'client',
    'engine', 'engine (cores shared)' (the engine's cores full, other processes holding part of
    them), 'engine (latency)' (nobody saturated, the client idle: the engine's pipeline latency
    sets the pace) or 'unclear'."""
    if client_share is None or engine_share is None:
        return "unclear"
    if client_share >= SATURATED and client_share >= engine_share:
        return "client"
    if engine_share >= SATURATED:
        return "engine"
    if engine_cores_busy is not None and engine_cores_busy >= CORES_FULL:
        return "engine (cores shared)"
    if client_share < CLIENT_IDLE:
        return "engine (latency)"
    return "unclear"


def level_bottleneck(shares: list[dict]) -> str:
    """The bottleneck of a level from its transports' pooled shares (their means)."""
    shares = [sh for sh in shares if sh]

    def mean(key: str) -> Optional[float]:
        values = [sh[key] for sh in shares if sh.get(key) is not None]
        return sum(values) / len(values) if values else None

    return bottleneck(mean("client_of_its_cores"), mean("engine_of_its_cores"), mean("engine_cores_busy"))


def engine_bound(verdict: str) -> bool:
    return verdict.startswith("engine")
