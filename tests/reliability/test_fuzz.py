"""Fuzzing in CI: every target of reference_tools/fuzz for a short fixed budget, and the same
targets under hypothesis (binary strategies and mutated seeds) in this process.

Longer runs are a documented command (docs/reliability.md):

    python -m reference_tools.fuzz all --seconds 300

The budget here: IPC_FUZZ_SECONDS per target (default 3) with atheris when installed
(coverage-guided), else the seeded random mutator. A target with a known, reported finding
(Target.known) is an expected failure, strictly: once fixed, the test says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference_tools.fuzz import targets

pytestmark = pytest.mark.reliability
TEST_TIMEOUT_S = 180

FUZZ_SECONDS = float(os.environ.get("IPC_FUZZ_SECONDS", "3"))
SUMMARIES: dict[str, dict] = {}


def _params():
    for name, target in targets.TARGETS.items():
        marks = [pytest.mark.xfail(strict=True, reason=target.known)] if target.known else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_params()))
def test_fuzz_target_short_budget(name: str, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "reference_tools.fuzz", name, "--seconds", str(FUZZ_SECONDS), "--json",
                           "--artifacts", str(tmp_path / "artifacts")],
                          capture_output=True, text=True, timeout=FUZZ_SECONDS + 150)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no summary from the fuzzer (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    summary = json.loads(lines[-1])
    SUMMARIES[name] = summary
    assert summary["runs"] > 0, summary
    crashes = summary["crashes"]
    detail = "\n".join(f"{c['file']}: {c['error']}" for c in crashes)
    if crashes and crashes[0]["file"]:
        data = open(crashes[0]["file"], "rb").read()
        detail += f"\nfirst crash input ({len(data)} bytes): {data[:400]!r}"
    assert not crashes, f"{name}: {len(crashes)} crash(es) after {summary['runs']} inputs\n{detail}"


# -- the same targets under hypothesis, in process ----------------------------------------
def _seeds(name: str) -> list[bytes]:
    return targets.TARGETS[name].seeds()


def _mutated(seeds: list[bytes]):
    @st.composite
    def strategy(draw):
        data = bytearray(draw(st.sampled_from(seeds)))
        for _ in range(draw(st.integers(0, 4))):
            if not data:
                break
            pos = draw(st.integers(0, len(data) - 1))
            op = draw(st.integers(0, 3))
            if op == 0:
                data[pos] = draw(st.integers(0, 255))
            elif op == 1:
                del data[pos:pos + draw(st.integers(1, 8))]
            elif op == 2:
                data[pos:pos] = draw(st.binary(max_size=8))
            else:
                data = data[:pos]
        return bytes(data)

    return strategy()


HYPOTHESIS_TARGETS = [n for n, t in targets.TARGETS.items() if not t.known]


@pytest.mark.parametrize("name", HYPOTHESIS_TARGETS)
def test_hypothesis_binary_inputs(name: str):
    seeds = _seeds(name)

    @settings(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=st.one_of(st.binary(max_size=512), _mutated(seeds)))
    def run(data: bytes) -> None:
        targets.TARGETS[name].fn(data)

    run()


def test_tripwire_oracle_catches_a_loaded_shell_command():
    """The fuzzers' tripwires work: a pickle that runs a command, loaded the way an unsafe
    receive path would, is reported instead of run."""
    from reference_tools.fuzz.corpus import _evil_pickle

    evil = _evil_pickle()

    def unsafe_receive(data: bytes) -> None:  # what SGLang 0.5.23's msgpack_decode does with a wrapper
        import pickle

        pickle.loads(data)

    with pytest.raises(targets.Tripwire, match="posix.system"):
        with targets.tripwires():
            unsafe_receive(evil)
    assert not os.path.exists("/tmp/ipc-fuzz-pwned")


def test_zzz_report():
    """Not a check: inputs run per target (pytest -s shows them)."""
    for name, s in SUMMARIES.items():
        print(f"\n[fuzz] {name}: {s['engine']} {s['runs']} inputs in {s['seconds']} s, {len(s['crashes'])} crashes")
