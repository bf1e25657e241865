"""Bugs planted into the reference engine's own source, in every one of its processes, for the
proof of the pipeline checks (``Required.Pipeline.*``, SPEC R-PIPE-*).

A mutant is one text edit (old -> new, found exactly once) of one reference module. It is
planted by a ``sitecustomize`` on PYTHONPATH whose import hook compiles that module from the
edited source, so every process of the run (the pipeline driver, the engine's server and each
process it spawns) runs the edited code; the checkout is never written. An edit that no longer
applies is an ImportError in the engine's processes (the run fails, loudly), never a silent
pass. The same mechanism plants SGLang's mutants (reference_tools/proof/sglang_mutants.py).

The mutants of reference_tools/proof/mutants.py whose names are in ``PIPELINE_MUTANTS`` plant
these through ``ReferenceAdapter.pipeline_env``: ``ipc-conformance run --impl
reference_tools.proof.mutants:DetokenizerDropsCustomizedInfo -- -k Pipeline``.
"""

from __future__ import annotations

import dataclasses
import os
import textwrap
from pathlib import Path
from typing import Protocol


@dataclasses.dataclass(frozen=True)
class SourceMutant:
    name: str
    module: str
    old: str
    new: str
    why: str


MUTANTS: dict[str, SourceMutant] = {m.name: m for m in (
    SourceMutant(
        "controller-total-tokens-send-pyobj", "reference_impl.engine.controller",
        "        rank = min(range(len(self.workers)), key=lambda r: (self.sent_tokens[r], self.sent_requests[r], r))\n"
        "        self.send_to(rank, obj)\n",
        "        rank = min(range(len(self.workers)), key=lambda r: (self.sent_tokens[r], self.sent_requests[r], r))\n"
        "        self.sent_requests[rank] += 1\n"
        "        self.workers[rank].sock.send_pyobj(obj)\n",
        "one load-balance method of three keeps a leftover send_pyobj: under msgpack its rank gets pickle bytes"),
    SourceMutant(
        "receive-socket-64mib-cap", "reference_impl.engine.ipc",
        "        self.sock = ctx.socket(zmq.PULL)\n        self.sock.setsockopt(zmq.LINGER, 0)\n"
        "        self.sock.bind(endpoint)\n        self.link, self.transport, self.tap, self.unwrap = "
        "link, transport, tap, unwrap\n\n    def recv(self, timeout_ms",
        "        self.sock = ctx.socket(zmq.PULL)\n        self.sock.setsockopt(zmq.LINGER, 0)\n"
        "        self.sock.setsockopt(zmq.MAXMSGSIZE, 64 * 1024 * 1024)\n"
        "        self.sock.bind(endpoint)\n        self.link, self.transport, self.tap, self.unwrap = "
        "link, transport, tap, unwrap\n\n    def recv(self, timeout_ms",
        "the engine processes' receiving sockets capped at 64 MiB (a 'hardening' option): a larger message is "
        "dropped with its connection, without an error"),
    SourceMutant(
        "send-lacks-return", "reference_impl.zmq_io",
        "        sock.send(codec.encode(obj, transport), flags)\n        return\n",
        "        sock.send(codec.encode(obj, transport), flags)\n",
        "the one-frame send lacks its return: every message is sent again, the second time as zero-copy frames"),
    SourceMutant(
        "switch-truthy-string", "reference_impl.codec",
        '        chosen = "pickle" if PICKLE_SWITCH[switch] else "msgpack"\n',
        '        chosen = "pickle" if switch else "msgpack"\n',
        "SGLANG_USE_PICKLE_IPC read as a truthy string: '0' and 'false' select pickle too"),
    SourceMutant(
        "detokenizer-drops-customized-info", "reference_impl.engine.detokenizer",
        "            customized_info=obj.customized_info,\n",
        "            customized_info=None,\n",
        "the detokenizer's output forgets the customized info it received"),
    SourceMutant(
        "detokenizer-drops-hidden-states", "reference_impl.engine.detokenizer",
        "            output_hidden_states=obj.output_hidden_states,\n",
        "            output_hidden_states=None,\n",
        "the detokenizer's output forgets the hidden states it received"),
    SourceMutant(
        "output-customized-info-unwrapped", "reference_impl._codec_plan",
        "    changes = {name: wrap(value) for name, value in zip(plan.direct, plan.direct_values(obj)) "
        "if value is not None}\n",
        "    changes = {name: wrap(value) if name == 'time_stats' else value\n"
        "               for name, value in zip(plan.direct, plan.direct_values(obj)) if value is not None}\n",
        "the sender's wrap step wraps the time stats only: the customized info of the scheduler's output goes "
        "unwrapped under msgpack, and the detokenizer refuses every output batch that carries it"),
)}


class Planted(Protocol):
    """What a planted edit needs: the reference's SourceMutant and SGLang's alike."""

    @property
    def name(self) -> str: ...
    @property
    def module(self) -> str: ...
    @property
    def old(self) -> str: ...
    @property
    def new(self) -> str: ...


def sitecustomize(mutant: Planted) -> str:
    """A sitecustomize.py planting mutant: a meta-path finder that compiles mutant.module from
    its source with the edit applied (the edit must apply exactly once)."""
    return textwrap.dedent(f"""\
        import importlib.abc, importlib.machinery, importlib.util, sys

        MODULE, OLD, NEW = {mutant.module!r}, {mutant.old!r}, {mutant.new!r}

        class _Loader(importlib.machinery.SourceFileLoader):
            def get_data(self, path):
                data = super().get_data(path)
                if path != self.path:
                    return data
                text = data.decode()
                if text.count(OLD) != 1:
                    raise ImportError(f"mutant {mutant.name}: the edit applies {{text.count(OLD)}} times in {{path}}")
                return text.replace(OLD, NEW).encode()

            def path_stats(self, path):
                raise OSError  # never reuse the unedited bytecode

        class _Finder(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name != MODULE:
                    return None
                sys.meta_path.remove(self)
                try:
                    spec = importlib.util.find_spec(name)
                finally:
                    sys.meta_path.insert(0, self)
                spec.loader = _Loader(name, spec.origin)
                return spec

        sys.meta_path.insert(0, _Finder())
        """)


def plant(mutant: SourceMutant, folder: Path) -> dict[str, str]:
    """Write the mutant's sitecustomize under folder; the environment that plants it in every
    process started with it (PYTHONPATH first)."""
    where = folder / f"plant-{mutant.name}"
    where.mkdir(parents=True, exist_ok=True)
    (where / "sitecustomize.py").write_text(sitecustomize(mutant))
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(where), os.environ.get("PYTHONPATH")]))}


def applies(mutant: SourceMutant) -> bool:
    """Whether the edit applies exactly once to the module's current source."""
    import importlib.util

    spec = importlib.util.find_spec(mutant.module)
    assert spec is not None and spec.origin is not None, mutant.module
    return Path(spec.origin).read_text().count(mutant.old) == 1
