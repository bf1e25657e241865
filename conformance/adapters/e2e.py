"""What an adapter's run_e2e() returns: one run of the implementation's server through the fixed
scenario, as facts (responses, raw tapped frames, spans, shutdown). The E2E checks judge them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TappedMessage:
    """One IPC message a process received, as its tap recorded it."""

    process: str  #: the receiving process: tokenizer_manager, controller, scheduler_<rank>, detokenizer
    link: str  #: receiver<-sender, e.g. "controller<-tokenizer_manager"
    transport: str
    frames: list[bytes]  #: as they came off the socket
    delivered_type: str  #: the class name of what the receive path handed downstream
    leftover_wrappers: list[str]  #: where that handed-on value still held a PickleWrapper (the tap looked)


@dataclass
class E2ERun:
    transport: str
    dp_size: int
    info: dict[str, Any] = field(default_factory=dict)  #: the server's self-description; at least "transport"
    responses: dict[str, Any] = field(default_factory=dict)  #: the scenario's responses, as JSON values
    #: the responses less what may differ between two runs (ids, timings): equal across transports
    comparable_responses: dict[str, Any] = field(default_factory=dict)
    scenario_error: str = ""  #: why the scenario did not finish ("" when it did)
    records: list[TappedMessage] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)  #: trace_id, span_id, parent_id, name, process
    #: exit_code, hung, orphans (pid -> name), ipc_dir_left, after the server was told to stop
    shutdown: dict[str, Any] = field(default_factory=dict)
    #: what the scenario sent: request kind ("encode", "generate", "stream") -> its trace id
    trace_ids: dict[str, str] = field(default_factory=dict)
    parent_span: str = ""  #: the client span every trace hangs under
    #: the span names each kind's trace must show in order (the engine's names for its steps)
    trace_chains: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: link -> the structs the scenario sends over it (at least)
    link_messages: dict[str, set[str]] = field(default_factory=dict)
