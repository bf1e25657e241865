"""How pytest-xdist shares the checks out (`ipc-conformance run -n N`).

Like xdist's loadgroup, but the E2E checks form one group by their check id: they share
a session-scoped server per transport, and two workers would each start their own (the
traced-chain checks, one group per transport, likewise). The
group is read from the check id, not from an xdist_group mark, because that mark works by
renaming node ids, which pytest 9.2 no longer lets a plugin do (the mark is then silently
ignored and the E2E checks spread over the workers).
"""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling

from conformance.plugin.checks import check_id_of

E2E_GROUP = "ipc-conformance-e2e"
#: The Trace.<Hop>.OneLinkedTrace checks of one transport share one run of the traced chain
#: (three processes): one group per transport, "<TRACE_GROUP>-<transport>".
TRACE_GROUP = "ipc-conformance-trace"


def group_of(nodeid: str) -> str:
    """The unit of work a test belongs to: all E2E checks together, the traced-chain checks of
    one transport together, else the test alone."""
    check_id = check_id_of(nodeid)
    parts = check_id.split(".") if check_id is not None else []
    if parts[1:2] == ["E2E"]:
        return E2E_GROUP
    if parts[1:2] == ["Trace"] and parts[3:4] == ["OneLinkedTrace"] and len(parts) > 4:
        return f"{TRACE_GROUP}-{parts[4]}"
    return nodeid


class E2ETogetherScheduling(LoadGroupScheduling):  # type: ignore[misc]  # xdist ships no type information
    def _split_scope(self, nodeid: str) -> str:
        group = group_of(nodeid)
        return group if group != nodeid else super()._split_scope(nodeid)
