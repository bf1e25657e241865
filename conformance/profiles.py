"""Hypothesis settings for the suite's generated checks: dev (default), ci, thorough.

`ci` is derandomized (the same examples every run) and chosen automatically when
the CI environment variable is set. They are kept as settings objects applied to
the suite's own tests, so a project's global Hypothesis profiles are untouched.

Under `ci` a generated check draws what its check id and the manifest decide, and
nothing else: `seed_for` gives its seed, and `canonical_draws` keeps Hypothesis from
mixing in constants it mines from whatever local modules happen to be imported (an
adapter's own module, a test file), which would make the same implementation draw
other values when reached through another adapter class.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from typing import Any, Iterator, Optional

import msgspec
from hypothesis import HealthCheck, settings

# One failure per check is enough for a conformance verdict; shrinking several distinct
# bugs at once is what makes a failing run slow.
_COMMON = dict(deadline=None, print_blob=True, suppress_health_check=list(HealthCheck), database=None,
               report_multiple_bugs=False)

PROFILES = {
    "dev": settings(max_examples=15, **_COMMON),
    "ci": settings(max_examples=10, derandomize=True, **_COMMON),
    "thorough": settings(max_examples=300, **_COMMON),
}


def chosen(name: Optional[str] = None) -> str:
    name = name or os.environ.get("IPC_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    if name not in PROFILES:
        raise ValueError(f"unknown hypothesis profile {name!r}; choose one of {', '.join(PROFILES)}")
    return name


def derandomized(name: str) -> bool:
    return bool(PROFILES[name].derandomize)


def seed_for(check_id: str, manifest: Any) -> int:
    """The seed of a generated check: sha256 of its id and of the manifest's types (structs
    and enums; not its module or implementation name), so neither the test function's
    source nor the adapter's class changes what is drawn."""
    types = msgspec.json.encode({"structs": manifest.structs, "enums": manifest.enums})
    return int.from_bytes(hashlib.sha256(check_id.encode() + b"\0" + types).digest()[:16], "big")


@contextlib.contextmanager
def canonical_draws() -> Iterator[None]:
    """Draw without Hypothesis's pool of constants mined from local modules: which modules
    are loaded (the adapter's, the tests') must not change the values a check draws."""
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:  # a Hypothesis without the pool: its draws are canonical already
        yield
        return
    mined = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if mined is None or cache is None:
        yield
        return
    providers._get_local_constants = lambda: Constants()
    cache.cache.clear()  # it holds local constants drawn from before
    try:
        yield
    finally:
        providers._get_local_constants = mined
        cache.cache.clear()
