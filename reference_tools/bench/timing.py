"""Side-by-side timing: every case of a comparison runs in every repetition, in rotating
order, so drift and neighbours' load hit all of them alike; ratios are taken per
repetition (paired) and summarised by their median and spread.

No absolute threshold lives here: results are numbers to report, never pass/fail.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

CLOCKS = {
    # CPU time of this process (user + system, all threads): what the code itself costs, and
    # much less disturbed by other processes competing for the cores than wall time.
    "cpu": time.process_time,
    "wall": time.perf_counter,
}


@dataclass(frozen=True)
class Stat:
    """Median and spread (25th-75th percentile) of a sample; n values."""

    median: float
    p25: float
    p75: float
    min: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> "Stat":
        xs = sorted(v for v in values if v is not None and math.isfinite(v))
        if not xs:
            return cls(math.nan, math.nan, math.nan, math.nan, 0)
        return cls(statistics.median(xs), _quantile(xs, 0.25), _quantile(xs, 0.75), xs[0], len(xs))

    def to_json(self) -> dict:
        return {"median": self.median, "p25": self.p25, "p75": self.p75, "min": self.min, "n": self.n}


def _quantile(xs: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (xs sorted)."""
    if len(xs) == 1:
        return xs[0]
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def percentile(values: Sequence[float], q: float) -> float:
    xs = sorted(values)
    return _quantile(xs, q / 100) if xs else math.nan


def calibrate(fn: Callable[[], Any], min_time: float, max_batch: int) -> int:
    """How many calls make one timed batch of at least min_time seconds (after one warm-up call)."""
    fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-9)
    return max(1, min(max_batch, math.ceil(min_time / once)))


def time_batch(fn: Callable[[], Any], k: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per call over k calls."""
    t0 = clock()
    for _ in range(k):
        fn()
    return (clock() - t0) / k


def interleaved(cases: Mapping[str, Callable[[], Any]], reps: int, *, min_time: float = 0.005,
                max_batch: int = 100_000, batches: Optional[Mapping[str, int]] = None,
                clock: str = "cpu", collect: bool = False) -> dict[str, list[float]]:
    """Seconds per call of every case, one sample per repetition; the order rotates each rep.
    collect=False (like timeit): the cyclic garbage collector is paused while a batch runs, so
    its cost - which depends on how many objects this process holds, not on the code timed -
    does not land on whichever case happens to trigger it."""
    timer = CLOCKS[clock]
    gc_was_enabled = gc.isenabled()
    names = list(cases)
    ks = dict(batches or {})
    for name in names:
        if name not in ks:
            ks[name] = calibrate(cases[name], min_time, max_batch)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(reps):
        order = names[rep % len(names):] + names[:rep % len(names)] if names else []
        if rep % 2:
            order.reverse()
        for name in order:
            if not collect:
                gc.disable()
            try:
                samples[name].append(time_batch(cases[name], ks[name], timer))
            finally:
                if gc_was_enabled:
                    gc.enable()
        gc.collect()
    return samples


def paired_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> list[float]:
    """numerator[i] / denominator[i] for each repetition (a speed-up when numerator is the baseline)."""
    return [a / b for a, b in zip(numerator, denominator) if b > 0]


# -- decisions: bootstrap confidence intervals of paired ratios -------------------------------
@dataclass(frozen=True)
class RatioCI:
    """The geometric mean of paired ratios (msgpack speed-up over pickle per round or
    repetition) with a bootstrap confidence interval, and what it allows one to say."""

    center: float
    lo: float
    hi: float
    n: int
    level: float
    verdict: str  # "msgpack faster" | "msgpack slower" | "not distinguishable"
    rounds_needed: Optional[int]  # when not distinguishable: about how many would separate it from 1.0

    def to_json(self) -> dict:
        return {"center": self.center, "lo": self.lo, "hi": self.hi, "n": self.n, "level": self.level,
                "verdict": self.verdict, "rounds_needed": self.rounds_needed}

    def cell(self) -> str:
        return f"{self.center:.2f}x [{self.lo:.2f}-{self.hi:.2f}]"


def bootstrap_ratio(ratios: Sequence[float], *, level: float = 0.95, resamples: int = 4000,
                    seed: int = 12345, higher_is_faster: bool = True) -> RatioCI:
    """Percentile bootstrap of the geometric mean of ratios (> 1 = msgpack faster when
    higher_is_faster). The verdict comes from the interval: above 1, below 1, or across it;
    across it, rounds_needed scales the count by (half-width / distance from 1)^2, the rate at
    which an interval narrows (None when the centre is 1 itself: no count separates them)."""
    import random

    logs = [math.log(r) for r in ratios if r is not None and math.isfinite(r) and r > 0]
    n = len(logs)
    if n == 0:
        return RatioCI(math.nan, math.nan, math.nan, 0, level, "not measured", None)
    mean = sum(logs) / n
    if n == 1:
        return RatioCI(math.exp(mean), math.nan, math.nan, 1, level, "not distinguishable (one round)", None)
    rnd = random.Random(seed)
    means = sorted(sum(rnd.choices(logs, k=n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    lo, hi = _quantile(means, tail), _quantile(means, 1 - tail)
    faster = lo > 0 if higher_is_faster else hi < 0
    slower = hi < 0 if higher_is_faster else lo > 0
    needed = None
    if faster:
        verdict = "msgpack faster"
    elif slower:
        verdict = "msgpack slower"
    else:
        verdict = "not distinguishable"
        if mean != 0:
            half = (hi - lo) / 2
            needed = max(n + 1, math.ceil(n * (half / abs(mean)) ** 2))
    return RatioCI(math.exp(mean), math.exp(lo), math.exp(hi), n, level, verdict, needed)
