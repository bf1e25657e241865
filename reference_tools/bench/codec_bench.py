"""Codec benchmark: encode, decode and round trip per message, every transport side by side.

Transports (rows of the table):
  pickle            stdlib pickle, HIGHEST_PROTOCOL (what ``send_pyobj`` does): the baseline
  msgpack           reference_impl.codec encode / decode (trusted receive path, unwrap included)
  msgpack+oob       reference_impl.codec encode_frames / decode_frames: large tensors as
                    separate frames (payloads with tensors only)
  sglang msgpack    upstream SGLang's msgpack_encode / msgpack_decode (when installed; not for
                    the "engine" payloads, whose PickleWrapper contents are reference-private)
  memcpy            one plain copy of the tensor bytes into fresh memory (tensor payloads):
                    the physical floor for anything that hands the receiver its own copy
  engine pickle     the engine's own path (engine-path payloads, engine_samples.py): send as
  engine msgpack    Sender.send encodes, receive as every engine process decodes and then
                    unwraps (the allow-listed unpickler); engine msgpack's "vs pickle" is
                    against engine pickle, engine pickle's against bare pickle
  sglang engine     SGLang's own path for the same step message (BatchTokenIDOutput built by
  pickle / msgpack  its output processor, time stats wrapped as to_payload wraps them, sock_send's
                    encode; sock_recv's decode, then unwrap_from_pickle as its tokenizer manager
                    does); "vs sglang" of the engine rows is against these

All cases of one payload are timed in the same repetitions, interleaved (timing.py);
ratios are per repetition, then summarised (median, 25th-75th percentile).
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import pickle
import platform
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from reference_tools.bench.engine_samples import (
    ENGINE_MSGPACK,
    ENGINE_PICKLE,
    ENGINE_TRANSPORTS,
    SGLANG_COUNTERPART,
    SGLANG_ENGINE_MSGPACK,
    SGLANG_ENGINE_PICKLE,
    SGLANG_ENGINE_TRANSPORTS,
)
from reference_tools.bench.payloads import ENGINE_PATH, MiB, Payload, default_payloads
from reference_tools.bench.tables import markdown_table, text_table
from reference_tools.bench.timing import Stat, bootstrap_ratio, interleaved, paired_ratios

PICKLE, MSGPACK, OOB, UPSTREAM, MEMCPY = "pickle", "msgpack", "msgpack+oob", "sglang msgpack", "memcpy"
OPS = ("encode", "decode", "roundtrip")
BIG = 32 * MiB  # payloads at least this large get fewer repetitions, one call per batch


@dataclass
class Transport:
    name: str
    impl: str  # whose classes build the message: reference | sglang
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]
    tensors_only: bool = False
    engine_only: bool = False  # the engine-path rows: engine-path payloads only

    def applies(self, payload: Payload) -> bool:
        if self.engine_only:
            return payload.group == ENGINE_PATH
        if self.impl == "sglang" and payload.group == ENGINE_PATH:
            return False  # SGLang's engine-path sample holds its time stats unwrapped: its own rows only
        return payload.has_tensors or not self.tensors_only


def wire_size(wire: Any) -> int:
    if isinstance(wire, list):  # frames
        return sum(memoryview(f).nbytes for f in wire)
    return memoryview(wire).nbytes


# -- implementations ------------------------------------------------------------------
def load_impls(spec: str) -> tuple[dict[str, Any], list[str]]:
    """{'reference': classes, 'sglang': classes} for 'auto' | 'reference' | 'reference,sglang';
    notes say what was skipped and why."""
    wanted = ["reference", "sglang"] if spec == "auto" else [s.strip() for s in spec.split(",") if s.strip()]
    unknown = set(wanted) - {"reference", "sglang"}
    if unknown:
        raise ValueError(f"unknown implementation(s) {sorted(unknown)}: choose reference and/or sglang")
    impls: dict[str, Any] = {}
    notes: list[str] = []
    if "reference" in wanted or not wanted:
        from reference_impl import io_struct

        impls["reference"] = io_struct
    if "sglang" in wanted:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                impls["sglang"] = importlib.import_module("sglang.srt.managers.io_struct")
        except Exception as exc:  # noqa: BLE001 - reported, not fatal, under auto
            if spec != "auto":
                raise RuntimeError(f"--impl sglang: cannot import SGLang ({type(exc).__name__}: {exc}); "
                                   "run in an environment with SGLang installed (tox -e upstream)") from None
            notes.append(f"SGLang not installed here ({type(exc).__name__}); upstream column skipped")
    return impls, notes


def transports(impls: dict[str, Any]) -> list[Transport]:
    out: list[Transport] = []
    if "reference" in impls:
        from reference_impl import codec

        out += [
            Transport(PICKLE, "reference", lambda o: pickle.dumps(o, protocol=pickle.HIGHEST_PROTOCOL), pickle.loads),
            Transport(MSGPACK, "reference", lambda o: codec.encode(o, "msgpack"),
                      lambda b: codec.decode(b, "msgpack", allow_pickle=True)),
            Transport(OOB, "reference", lambda o: codec.encode_frames(o, "msgpack"),
                      lambda f: codec.decode_frames(f, "msgpack", allow_pickle=True), tensors_only=True),
        ]
        from reference_tools.bench import engine_samples

        out += [Transport(name, "reference", engine_samples.engine_send(tp), engine_samples.engine_receive(tp),
                          engine_only=True) for name, tp in ENGINE_TRANSPORTS.items()]
    if "sglang" in impls:
        io = impls["sglang"]
        if "reference" not in impls:
            out.append(Transport(PICKLE, "sglang", lambda o: pickle.dumps(o, protocol=pickle.HIGHEST_PROTOCOL),
                                 pickle.loads))
        out.append(Transport(UPSTREAM, "sglang", _upstream_call(io, "msgpack_encode"),
                             _upstream_call(io, "msgpack_decode")))
        from reference_tools.bench import engine_samples

        out += [Transport(name, "sglang", engine_samples.engine_send_sglang(tp),
                          engine_samples.engine_receive_sglang(tp), engine_only=True)
                for name, tp in SGLANG_ENGINE_TRANSPORTS.items()]
    return out


def _upstream_call(io: Any, name: str) -> Callable[[Any], Any]:
    # msgpack_encode / msgpack_decode are the functions sock_send / sock_recv call in msgpack
    # mode (SGLANG_USE_PICKLE_IPC=0); they do not depend on that switch themselves.
    return getattr(io, name)


def _tensor_view(obj: Any) -> memoryview:
    """The raw bytes of the (only) tensor of a tensor payload."""
    import torch

    tensors = [t for t in (getattr(obj, "pooled_hidden_states", None) or []) if isinstance(t, torch.Tensor)]
    flat = [t.contiguous().reshape(-1).view(torch.uint8).numpy() for t in tensors]
    import numpy as np

    return memoryview(np.concatenate(flat) if len(flat) > 1 else flat[0])


# -- running --------------------------------------------------------------------------
def bench_payload(payload: Payload, impls: dict[str, Any], tps: Sequence[Transport], reps: int,
                  min_time: float, clock: str = "cpu", collect: bool = False) -> dict:
    objs = {name: payload.build(classes) for name, classes in impls.items() if name in payload.impls}
    cases: dict[str, Callable[[], Any]] = {}
    rows: dict[str, dict] = {}
    wires: dict[str, Any] = {}
    for tp in tps:
        if not tp.applies(payload) or tp.impl not in objs:
            continue
        obj = objs[tp.impl]
        wire = tp.encode(obj)
        tp.decode(wire)  # fails loudly here rather than inside the timing loop
        wires[tp.name] = wire
        rows[tp.name] = {"wire_bytes": wire_size(wire)}
        cases[f"{tp.name}|encode"] = (lambda tp=tp, obj=obj: tp.encode(obj))
        cases[f"{tp.name}|decode"] = (lambda tp=tp, wire=wire: tp.decode(wire))
        cases[f"{tp.name}|roundtrip"] = (lambda tp=tp, obj=obj: tp.decode(tp.encode(obj)))
    if payload.has_tensors and "reference" in objs:
        view = _tensor_view(objs["reference"])
        rows[MEMCPY] = {"wire_bytes": view.nbytes}
        cases[f"{MEMCPY}|roundtrip"] = lambda view=view: bytearray(view)
    message_bytes = rows.get(MSGPACK, rows.get(UPSTREAM, {})).get("wire_bytes", 0)
    big = max(payload.tensor_bytes, message_bytes) >= BIG
    samples = interleaved(cases, reps=max(3, reps // 3) if big else reps, min_time=0 if big else min_time,
                          batches={n: 1 for n in cases} if big else None, clock=clock,
                          collect=collect)
    del wires
    for key, values in samples.items():
        name, op = key.split("|")
        rows[name][op] = Stat.of(values).to_json()
        rows[name][op + "_samples"] = values
    identical = None
    if MSGPACK in rows and UPSTREAM in rows:
        identical = (_codec_bytes(objs["reference"]) == impls["sglang"].msgpack_encode(objs["sglang"]))
    ratios = _ratios(rows)
    _encode_bounds(rows, ratios)
    for row in rows.values():
        for op in OPS:
            row.pop(op + "_samples", None)
    return {"payload": payload.name, "group": payload.group, "tensor_bytes": payload.tensor_bytes,
            "message_bytes": message_bytes, "same_bytes_as_sglang": identical, "transports": rows,
            "ratios": ratios}


def _codec_bytes(obj: Any) -> bytes:
    from reference_impl import codec

    return codec.encode(obj, "msgpack")


def _ratios(rows: dict[str, dict]) -> dict[str, dict]:
    """Paired per-repetition round-trip ratios: speed-up vs pickle and vs sglang (>1: faster),
    and cost in memcpys (tensor payloads). The engine-path rows compare within their kind: engine
    msgpack against engine pickle, and against SGLang's own engine path of the same transport."""
    out: dict[str, dict] = {}

    def rt(name: str) -> Optional[list[float]]:
        return rows.get(name, {}).get("roundtrip_samples")

    for name in rows:
        mine = rt(name)
        if mine is None:
            continue
        r: dict[str, Any] = {}
        base = {ENGINE_MSGPACK: ENGINE_PICKLE, SGLANG_ENGINE_MSGPACK: SGLANG_ENGINE_PICKLE}.get(name, PICKLE)
        if rt(base) and name != base:
            paired = paired_ratios(rt(base), mine)
            r["vs_pickle"] = Stat.of(paired).to_json()
            r["vs_pickle_ci"] = bootstrap_ratio(paired).to_json()
        theirs = SGLANG_COUNTERPART.get(name, UPSTREAM)
        if rt(theirs) and name != theirs and name not in SGLANG_ENGINE_TRANSPORTS:
            r["vs_sglang"] = Stat.of(paired_ratios(rt(theirs), mine)).to_json()
        if rt(MEMCPY) and name != MEMCPY:
            r["memcpys"] = Stat.of(paired_ratios(mine, rt(MEMCPY))).to_json()
        out[name] = r
    return out


