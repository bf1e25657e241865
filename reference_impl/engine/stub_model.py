"""``--model stub``: the model's forward pass (and the draw of the next token) replaced by a
deterministic rule, everything else the engine's own.

The differential pipeline runs (``ipc-conformance run -- -k Pipeline``) need outputs that are
the same in every run and that fill every IPC field the real model fills: tokens, input and
output logprobs (``-inf`` at the second output step, ``None`` for the first prompt position),
top logprobs and the logprobs of named ids, hidden states (every prompt row at prefill, one row
per decode step) and customized info (``expert_ids``: one ``[step, token % 8]`` pair per
token, as a MoE model reports its routing). The stub needs no weights and no KV cache; the
scheduler's own bookkeeping, output building and sending handle what it returns.

It records what it produced, by rid, so a run can be judged against it (the conservation
oracle of conformance/pipeline.py): with ``--tap-dir`` set, one JSON line per prefill and per
token in ``<tap_dir>/<process>.produced`` (non-finite floats as their repr). Weight updates are
taken as opaque payloads: the stub has no parameters to check them against. An embedding request
gets a deterministic embedding and, when asked, a pooled hidden state (a tensor on the wire).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from .model import ModelConfig

#: The --model value that selects the stub.
STUB = "stub"
STUB_MODEL_NAME = "stub-bytes-v1"
#: The file that marks a model directory as the stub's (config.json and the tokenizer beside it).
MARKER = "stub_model.json"
HIDDEN_SIZE = 4  #: floats per hidden-state row the stub reports


def is_stub(model_path: Optional[str]) -> bool:
    return model_path is not None and (Path(model_path) / MARKER).is_file()


def ensure_stub_checkpoint(root: Optional[Path] = None) -> Path:
    """The stub's model directory under the cache directory (the tiny model's config and byte
    tokenizer, no weights), written atomically on first use."""
    from .checkpoint import cache_root, tiny_config
    from .tokenizer import ByteTokenizer

    target = Path(root or cache_root()) / STUB_MODEL_NAME
    if (target / MARKER).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        (staging / "config.json").write_text(json.dumps(tiny_config().to_hf_dict(), indent=2, sort_keys=True) + "\n")
        ByteTokenizer().save(staging)
        (staging / MARKER).write_text(json.dumps({"model": STUB, "hidden_size": HIDDEN_SIZE}) + "\n")
        try:
            os.replace(staging, target)  # atomic; loses the race harmlessly if another process won
        except OSError:
            if not (target / MARKER).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def stub_token(input_ids: list[int], step: int) -> int:
    """The step-th output token: a printable letter from the prompt (never a special token)."""
    return 97 + (sum(input_ids) % 61 + 7 * step) % 26


def stub_logprob(step: int) -> float:
    return -math.inf if step == 1 else -0.25 * (step + 1)


class StubLogprobs:
    """What sampling.Logprobs gives the scheduler (token, top, of_ids by row), from the rule:
    row ``r`` of an output view is output step ``first_step + r``; of an input view, the
    prediction of prompt position ``r + 1``."""

    def __init__(self, kind: str, first_step: int = 0) -> None:
        self.kind, self.first_step = kind, first_step

    def _value(self, row: int) -> float:
        return stub_logprob(self.first_step + row) if self.kind == "output" else -0.5 * (row + 1)

    def token(self, row: int, token_id: int) -> float:
        return self._value(row)

    def top(self, row: int, k: int) -> tuple[list[float], list[int]]:
        value = self._value(row)
        if self.kind == "input":
            return [value] * k, [65] * k
        return [value - i for i in range(k)], [97 + i for i in range(k)]

    def of_ids(self, row: int, ids: list[int]) -> list[float]:
        return [-1.0 if self.kind == "input" else -2.0] * len(ids)


@dataclass
class StubStep:
    """One token of one request, as the stub produced it."""

    token: int
    logprobs: StubLogprobs
    hidden: list[list[float]] = field(default_factory=list)  # rows to report (empty unless asked)
    customized: dict[str, Any] = field(default_factory=dict)  # key -> this token's value


class StubModel:
    def __init__(self, config: ModelConfig, record_path: Optional[Path] = None) -> None:
        self.config = config
        self._record = open(record_path, "a") if record_path is not None else None

    @classmethod
    def load(cls, model_path: str, record_dir: Optional[str], process: str) -> "StubModel":
        record = Path(record_dir) / f"{process}.produced" if record_dir is not None else None
        if record is not None:
            record.parent.mkdir(parents=True, exist_ok=True)
        return cls(ModelConfig.load(model_path), record)

    def prefill(self, rid: str, input_ids: list[int], hidden: Union[bool, str]) -> tuple[StubLogprobs, StubStep]:
        """The prompt's logprob view and hidden rows (all of them, or the last one), and the first token."""
        rows = [self._row(0.25 * pos) for pos in range(len(input_ids))] if hidden else []
        if hidden and hidden is not True:
            rows = rows[-1:]
        self._write({"rid": rid, "prefill_hidden": rows})
        first = self.step(rid, input_ids, 0, bool(hidden), prefill_rows=rows)
        return StubLogprobs("input"), first

    def step(self, rid: str, input_ids: list[int], step: int, hidden: bool,
             prefill_rows: Optional[list[list[float]]] = None) -> StubStep:
        """Output token number ``step`` (0: the one prefill yields). A decode step reports one
        hidden row (the step's input position); prefill's rows were reported above."""
        token = stub_token(input_ids, step)
        rows = prefill_rows if prefill_rows is not None else ([self._row(0.5 * step)] if hidden else [])
        made = StubStep(token, StubLogprobs("output", step), rows, {"expert_ids": [step, token % 8]})
        self._write({"rid": rid, "step": step, "token": token, "logprob": _json_float(stub_logprob(step)),
                     "hidden": rows if prefill_rows is None else [], "customized": made.customized})
        return made

    def embed(self, rid: str, input_ids: list[int], pooled: bool) -> tuple[list[float], Optional[list[float]]]:
        """An embedding request: its embedding, and its pooled hidden state when asked (the
        scheduler sends that as a float32 tensor; these values are exact in float 32)."""
        seed = sum(input_ids) % 17
        embedding = [0.125 * (seed + i) for i in range(HIDDEN_SIZE)]
        state = [0.5 * i + seed for i in range(HIDDEN_SIZE)] if pooled else None
        self._write({"rid": rid, "embedding": embedding, "pooled": state})
        return embedding, state

    @staticmethod
    def _row(base: float) -> list[float]:
        return [round(base + 0.125 * i, 6) for i in range(HIDDEN_SIZE)]

    def _write(self, line: dict[str, Any]) -> None:
        if self._record is not None:
            self._record.write(json.dumps(line) + "\n")
            self._record.flush()

    def close(self) -> None:
        if self._record is not None:
            self._record.close()
            self._record = None


def _json_float(value: float) -> Union[float, str]:
    return value if math.isfinite(value) else repr(value)


def read_produced(tap_dir: Path) -> dict[str, dict[str, Any]]:
    """What the stub produced in every scheduler process, by rid: tokens, output logprobs (their
    repr when not finite), hidden states (prefill rows, then one per decode step, when asked)
    and customized info (``expert_ids``), in the form conformance/pipeline.py reads."""
    produced: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(tap_dir).glob("*.produced")):
        for text in path.read_text().splitlines():
            line = json.loads(text)
            if "embedding" in line:
                produced[line["rid"]] = {"embedding": line["embedding"], "pooled": line["pooled"]}
                continue
            made = produced.setdefault(line["rid"], {"tokens": [], "output_logprobs": [], "hidden_states": [],
                                                     "customized": []})
            if "prefill_hidden" in line:
                made["hidden_states"] += line["prefill_hidden"]
                continue
            made["tokens"].append(line["token"])
            made["output_logprobs"].append(line["logprob"])
            made["hidden_states"] += line["hidden"]
            made["customized"].append(line["customized"]["expert_ids"])
    return produced
