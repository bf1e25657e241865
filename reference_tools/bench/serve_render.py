"""`bench serve`'s report as text or Markdown: one table per request mode (JSON answers,
streams), the CPU shares and the bottleneck of each level, and the verdicts, given only
where the engine bounded the throughput."""

from __future__ import annotations

import json
import math
from typing import Callable, Optional

from reference_tools.bench.cpu_share import bottleneck, engine_bound, level_bottleneck
from reference_tools.bench.tables import markdown_table, text_table

_ROWS = [("request throughput (req/s)", "request_throughput"), ("input token throughput (tok/s)", "input_throughput"),
         ("output token throughput (tok/s)", "output_throughput")]

RATIO_NOTE = ("msgpack/pickle: geometric mean of the per-round ratios [95% bootstrap interval] (throughput: "
              ">1 = msgpack faster; latency and CPU per request: <1 = msgpack faster / cheaper). CPU share: CPU "
              "seconds over wall seconds of the rounds (100% = one core busy all the time); 'engine cores busy' "
              "counts every process on the engine's cores, neighbours included.")


def _mode(lv: dict) -> str:
    return "stream" if lv.get("stream", True) else "json"


def _pct(x: Optional[float]) -> str:
    return "" if x is None or x != x else f"{100 * x:.0f}%"


def _table(levels: list[dict]) -> tuple[list[str], list[list[str]]]:
    transports = list(levels[0]["transports"]) if levels else []
    header = ["metric"] + [f"{t} @{lv['concurrency']}" for lv in levels for t in transports] + \
             [f"msgpack/pickle @{lv['concurrency']}" for lv in levels if "ratios" in lv]
    rows = []

    def cells(fn: Callable[[dict], str], ratio: Callable[[dict], str]) -> list[str]:
        out = [fn(lv["transports"][t]) for lv in levels for t in transports]
        return out + [ratio(lv["ratios"]) for lv in levels if "ratios" in lv]

    rows.append(["load generator"] + cells(lambda m: str(m.get("client") or ""), lambda r: ""))
    rows.append(["completed / failed (all rounds)"]
                + cells(lambda m: f"{m['completed']} / {m['failed']}", lambda r: ""))
    for label, key in _ROWS:
        rows.append([label] + cells(lambda m, k=key: f"{m[k]:,.1f}", lambda r, k=key: _ci_cell(r.get(k))))
    procs = sorted({p for lv in levels for m in lv["transports"].values() for p in m.get("cpu_ms_per_request", {})},
                   key=lambda p: (p != "tokenizer_manager", p))
    rows.append(["CPU share: load generator"] + cells(lambda m: _pct(m.get("shares", {}).get("client")),
                                                      lambda r: ""))
    for proc in procs:
        rows.append([f"CPU share: {proc}"] + cells(
            lambda m, p=proc: _pct(m.get("shares", {}).get("processes", {}).get(p)), lambda r: ""))
    rows.append(["CPU share: engine, all processes"] + cells(lambda m: _pct(m.get("shares", {}).get("engine")),
                                                             lambda r: ""))
    rows.append(["engine cores busy (every process on them)"] + cells(
        lambda m: _pct(m.get("shares", {}).get("engine_cores_busy")), lambda r: ""))
    rows.append(["bottleneck"] + cells(lambda m: m.get("shares", {}).get("bottleneck", ""), lambda r: ""))
    for proc in procs:
        rows.append([f"CPU ms per request: {proc}"] + cells(
            lambda m, p=proc: f"{m.get('cpu_ms_per_request', {}).get(p, math.nan):,.2f}", lambda r: ""))
    if procs:
        rows.append(["CPU ms per request: engine, all processes"] + cells(
            lambda m: f"{sum(m.get('cpu_ms_per_request', {}).values()):,.2f}",
            lambda r: _ci_cell(r.get("engine_cpu_ms"))))
    for metric, label in (("ttft_ms", "TTFT"), ("itl_ms", "ITL"), ("e2e_ms", "end-to-end latency")):
        for stat in ("mean", "median", "p90", "p99"):
            if all(lv["transports"][t][metric][stat] != lv["transports"][t][metric][stat]
                   for lv in levels for t in transports):
                continue  # not measured at any level (wrk: no TTFT, no ITL)
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


#: Rounds shorter than this decide nothing across sittings, whatever their interval says.
SHORT_ROUND_S = 10.0


