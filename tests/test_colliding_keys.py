"""CollidingKeysKeptOnce (SPEC R-VAL-6) judges what the decoder holds, not a dict the runner builds:
a testee that keeps both keys of a map is caught through its view, where DuplicateKeyLastValue,
which reads the testee's re-encode with the runner's decoder, sees one merged key and passes."""

from __future__ import annotations

import re
import sys

import pytest

from conformance.session import Session
from conformance.suite import test_accepts, test_colliding_keys

STRUCT = "DumperControlReqInput"
KEEPS_BOTH = f"cmd:{sys.executable} -m reference_impl.testee --break keep-colliding-keys"


def _close(session: Session) -> None:
    close = getattr(session.adapter, "close", None)
    if close:
        close()


@pytest.mark.parametrize("impl", ["reference", f"cmd:{sys.executable} -m reference_impl.testee"])
def test_the_reference_keeps_one_entry(impl):
    session = Session(impl=impl)
    try:
        test_colliding_keys.test_colliding_keys_kept_once(session, STRUCT)
    finally:
        _close(session)


def test_a_testee_keeping_both_keys_fails_only_the_new_check():
    session = Session(impl=KEEPS_BOTH)
    try:
        test_accepts.test_duplicate_map_key(session, STRUCT)  # the merged re-encode hides it there
        with pytest.raises(AssertionError) as caught:
            test_colliding_keys.test_colliding_keys_kept_once(session, STRUCT)
    finally:
        _close(session)
    differences = caught.value.ipc_failure.differences  # type: ignore[attr-defined]
    named = [re.search(r"\((\w+)\): kept", d).group(1) for d in differences]  # type: ignore[union-attr]
    assert named == list(test_colliding_keys.CASES), differences
    assert "kept [(1, 'a'), (1, 'b')]" in differences[0]
    assert "requirement: SPEC R-VAL-6" in str(caught.value)