def _encode_bounds(rows: dict[str, dict], ratios: dict[str, dict]) -> None:
    """The best round-trip speed-up over pickle a transport could reach if it decoded exactly
    as fast as pickle: (pickle encode + pickle decode) / (its encode + pickle decode), from
    the medians; and the measured ratio's share of it."""
    base = rows.get(PICKLE, {})
    if "encode" not in base or "decode" not in base:
        return
    for name, row in rows.items():
        if (name in (PICKLE, *ENGINE_TRANSPORTS, *SGLANG_ENGINE_TRANSPORTS) or "encode" not in row
                or "vs_pickle" not in ratios.get(name, {})):
            continue
        bound = (base["encode"]["median"] + base["decode"]["median"]) / (row["encode"]["median"]
                                                                           + base["decode"]["median"])
        ratios[name]["encode_bound"] = bound
        ratios[name]["share_of_bound"] = ratios[name]["vs_pickle"]["median"] / bound


def run(impl: str = "auto", payload_filter: Sequence[str] = (), reps: int = 15, min_time: float = 0.004,
        max_tensor_bytes: Optional[int] = None, tiny: bool = False, clock: str = "cpu", collect: bool = False,
        progress: Optional[Callable[[str], None]] = None) -> dict:
    impls, notes = load_impls(impl)
    tps = transports(impls)
    payloads = default_payloads(max_tensor_bytes, tiny=tiny)
    if payload_filter:
        names = [p.name for p in payloads]
        payloads = [p for p in payloads if any(f.lower() in p.name.lower() for f in payload_filter)]
        if not payloads:
            raise ValueError(f"--payload {' / '.join(map(repr, payload_filter))} names no payload; "
                             f"the payloads: {', '.join(names)}")
    results = []
    for payload in payloads:
        if progress:
            progress(payload.name)
        try:
            results.append(bench_payload(payload, impls, tps, reps, min_time, clock, collect))
        except ImportError as exc:  # e.g. the engine payloads without the serve extra
            notes.append(f"{payload.name}: skipped ({type(exc).__name__}: {exc})")
    report = {"kind": "codec", "meta": machine_meta(impls, reps=reps, min_time=min_time, clock=clock,
                                                    gc="on" if collect else "paused while timing"),
              "notes": notes,
              "transports": [t.name for t in tps] + ([MEMCPY] if any(p.has_tensors for p in payloads) else []),
              "payloads": results}
    report["targets"] = evaluate_targets(report)
    return report


