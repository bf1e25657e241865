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
import functools
import hashlib
import os
from typing import Any, Iterator, Optional

# Hypothesis and msgspec are imported when a profile is used, not here: the pytest plugin
# reads NAMES for its option table while loading into every pytest run of the environment.

#: What each profile changes from the common settings below.
_EFFORT: dict[str, dict[str, Any]] = {
    "dev": dict(max_examples=15),
    "ci": dict(max_examples=10, derandomize=True),
    "thorough": dict(max_examples=300),
}
NAMES: tuple[str, ...] = tuple(_EFFORT)


@functools.lru_cache(maxsize=None)
def settings_for(name: str) -> Any:
    """The hypothesis settings object of profile `name`."""
    from hypothesis import HealthCheck, settings

    # One failure per check is enough for a conformance verdict; shrinking several distinct
    # bugs at once is what makes a failing run slow.
    return settings(deadline=None, print_blob=True, suppress_health_check=list(HealthCheck), database=None,
                    report_multiple_bugs=False, **_EFFORT[name])


def chosen(name: Optional[str] = None) -> str:
    name = name or os.environ.get("IPC_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    if name not in _EFFORT:
        raise ValueError(f"unknown hypothesis profile {name!r}; choose one of {', '.join(NAMES)}")
    return name


def derandomized(name: str) -> bool:
    return bool(_EFFORT[name].get("derandomize"))


def seed_for(check_id: str, manifest: Any) -> int:
    """The seed of a generated check: sha256 of its id and of the manifest's types (structs
    and enums; not its module or implementation name), so neither the test function's
    source nor the adapter's class changes what is drawn."""
    import msgspec

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
