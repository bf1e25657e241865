"""How pytest-xdist shares the checks out (`ipc-conformance run -n N`).

Like xdist's loadgroup, but the E2E checks form one group by their check id: they share
a session-scoped server per transport, and two workers would each start their own. The
group is read from the check id, not from an xdist_group mark, because that mark works by
renaming node ids, which pytest 9.2 no longer lets a plugin do (the mark is then silently
ignored and the E2E checks spread over the workers).
"""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling

from conformance.plugin.checks import check_id_of

E2E_GROUP = "ipc-conformance-e2e"


def group_of(nodeid: str) -> str:
    """The unit of work a test belongs to: all E2E checks together, else the test alone."""
    check_id = check_id_of(nodeid)
    if check_id is not None and check_id.split(".")[1] == "E2E":
        return E2E_GROUP
    return nodeid


class E2ETogetherScheduling(LoadGroupScheduling):  # type: ignore[misc]  # xdist ships no type information
    def _split_scope(self, nodeid: str) -> str:
        group = group_of(nodeid)
        return group if group == E2E_GROUP else super()._split_scope(nodeid)