def machine_meta(impls: dict[str, Any], **settings: Any) -> dict:
    import msgspec
    import torch

    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(), "platform": platform.platform(), "machine": platform.machine(),
        "cpus": os.cpu_count(), "torch": torch.__version__, "msgspec": msgspec.__version__,
        "implementations": sorted(impls), "settings": settings,
    }
    try:
        meta["loadavg_at_start"] = os.getloadavg()
    except OSError:
        pass
    if "sglang" in impls:
        import importlib.metadata

        meta["sglang"] = importlib.metadata.version("sglang")
    return meta


# -- targets --------------------------------------------------------------------------------
def evaluate_targets(report: dict) -> list[dict]:
    """The targets as measured ratios; met/missed is a statement, not a test verdict."""
    out = []
    for p in report["payloads"]:
        r = p["ratios"].get(MSGPACK, {})
        if p["group"] == "batch" and "share_of_bound" in r:
            v = r["vs_pickle"]
            bound = r["encode_bound"]
            share = {k: v[k] / bound for k in ("median", "p25", "p75")}
            out.append(_target(f"{p['payload']}: msgpack round trip >= 95% of its encode bound "
                               f"({bound:.2f}x pickle)", share, 0.95, higher=True))
        if p["group"] == "engine" and "vs_pickle" in r:
            out.append(_target(f"{p['payload']}: msgpack round trip not slower than pickle", r["vs_pickle"], 1.0,
                               higher=True))
        engine = p["ratios"].get(ENGINE_MSGPACK, {})
        if p["group"] == ENGINE_PATH and "vs_pickle" in engine:
            out.append(_target(f"{p['payload']}: engine msgpack send + receive not slower than engine pickle",
                               engine["vs_pickle"], 1.0, higher=True))
        if p["group"] == ENGINE_PATH and "vs_sglang" in engine:
            out.append(_target(f"{p['payload']}: engine msgpack send + receive not slower than SGLang's own "
                               "(sglang engine msgpack)", engine["vs_sglang"], 1.0, higher=True))
        if "vs_sglang" in r:
            out.append(_target(f"{p['payload']}: msgpack round trip not slower than sglang msgpack",
                               r["vs_sglang"], 1.0, higher=True))
        if p["group"] == "tensor" and p["tensor_bytes"] == 64 * MiB and "memcpys" in p["ratios"].get(OOB, {}):
            out.append(_target(f"{p['payload']}: zero-copy (msgpack+oob) round trip <= 1.5x one memory copy",
                               p["ratios"][OOB]["memcpys"], 1.5, higher=False))
    return out


