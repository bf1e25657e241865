"""Bugs planted into an installed SGLang's own source, for the suite's proof against the real
upstream (``python -m reference_tools.proof sglang-mutants``; tox -e upstream-mutants).

A mutant is one text edit (old -> new, each found exactly once) of one SGLang module. It is
planted in every Python process of the run, the suite's and the pipeline runs' alike, by the
``sitecustomize`` of reference_tools/proof/engine_mutants.py on PYTHONPATH, whose import hook
compiles that module from the edited source:
the installed package is never written. An edit that no longer applies is an error, never a
silent pass: upstream moved and the mutant must follow.

``FAMILIES`` names the promise each mutant breaks; every mutant here is realistic (a bug that
could ship) and was seen live first (the edited function gives a different result).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

from reference_tools.proof.engine_mutants import sitecustomize


@dataclasses.dataclass(frozen=True)
class SourceMutant:
    name: str
    family: str  #: the promise it breaks
    module: str
    old: str
    new: str
    why: str


MUTANTS: tuple[SourceMutant, ...] = (
    SourceMutant(
        "dp-round-robin-send-pyobj", "DP-controller paths", "sglang.srt.managers.data_parallel_controller",
        "                logger.debug(f\"Choose worker {slot}\")\n                sock_send(self.workers[slot], req)",
        "                logger.debug(f\"Choose worker {slot}\")\n                self.workers[slot].send_pyobj(req)",
        "the default load-balance method sends with a leftover send_pyobj: under msgpack the rank gets pickle"),
    SourceMutant(
        "dp-total-tokens-send-pyobj", "DP-controller paths", "sglang.srt.managers.data_parallel_controller",
        "            LoadBalanceMethod.TOTAL_TOKENS, estimated_tokens=estimated_tokens\n        )\n"
        "        sock_send(self.workers[target_worker], req)",
        "            LoadBalanceMethod.TOTAL_TOKENS, estimated_tokens=estimated_tokens\n        )\n"
        "        self.workers[target_worker].send_pyobj(req)",
        "one load-balance method of four keeps the pickle send"),
    SourceMutant(
        "recv-socket-64mib-cap", "every struct round-trips", "sglang.srt.utils.network",
        "    def set_recv_opt():\n        socket.setsockopt(zmq.RCVHWM, 0)",
        "    def set_recv_opt():\n        socket.setsockopt(zmq.MAXMSGSIZE, 64 * 1024 * 1024)\n"
        "        socket.setsockopt(zmq.RCVHWM, 0)",
        "receiving sockets capped at 64 MiB: a larger message is dropped with its connection, silently"),
    SourceMutant(
        "async-send-twice", "every message delivered once", "sglang.srt.managers.io_struct",
        "        await socket.send_pyobj(obj, flags=flags, protocol=pickle.HIGHEST_PROTOCOL)\n        return\n",
        "        await socket.send_pyobj(obj, flags=flags, protocol=pickle.HIGHEST_PROTOCOL)\n",
        "the async send lacks its return: in pickle mode every message goes twice, the second in msgpack"),
    SourceMutant(
        "switch-truthy-string", "both transports", "sglang.srt.managers.io_struct",
        "_USE_PICKLE_IPC = envs.SGLANG_USE_PICKLE_IPC.get()",
        "_USE_PICKLE_IPC = bool(__import__(\"os\").environ.get(\"SGLANG_USE_PICKLE_IPC\", \"1\"))",
        "the switch read as a truthy string: '0' and 'false' select pickle too"),
    SourceMutant(
        "output-time-stats-unwrapped", "every hop's own code",
        "sglang.srt.managers.scheduler_components.output_streamer",
        "            time_stats=wrap_as_pickle(self.time_stats),",
        "            time_stats=self.time_stats,",
        "the scheduler's output builder passes its time stats unwrapped"),
    SourceMutant(
        "detokenizer-drops-customized-info", "every struct reaches its consumer",
        "sglang.srt.managers.detokenizer_manager",
        "            customized_info=recv_obj.customized_info,",
        "            customized_info=None,",
        "the detokenizer's output forgets the customized info it received"),
    SourceMutant(
        "detokenizer-drops-hidden-states", "every struct reaches its consumer",
        "sglang.srt.managers.detokenizer_manager",
        "            output_hidden_states=recv_obj.output_hidden_states,",
        "            output_hidden_states=None,",
        "the detokenizer's output forgets the hidden states (a sibling of the customized-info copy)"),
    SourceMutant(
        "multi-tokenizer-contiguous-slice", "DP / tokenizer paths", "sglang.srt.managers.multi_tokenizer_mixin",
        "    selected = [field[index] for index in indices]\n    return wrap_as_pickle(selected)",
        "    selected = list(field[min(indices) : min(indices) + len(indices)])\n    return wrap_as_pickle(selected)",
        "a worker's outputs cut from the batch as a slice, as if its requests were contiguous"),
    SourceMutant(
        "multi-tokenizer-customized-info-first-row", "DP / tokenizer paths",
        "sglang.srt.managers.multi_tokenizer_mixin",
        "            selected = [values[index] for index in indices]\n            new_field[key] = selected",
        "            selected = [values[0] for index in indices]\n            new_field[key] = selected",
        "a worker's customized info taken from the batch's first rows"),
    SourceMutant(
        "multi-tokenizer-pooled-as-stacked", "tensors, embeddings", "sglang.srt.managers.multi_tokenizer_mixin",
        "    if len(states) == 1 and len(output.rids) > 1:\n        return [states[0][i]]",
        "    if len(states) == 1:\n        return [states[0][i]]",
        "a single request's pooled hidden state taken as the stacked layout: its worker gets a 0-d tensor"),
    SourceMutant(
        "pooled-batch-unstacked-wrong", "tensors, embeddings", "sglang.srt.managers.tokenizer_manager",
        "                    if len(pooled_hidden_states) == 1 and len(recv_obj.rids) > 1:",
        "                    if len(pooled_hidden_states) == 1:",
        "the tokenizer manager reads one request's pooled state as the stacked layout"),
    SourceMutant(
        "tokenizer-send-skips-wrap", "every hop's own code", "sglang.srt.managers.tokenizer_manager",
        "            time_stats = tokenized_obj.time_stats\n            tokenized_obj.wrap_pickle_fields()\n",
        "            time_stats = tokenized_obj.time_stats\n",
        "the tokenizer manager's single-request send forgets to wrap the opaque fields"),
)


@dataclasses.dataclass
class Outcome:
    mutant: str
    family: str
    caught: bool
    failed_checks: list[str]
    seconds: float
    note: str = ""


def run_mutant(mutant: SourceMutant, selection: Sequence[str], workdir: Path) -> Outcome:
    """The suite against SGLang with mutant planted; caught when a Required check fails."""
    plant = workdir / mutant.name
    plant.mkdir(parents=True, exist_ok=True)
    (plant / "sitecustomize.py").write_text(sitecustomize(mutant))
    report = plant / "results.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(plant), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--impl", "sglang", "--report",
                           str(report), "--", *selection, "-p", "no:cacheprovider"],
                          env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    failed = _failed_required(report)
    note = "" if report.exists() else (done.stdout + done.stderr).strip().splitlines()[-1:][0:1]
    return Outcome(mutant.name, mutant.family, bool(failed), failed, seconds, " ".join(note) if note else "")


def _failed_required(report: Path) -> list[str]:
    """The Required checks the run failed (listed failures too: a mutant is caught by a check
    that fails, whatever a list says of it)."""
    from conformance.records import Outcome, load_results

    if not report.exists():
        return []
    failing = (Outcome.FAILED, Outcome.XFAILED)
    return sorted(r.id for r in load_results(report).results if r.outcome in failing and r.id.startswith("Required."))


def main(argv: Optional[Sequence[str]] = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m reference_tools.proof sglang-mutants",
                                     description="plant each SGLang source mutant and run the suite against it")
    parser.add_argument("--only", action="append", default=[], help="a mutant name (repeatable)")
    parser.add_argument("--select", default="", help="a pytest -k expression (default: the whole suite)")
    parser.add_argument("--out", help="write the outcomes as JSON here")
    parser.add_argument("--markdown", help="write the outcomes as a Markdown table here (docs/sglang-mutants.md)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only) - {m.name for m in MUTANTS})
    if unknown:
        print(f"sglang-mutants: no mutant named {', '.join(unknown)}", file=sys.stderr)
        return 2
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    selection = ["-k", args.select] if args.select else []
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="ipc-conformance-sglang-mutants-") as folder:
        for mutant in chosen:
            outcome = run_mutant(mutant, selection, Path(folder))
            outcomes.append(outcome)
            verdict = "caught" if outcome.caught else "MISSED"
            first = outcome.failed_checks[0] if outcome.failed_checks else outcome.note
            print(f"{verdict:6}  {mutant.name:36} {outcome.seconds:6.1f} s  {len(outcome.failed_checks):3} "
                  f"failing  {first}", flush=True)
    caught = sum(o.caught for o in outcomes)
    print(f"sglang mutants: {caught}/{len(outcomes)} caught")
    if args.out:
        Path(args.out).write_text(json.dumps([dataclasses.asdict(o) for o in outcomes], indent=1))
    if args.markdown:
        Path(args.markdown).write_text(markdown(outcomes, args.select))
    return 0 if caught == len(outcomes) else 1


def markdown(outcomes: Sequence[Outcome], selection: str) -> str:
    """The outcomes as the table of docs/sglang-mutants.md."""
    by_name = {m.name: m for m in MUTANTS}
    rows = [f"| `{o.mutant}` | {o.family} | {by_name[o.mutant].why} | {'caught' if o.caught else '**missed**'} | "
            f"{len(o.failed_checks)} | {('`' + o.failed_checks[0] + '`') if o.failed_checks else o.note} |"
            for o in outcomes]
    scope = f"the checks of `-k {selection}`" if selection else "the whole suite"
    return "\n".join([
        "# Bugs planted into SGLang's own source",
        "",
        "Written by `python -m reference_tools.proof sglang-mutants --markdown docs/sglang-mutants.md` "
        f"(tox -e upstream-mutants): each mutant planted alone into SGLang 0.5.23, {scope} run against it.",
        f"**{sum(o.caught for o in outcomes)} of {len(outcomes)} caught.**",
        "",
        "| mutant | promise it breaks | the bug | verdict | Required checks failing | first |",
        "|---|---|---|---|---|---|",
        *rows, ""])


if __name__ == "__main__":
    sys.exit(main())
