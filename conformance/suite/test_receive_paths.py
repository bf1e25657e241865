"""Real receive paths (SPEC R-PW-3, R-DP-2, R-DP-3; defect class: missing-unwrap).

A message sent through the implementation's own data-parallel controller (receive, unwrap,
dispatch), through a scheduler rank's receive path after the controller's broadcast, and back
through the detokenizer's and the tokenizer manager's receive paths arrives with no
PickleWrapper left and equal to what was sent. Unlike ``Unwrap.NoWrapperLeft`` (the
adapter's unwrap function), these run the engine's code over real sockets, through
``receive_paths()``; each check skips unless the adapter declares ``receive_path.<name>``.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import msgspec

from conformance.compare import differences
from conformance.plugin import check
from conformance.suite.capability import require
from conformance.suite.failure import Failure, fail, raise_failure
from conformance.suite.fields import find_wrappers, wrapper_fields
from conformance.suite.payloads import state_view

#: What the tokenizer manager sends the data-parallel controller: tokenized requests (single and
#: batch forms; they carry time stats) are routed to one rank, control messages broadcast.
CARRIED = ("TokenizedGenerateReqInput", "TokenizedEmbeddingReqInput", "BatchTokenizedGenerateReqInput",
           "BatchTokenizedEmbeddingReqInput", "AbortReq", "FlushCacheReqInput", "UpdateWeightsFromTensorReqInput")


#: What the scheduler ranks send the detokenizer, and what reaches the tokenizer manager (the
#: detokenizer's outputs, control replies, and aborts with an error from any engine process).
TO_DETOKENIZER = ("BatchTokenIDOutput", "BatchEmbeddingOutput")
TO_TOKENIZER_MANAGER = ("BatchStrOutput", "BatchEmbeddingOutput", "FlushCacheReqOutput",
                        "UpdateWeightsFromTensorReqOutput", "AbortReq")


def _known(names: tuple[str, ...]) -> Callable[[Any], list[str]]:
    """The check's struct cases: those of `names` the implementation's catalogue has."""
    return lambda ipc: [name for name in names if name in ipc.message_names]


def _path(ipc, name: str) -> Any:
    """The engine's receive path `name`; skips the check unless the adapter declares it
    (without these, only its unwrap function is checked, by Unwrap.NoWrapperLeft)."""
    require(ipc, f"receive_path.{name}")
    paths = ipc.adapter.receive_paths()
    if name not in paths:
        fail(f"{ipc.adapter.label} declares 'receive_path.{name}' but receive_paths() "
             f"has no {name!r} (it has {sorted(paths)})", "R-PW-3",
             step="the implementation's receive paths (Adapter.receive_paths())", ipc=ipc)
    return paths[name]


#: Items in every batch a receive-path check sends: a receive path that opens the wrappers of the
#: first item only (or of none past it) hands the later ones on still wrapped.
BATCH_ITEMS = 3


def _sendable(ipc, value: Any) -> Any:
    """The canonical instance as a process holds it before sending: every PickleWrapper-typed field
    holds the implementation's own object (so the sender has to wrap it), a request names
    routed_dp_rank 0, a rank every deployment has (the canonical 36 would be refused, R-DP-5), and
    every list of structs (a batch's sub-requests) has BATCH_ITEMS items, each with its own rid and
    its own wrapped fields."""
    spec = ipc.manifest.structs.get(type(value).__name__) if isinstance(value, msgspec.Struct) else None
    if spec is not None:
        opaque = set(wrapper_fields(spec))
        for field in spec.fields:
            if field.name in opaque:
                setattr(value, field.name, ipc.adapter.opaque_value(spec.name, field.name))
            elif field.name == "routed_dp_rank":
                setattr(value, field.name, 0)
            else:
                _sendable(ipc, getattr(value, field.name))
    elif isinstance(value, list):
        if value and all(isinstance(item, msgspec.Struct) for item in value):
            while len(value) < BATCH_ITEMS:
                item = copy.deepcopy(value[0])
                if isinstance(getattr(item, "rid", None), str):
                    item.rid = f"{item.rid}-{len(value)}"
                value.append(item)
        for item in value:
            _sendable(ipc, item)
    return value


def _comparable(ipc, value: Any) -> Any:
    """A shallow copy of value in which every PickleWrapper-typed field holds the state of its
    object (conformance/suite/payloads.py: attribute by attribute, as a receiver reads it), so
    ``differences`` compares the implementation's own objects field by field. (A deep copy would
    not do: it runs the object's own pickling, whose losses are what is checked.)"""
    spec = ipc.manifest.structs.get(type(value).__name__) if isinstance(value, msgspec.Struct) else None
    if spec is not None:
        opaque = set(wrapper_fields(spec))
        return msgspec.structs.replace(value, **{
            f.name: state_view(getattr(value, f.name)) if f.name in opaque else _comparable(ipc, getattr(value, f.name))
            for f in spec.fields})
    if type(value) is list:
        return [_comparable(ipc, item) for item in value]
    return value


def _handed_on(ipc, path: str, got: Any, step: str) -> dict[str, Any]:
    """What each receiving process handed downstream, by process: the scheduler path answers a
    list, one value per rank that received the message (all of them after a broadcast)."""
    if path != "scheduler":
        return {path: got}
    if not (isinstance(got, list) and got):
        fail(f"the scheduler receive path must answer a non-empty list (one value per rank that received "
             f"the message), not {type(got).__name__}", "R-DP-1", step=step, value=got, ipc=ipc)
    return {f"scheduler_{rank}": value for rank, value in enumerate(got)}


def _through(ipc, path: str, struct: str, transport: str) -> None:
    through = _path(ipc, path)
    sent = _sendable(ipc, ipc.instance(struct, "typical"))
    expected = _comparable(ipc, _sendable(ipc, ipc.instance(struct, "typical")))  # the same, built again
    handed = _handed_on(ipc, path, through(sent, transport),
                        f"the implementation's send, then the {path} receive path over {transport}")
    for process, got in handed.items():
        step = (f"the implementation's send, then the {process} receive path (its own socket receive, decode "
                f"and unwrap) over {transport}")
        left = find_wrappers(got)
        if left:
            raise_failure(Failure(f"the {process} receive path handed {struct} downstream with a PickleWrapper at "
                                  f"{', '.join(left)} ({transport}): it did not unwrap (SPEC R-PW-3)", "R-PW-3", step,
                                  value=expected), ipc)
        diffs = differences(expected, _comparable(ipc, got))
        if diffs:
            raise_failure(Failure(f"{struct} changed on the {process} receive path ({transport})", "R-PW-1, R-DP-2",
                                  step, diffs, value=expected), ipc)
    changed = differences(expected, _comparable(ipc, sent))
    if changed:
        fail(f"sending {struct} modified the sender's object (SPEC R-PW-1): {changed[:3]}", "R-PW-1",
             step=f"the implementation's send over {transport} (the sender's object, after it was sent)",
             differences=changed, value=expected, ipc=ipc)


@check("ReceivePath", per=("struct", "transport"), name="Controller", cases={"struct": _known(CARRIED)})
def test_receive_path_controller(ipc, struct, transport):
    """tokenizer manager -> data-parallel controller: what its receive path hands to dispatch
    (which must then reach the scheduler rank(s), not answer with an error)."""
    _through(ipc, "controller", struct, transport)


@check("ReceivePath", per=("struct", "transport"), name="Scheduler", cases={"struct": _known(CARRIED)})
def test_receive_path_scheduler(ipc, struct, transport):
    """controller broadcast -> every scheduler rank: what each rank's receive path hands on."""
    _through(ipc, "scheduler", struct, transport)


@check("ReceivePath", per=("struct", "transport"), name="Detokenizer",
       cases={"struct": _known(TO_DETOKENIZER)})
def test_receive_path_detokenizer(ipc, struct, transport):
    """scheduler -> detokenizer: what its receive path hands to detokenization."""
    _through(ipc, "detokenizer", struct, transport)


@check("ReceivePath", per=("struct", "transport"), name="TokenizerManager",
       cases={"struct": _known(TO_TOKENIZER_MANAGER)})
def test_receive_path_tokenizer_manager(ipc, struct, transport):
    """detokenizer (and any engine process reporting an error) -> tokenizer manager: what its
    receive path hands to the waiting requests."""
    _through(ipc, "tokenizer_manager", struct, transport)


#: Requests the controller routes to one rank (they name routed_dp_rank).
ROUTED = ("TokenizedGenerateReqInput", "TokenizedEmbeddingReqInput")
NO_SUCH_RANK = 2**31 - 1  # a rank no deployment has


@check("ReceivePath", per=("struct", "transport"), name="Unroutable", cases={"struct": _known(ROUTED)})
def test_unroutable_request_is_aborted(ipc, struct, transport):
    """tokenizer manager -> controller, naming a rank the engine does not have: the controller
    answers with an AbortReq carrying a finished_reason, never drops it silently (SPEC R-DP-5)."""
    unroutable = _path(ipc, "unroutable")
    sent = _sendable(ipc, ipc.instance(struct, "typical"))
    sent.routed_dp_rank = NO_SUCH_RANK
    answer = unroutable(sent, transport)
    step = (f"the implementation's send of {struct} naming routed_dp_rank {NO_SUCH_RANK}, then the controller's "
            f"receive path and dispatch, over {transport}")
    if type(answer).__name__ != "AbortReq":
        fail(f"the controller answered {struct} naming routed_dp_rank {NO_SUCH_RANK} with {type(answer).__name__}, "
             f"not an AbortReq (SPEC R-DP-5)", "R-DP-5", step=step, value=answer, ipc=ipc)
    if not (answer.rid == sent.rid and answer.finished_reason):
        fail(f"the controller's AbortReq for {struct} (rid {sent.rid!r}) has rid {answer.rid!r} and finished_reason "
             f"{answer.finished_reason!r}: it must name the request and carry a finished_reason (SPEC R-DP-5)",
             "R-DP-5", step=step, value=answer, ipc=ipc)