def decisions(report: dict) -> list[str]:
    """One line per level: who bounded it, and the output-throughput verdict from its interval
    only when the engine did (when it is not distinguishable, how many rounds would likely tell)."""
    lines = []
    for lv in report["levels"]:
        ci = lv.get("ratios", {}).get("output_throughput")
        where = f"concurrency {lv['concurrency']} ({_mode(lv)}, {lv.get('client', 'python')})"
        shares = {t: m.get("shares", {}) for t, m in lv["transports"].items()}
        use = "; ".join(f"{t}: load generator {_pct(sh.get('client'))}, engine {_pct(sh.get('engine'))}"
                        for t, sh in shares.items() if sh)
        bottleneck = lv.get("bottleneck", "unclear")
        head = f"{where}: bottleneck {bottleneck} (CPU share {use})" if use else f"{where}: bottleneck {bottleneck}"
        if not ci:
            lines.append(f"{head}; one transport only: no msgpack/pickle ratio")
            continue
        if not engine_bound(bottleneck):
            lines.append(f"{head}; no transport verdict: the engine did not bound the throughput, so output "
                         f"tok/s msgpack/pickle {_ci_cell(ci)} does not compare the transports")
            continue
        line = (f"{head}; {ci['verdict']} (output tok/s msgpack/pickle {_ci_cell(ci)}, "
                f"{int(ci['level'] * 100)}% bootstrap interval over {ci['n']} rounds)")
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
        shortest = min((d for m in lv["transports"].values() for d in m.get("round_s", [])), default=None)
        if shortest is not None and shortest < SHORT_ROUND_S:
            line += (f"; rounds as short as {shortest:.1f} s: the interval covers these rounds, not the drift "
                     f"between sittings (a 4 s round at c=1024 moved 0.87x-1.12x between two sittings of one "
                     f"tree): rerun with --num-prompts making rounds of {SHORT_ROUND_S:.0f} s or more before "
                     f"deciding")
        lines.append(line)
    return lines


def _groups(report: dict) -> list[tuple[str, list[dict]]]:
    modes: dict[str, list[dict]] = {}
    for lv in report["levels"]:
        modes.setdefault(_mode(lv), []).append(lv)
    titles = {"json": "requests answered as one JSON (no stream)",
              "stream": "streamed requests (SSE, a chunk per token)"}
    return [(titles[m], lvs) for m, lvs in modes.items()]


def render_text(report: dict) -> str:
    lines = _intro(report)
    for title, levels in _groups(report):
        lines += ["", title + ":", *text_table(*_table(levels))]
    lines += ["", RATIO_NOTE, ""] + decisions(report)
    return "\n".join(lines) + "\n"


def render_markdown(report: dict) -> str:
    lines = _intro(report)
    for title, levels in _groups(report):
        lines += ["", f"**{title}**", "", *markdown_table(*_table(levels))]
    lines += ["", RATIO_NOTE, ""] + [f"- {d}" for d in decisions(report)]
    return "\n".join(lines) + "\n"


def _intro(report: dict) -> list[str]:
    s = report["settings"]
    meta = report["meta"]
    modes = ", ".join("stream" if x else "json" for x in s.get("streams", [True]))
    lines = [f"preset {s['preset']}: input {s['input_len']} tokens, output {s['output_len']} tokens (ignore_eos), "
             f"request rate {s['request_rate']}, concurrency {s['concurrency']}, requests {s['num_prompts']}, "
             f"modes {modes}, {s['rounds']} alternating round(s) per transport"]
    load = meta.get("loadavg_at_start")
    end = meta.get("loadavg_at_end")
    lines.append(f"machine: {meta['cpus']} CPUs, {meta['platform']}, python {meta['python']}"
                 + (f", load average {load[0]:.1f} at start" if load else "")
                 + (f", {end[0]:.1f} at end" if end else ""))
    if meta.get("placement"):
        lines.append(f"placement: {meta['placement']['note']}")
    lines.append(f"load generator: wrk at {meta['wrk']}" if meta.get("wrk") else
                 "load generator: wrk is not installed: the Python client (httpx) drives every level "
                 "(Debian: apt-get install -y --no-install-recommends wrk)")
    servers = meta.get("servers", {})
    if servers:
        lines.append("servers: " + "; ".join(f"{t}: " + ", ".join(f"{k}={v}" for k, v in i.items())
                                             for t, i in servers.items()))
    for note in report.get("notes", []):
        lines.append(note)
    bad = [(lv["concurrency"], _mode(lv), t, m["errors"]) for lv in report["levels"]
           for t, m in lv["transports"].items() if m["failed"]]
    for c, mode, t, errors in bad:
        lines.append(f"FAILED requests at concurrency {c} ({mode}, {t}): {errors}")
    return lines


def write_json(report: dict, path: str) -> None:
    with open(path, "w") as fh:
        json.dump(report, fh, indent=1, default=lambda o: None if isinstance(o, float) and math.isnan(o) else str(o))
        fh.write("\n")


def reclassify(report: dict) -> dict:
    """The report with every bottleneck decided again from its stored CPU shares by the current
    rules (cpu_share.bottleneck): a saved report renders as a fresh run would."""
    for lv in report["levels"]:
        for m in lv["transports"].values():
            sh = m.get("shares") or {}
            if sh:
                sh["bottleneck"] = bottleneck(sh.get("client_of_its_cores"), sh.get("engine_of_its_cores"),
                                              sh.get("engine_cores_busy"))
        lv["bottleneck"] = level_bottleneck([m.get("shares") or {} for m in lv["transports"].values()])
    return report


def main(argv: Optional[list[str]] = None) -> int:
    """python -m reference_tools.bench.serve_render REPORT.json [--format markdown]: render a
    saved `bench serve --json` report again."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m reference_tools.bench.serve_render", description=main.__doc__)
    p.add_argument("report")
    p.add_argument("--format", choices=["text", "markdown"], default="text")
    args = p.parse_args(argv)
    try:
        with open(args.report) as fh:
            report = reclassify(json.load(fh, parse_constant=lambda c: math.nan))
    except (OSError, ValueError) as exc:
        print(f"error: {args.report}: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(render_markdown(report) if args.format == "markdown" else render_text(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