def _target(what: str, stat: dict, bound: float, higher: bool) -> dict:
    value = stat["median"]
    met = value >= bound if higher else value <= bound
    if met:
        note = "met"
    elif higher:
        note = f"missed: {value:.2f}x, {bound / value:.2f}x short of {bound:g}x"
    else:
        note = f"missed: {value:.2f}x, {value / bound:.2f}x over {bound:g}x"
    return {"target": what, "value": value, "p25": stat["p25"], "p75": stat["p75"], "bound": bound,
            "higher_is_better": higher, "met": met, "note": note}


# -- rendering --------------------------------------------------------------------------
def fmt_time(s: float) -> str:
    if s != s:  # nan
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def fmt_ratio(stat: Optional[dict]) -> str:
    if not stat:
        return "-"
    return f"{stat['median']:.2f}x [{stat['p25']:.2f}-{stat['p75']:.2f}]"


def fmt_ci(ci: Optional[dict]) -> str:
    if not ci or ci["lo"] != ci["lo"]:
        return "-"
    return f"{ci['center']:.2f}x [{ci['lo']:.2f}-{ci['hi']:.2f}]: {ci['verdict']}"


def table_rows(report: dict) -> tuple[list[str], list[list[str]]]:
    header = ["payload", "transport", "wire size", "encode", "decode", "round trip [p25-p75]",
              "vs pickle", "vs pickle [95% CI]: verdict", "bound (share)", "vs sglang", "x memcpy", "MB/s"]
    rows = []
    for p in report["payloads"]:
        first = True
        for name in report["transports"]:
            row = p["transports"].get(name)
            if row is None:
                continue
            rt = row.get("roundtrip")
            ratios = p["ratios"].get(name, {})
            thr = (p["tensor_bytes"] or p["message_bytes"]) / rt["median"] / 1e6 if rt and rt["median"] else None
            rows.append([
                p["payload"] if first else "", name, fmt_bytes(row["wire_bytes"]),
                fmt_time(row["encode"]["median"]) if "encode" in row else "-",
                fmt_time(row["decode"]["median"]) if "decode" in row else "-",
                f"{fmt_time(rt['median'])} [{fmt_time(rt['p25'])}-{fmt_time(rt['p75'])}]" if rt else "-",
                fmt_ratio(ratios.get("vs_pickle")), fmt_ci(ratios.get("vs_pickle_ci")),
                (f"{ratios['encode_bound']:.2f}x ({ratios['share_of_bound']:.0%})"
                 if "encode_bound" in ratios else "-"),
                fmt_ratio(ratios.get("vs_sglang")),
                fmt_ratio(ratios.get("memcpys")), f"{thr:,.0f}" if thr else "-",
            ])
            first = False
    return header, rows


