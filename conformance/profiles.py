"""Hypothesis settings for the suite's generated checks: dev (default), ci, thorough.

`ci` is derandomized (the same examples every run) and chosen automatically when
the CI environment variable is set. They are kept as settings objects applied to
the suite's own tests, so a project's global Hypothesis profiles are untouched.
"""

from __future__ import annotations

import os
from typing import Optional

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
