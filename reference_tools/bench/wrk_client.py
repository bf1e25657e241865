"""The native load generator: ``wrk`` (Debian package ``wrk``) with a small Lua script.

wrk is a C event loop: at concurrency 1024 it spends a few percent of one core where a
Python client (httpx) needs all of it, so the server, not the client, bounds the
throughput. The Lua script below POSTs the benchmark's prompts to ``/generate`` in turn on
``concurrency`` connections (closed loop: a connection sends its next request when the
answer arrived), counts an answer as complete when it is a 200 holding
``"completion_tokens": <output_len>`` (a JSON answer, or the last event of a stream), and
stops after ``requests`` answers. Its own monotonic clock (LuaJIT ffi) times the first
request to the last answer counted; requests still in flight then are dropped (the server
aborts them). wrk reports only end-to-end latency: no TTFT or ITL (streamed rounds that
need those use the Python client).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Optional, Sequence

MARK = "IPCC_RESULT "

_LUA = r"""
local ffi = require("ffi")
ffi.cdef[[ typedef struct { long tv_sec; long tv_nsec; } ipcc_timespec; int clock_gettime(int, ipcc_timespec *); ]]
local ts = ffi.new("ipcc_timespec")
local function now() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end

local bodies = { %(bodies)s }
local target = %(target)d
local expect = '"completion_tokens":%%s*%(output_len)d[,}]'
local done_path = %(done_path)s
local headers = { ["Content-Type"] = "application/json" }
local threads = {}
local sent = 0
ok, bad, t_start, t_end, bad_sample = 0, 0, 0, 0, ""

function setup(thread) table.insert(threads, thread) end

function request()
  if sent == 0 then t_start = now() end
  sent = sent + 1
  return wrk.format("POST", "/generate", headers, bodies[(sent - 1) %% #bodies + 1])
end

function response(status, hdrs, body)
  if t_end ~= 0 then return end
  if status == 200 and string.find(body, expect) then
    ok = ok + 1
  else
    bad = bad + 1
    if bad_sample == "" then bad_sample = tostring(status) .. " " .. string.sub(body or "", 1, 160) end
  end
  if ok + bad >= target then
    t_end = now()
    local f = io.open(done_path, "w"); f:write("done\n"); f:close()
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local t = threads[1]
  local s = string.gsub(t:get("bad_sample"), '[^%%w%%s%%.,:_%%-]', '?')
  io.write(string.format('%(mark)s{"ok":%%d,"bad":%%d,"t_start":%%.6f,"t_end":%%.6f,"bad_sample":"%%s",' ..
    '"lat_mean_us":%%.1f,"lat_p50_us":%%.1f,"lat_p90_us":%%.1f,"lat_p99_us":%%.1f,' ..
    '"errors_connect":%%d,"errors_read":%%d,"errors_timeout":%%d}\n',
    t:get("ok"), t:get("bad"), t:get("t_start"), t:get("t_end"), s, latency.mean,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    summary.errors.connect, summary.errors.read, summary.errors.timeout))
end
"""


@dataclass
class WrkResult:
    ok: int
    bad: int
    duration: float  # first request sent -> last counted answer (s)
    latency_ms: dict  # mean, median, p90, p99 of end-to-end latency
    cpu_s: float  # wrk's own user + system time
    error: str = ""


def find_wrk() -> Optional[str]:
    return shutil.which("wrk")


def lua_script(bodies: Sequence[str], requests: int, output_len: int, done_path: str) -> str:
    """The Lua script for one run (bodies are JSON texts, embedded as Lua long strings)."""
    for body in bodies:
        if "]==]" in body:
            raise ValueError("a request body contains the Lua long-string terminator")
    return _LUA % {"bodies": ", ".join(f"[==[{b}]==]" for b in bodies), "target": requests,
                   "output_len": output_len, "done_path": json.dumps(done_path), "mark": MARK}


def request_body(ids: Sequence[int], output_len: int, stream: bool) -> str:
    return json.dumps({"input_ids": list(ids), "stream": stream,
                       "sampling_params": {"max_new_tokens": output_len, "ignore_eos": True, "temperature": 0.0}},
                      separators=(",", ":"))


def run_wrk(url: str, prompts: Sequence[Sequence[int]], output_len: int, concurrency: int, requests: int,
            stream: bool, timeout_s: float = 600.0, wrk: str = "wrk") -> WrkResult:
    """Send `requests` requests (the prompts in turn) at `concurrency` connections; one wrk thread."""
    with tempfile.TemporaryDirectory(prefix="ipcc-wrk-") as tmp:
        done_path = os.path.join(tmp, "done")
        script = os.path.join(tmp, "load.lua")
        with open(script, "w") as fh:
            fh.write(lua_script([request_body(p, output_len, stream) for p in prompts], requests, output_len,
                                done_path))
        cmd = [wrk, "-t", "1", "-c", str(concurrency), "-d", f"{int(timeout_s)}s", "--timeout", f"{int(timeout_s)}s",
               "-s", script, url.rstrip("/") + "/generate"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + timeout_s + 10
        while proc.poll() is None and not os.path.exists(done_path) and time.monotonic() < deadline:
            time.sleep(0.02)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # wrk then reports at once instead of sleeping out -d
        _pid, _status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(_status)
        out = proc.stdout.read() if proc.stdout else ""
        if proc.stdout:
            proc.stdout.close()
    cpu = usage.ru_utime + usage.ru_stime
    line = next((ln for ln in out.splitlines() if ln.startswith(MARK)), None)
    if line is None:
        return WrkResult(0, requests, float("nan"), {}, cpu, error=f"wrk printed no result: {out[-300:]!r}")
    r = json.loads(line[len(MARK):])
    duration = r["t_end"] - r["t_start"] if r["t_end"] else float("nan")
    errors = [f"{k.split('_')[1]} errors: {r[k]}" for k in ("errors_connect", "errors_read", "errors_timeout") if r[k]]
    if r["bad"]:
        errors.insert(0, f"{r['bad']} answers without {output_len} tokens, e.g. {r['bad_sample']!r}")
    if r["ok"] + r["bad"] < requests:
        errors.insert(0, f"only {r['ok'] + r['bad']} of {requests} answers within {timeout_s:.0f} s")
    latency = {"mean": r["lat_mean_us"] / 1000, "median": r["lat_p50_us"] / 1000, "p90": r["lat_p90_us"] / 1000,
               "p99": r["lat_p99_us"] / 1000}
    return WrkResult(r["ok"], r["bad"], duration, latency, cpu, "; ".join(errors))