def render_text(report: dict) -> str:
    lines = text_table(*table_rows(report))
    lines += ["", "vs pickle / vs sglang: round-trip speed-up (>1 = faster), median of per-repetition ratios "
              "[25th-75th percentile]; [95% CI]: bootstrap interval of the geometric mean of those ratios, and "
              "what it allows one to say; bound: the speed-up over pickle if decode were exactly as fast as "
              "pickle's ((pickle encode + decode) / (encode + pickle decode)), and the share of it reached; "
              "x memcpy: round trip cost in plain copies of the tensor bytes; engine msgpack's vs pickle is "
              "against engine pickle (the engine's send + receive functions, unwrap included), its vs sglang "
              "against SGLang's own engine path (sglang engine msgpack / pickle)."]
    lines += _summary_lines(report)
    return "\n".join(lines) + "\n"


def render_markdown(report: dict) -> str:
    lines = markdown_table(*table_rows(report))
    lines.append("")
    lines += _summary_lines(report, markdown=True)
    return "\n".join(lines) + "\n"


def _summary_lines(report: dict, markdown: bool = False) -> list[str]:
    lines = []
    meta = report["meta"]
    lines.append(f"{'**Machine**' if markdown else 'machine'}: {meta['cpus']} CPUs, {meta['platform']}, "
                 f"python {meta['python']}, torch {meta['torch']}, msgspec {meta['msgspec']}"
                 + (f", sglang {meta['sglang']}" if "sglang" in meta else "")
                 + (f", load average at start {meta['loadavg_at_start'][0]:.1f}" if "loadavg_at_start" in meta else ""))
    same = [p["payload"] for p in report["payloads"] if p.get("same_bytes_as_sglang") is False]
    checked = [p for p in report["payloads"] if p.get("same_bytes_as_sglang") is not None]
    if checked:
        lines.append(f"wire bytes identical to sglang on {len(checked) - len(same)}/{len(checked)} payloads"
                     + (f" (differ: {', '.join(same)})" if same else ""))
    for note in report.get("notes", []):
        lines.append(f"note: {note}")
    lines += disagreements(report)
    targets = report.get("targets", [])
    if targets:
        met = sum(t["met"] for t in targets)
        lines += ["", f"{'**Targets**' if markdown else 'targets'}: {met}/{len(targets)} met"]
        for t in targets:
            mark = "met   " if t["met"] else "MISSED"
            lines.append(f"{'- ' if markdown else '  '}{mark} {t['target']}: {t['value']:.2f}x "
                         f"[{t['p25']:.2f}-{t['p75']:.2f}]" + ("" if t["met"] else f" ({t['note']})"))
    return lines


def disagreements(report: dict) -> list[str]:
    """A line per engine-path payload whose bare codec ratio (msgpack vs pickle) and engine-path
    ratio (engine msgpack vs engine pickle) point in different directions."""
    out = []
    for p in report["payloads"]:
        bare = p["ratios"].get(MSGPACK, {}).get("vs_pickle")
        engine = p["ratios"].get(ENGINE_MSGPACK, {}).get("vs_pickle")
        if bare and engine and (bare["median"] >= 1) != (engine["median"] >= 1):
            out.append(f"directions differ: {p['payload']}: the bare codec says msgpack {bare['median']:.2f}x "
                       f"pickle, the engine's path {engine['median']:.2f}x")
    return out


def write_json(report: dict, path: str) -> None:
    with open(path, "w") as fh:
        json.dump(report, fh, indent=1, default=_json_default)
        fh.write("\n")


def _json_default(o: Any) -> Any:
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def main_progress(msg: str) -> None:
    print(f"  {msg} ...", file=sys.stderr, flush=True)
