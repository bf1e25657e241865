"""The byte rules at Required level (SPEC R-VEC-3): conformance.schema.wire_form and the Bytes checks.

An encoder that writes float 32 where a value fits, integral floats as ints, or leaves out
trailing fields equal to their defaults produces bytes every decoder accepts with the right
value; only the form of the bytes shows the broken MUST. The reference testee plants each of
these on purpose (`--break float32|int-floats|drop-defaults`); each must fail the run at
Required level, every time, and the unbroken testee must pass the same checks.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.schema import wire_form
from conformance.schema.golden import vector_paths
from conformance.schema.manifest import load_manifest, wire_manifests


def _vectors() -> list[Path]:
    """Every vector file of every bundled manifest, once (manifests share the unchanged ones)."""
    return sorted({p for m in wire_manifests() for p in vector_paths(m).values()})


def test_write_reproduces_every_golden_vector():
    # The vectors use the shortest headers, so parse + write is the identity on them, except the
    # map header of an omit_defaults struct (0.5.15-0.5.18's SamplingParams): msgspec writes it
    # as map16 before it knows how many fields it leaves out. Header widths are free (R-MSG-*).
    paths = _vectors()
    assert len(paths) > 300
    wide = 0
    for path in paths:
        data = path.read_bytes()
        written = wire_form.write(wire_form.parse(data))
        if written != data:
            wide += 1
            assert len(written) < len(data) and not wire_form.form_differences(
                wire_form.parse(written), wire_form.parse(data)), path.name
    assert wide < len(paths) // 4


def test_header_widths_are_the_only_freedom():
    want = wire_form.parse(bytes([0x93, 0x01, 0xA1, 0x61, 0xCB]) + struct.pack(">d", 0.5))
    wide = bytes([0xDC, 0, 3, 0xCC, 0x01, 0xD9, 1, 0x61, 0xCB]) + struct.pack(">d", 0.5)
    assert wire_form.form_differences(wire_form.parse(wide), want) == []


@pytest.mark.parametrize("got, rule", [
    (bytes([0x92, 0x01, 0xA1, 0x61]), "R-MSG-2"),                                    # a field dropped
    (bytes([0x93, 0x01, 0xA1, 0x61, 0xCA]) + struct.pack(">f", 0.5), "R-VAL-2"),     # float 32
    (bytes([0x93, 0x01, 0xA1, 0x61, 0x00]), "R-VAL-2"),                              # an int for a float
    (bytes([0x93, 0x01, 0xC4, 0x01, 0x61, 0xCB]) + struct.pack(">d", 0.5), "bin"),   # bytes for a str
])
def test_each_broken_rule_is_named(got, rule):
    want = wire_form.parse(bytes([0x93, 0xA1, 0x54, 0xA1, 0x61, 0xCB]) + struct.pack(">d", 0.5))
    got = bytes([got[0], 0xA1, 0x54]) + got[2:]  # the same tag first
    problems = wire_form.form_differences(wire_form.parse(got), want)
    assert len(problems) == 1 and rule in problems[0], problems


def test_sets_may_come_in_any_order_and_nothing_else_may():
    manifest = load_manifest("sglang-0.5.23")
    data = vector_paths("sglang-0.5.23")[("TokenizedGenerateReqInput", "typical")].read_bytes()
    want = wire_form.parse(data)
    unordered = wire_form.unordered_paths(manifest, "TokenizedGenerateReqInput", want)
    assert unordered == {(8, 2)}  # SamplingParams.stop_token_ids, a Set[int]

    def reverse_at(item: wire_form.Item, path: tuple) -> wire_form.Item:
        if not path:
            return wire_form.Item(item.kind, item.value, item.items[::-1], item.code)
        items = list(item.items)
        items[path[0]] = reverse_at(items[path[0]], path[1:])
        return wire_form.Item(item.kind, item.value, tuple(items), item.code)

    assert wire_form.form_differences(reverse_at(want, (8, 2)), want, unordered) == []
    assert wire_form.form_differences(reverse_at(want, ()), want, unordered)
    assert wire_form.form_differences(reverse_at(want, (8,)), want, unordered)


def test_cut_short_and_trailing_bytes_are_not_one_object():
    with pytest.raises(wire_form.FormError, match="cut short"):
        wire_form.parse(bytes([0x92, 0x01]))
    with pytest.raises(wire_form.FormError, match="follow"):
        wire_form.parse(bytes([0x01, 0x02]))


def _run_bytes_checks(breaks: list[str], tmp_path: Path) -> dict[str, str]:
    command = " ".join(["python -m reference_impl.testee", *(f"--break {b}" for b in breaks)])
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", f"cmd:{command}", "--transport", "msgpack",
         "--report", str(report), "--", "-k", "Bytes and not Primitive"],
        capture_output=True, text=True, timeout=600)
    assert report.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    return {r["id"]: r["outcome"] for r in json.loads(report.read_text())["results"]}


@pytest.mark.slow
@pytest.mark.parametrize("breaks, at_least", [
    ([], 0),
    (["float32"], 30),        # typical floats 0.5, 1.5, ... all fit float 32
    (["int-floats"], 10),     # edge floats -0.0 (and minimal 0.0) are integral
    (["drop-defaults"], 60),  # minimal instances leave defaults at the end of most messages
])
def test_planted_byte_bugs_fail_required_checks(breaks, at_least, tmp_path):
    first = _run_bytes_checks(breaks, tmp_path)
    failed = sorted(i for i, outcome in first.items() if outcome == "failed")
    assert all(i.startswith("Required.Bytes.") for i in failed)
    if not breaks:
        assert not failed and len(first) >= 303
        return
    assert len(failed) >= at_least, failed
    # deterministic: the same checks fail on a second run
    assert _run_bytes_checks(breaks, tmp_path) == first
