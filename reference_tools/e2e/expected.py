"""What every run of the E2E scenario must show: the structs each IPC link carries and the span
chain of one request's trace. The reference adapter hands them to the suite (`run_e2e`) and the
engine's tests judge runs by them (checks.py)."""

from __future__ import annotations

__all__ = ["CHAIN", "EMBED_CHAIN", "link_messages"]


def link_messages(dp_size: int) -> dict[str, set[str]]:
    """The structs the scenario must send over each link (at least)."""
    control = {"AbortReq", "FlushCacheReqInput", "UpdateWeightsFromTensorReqInput"}
    out = {
        "controller<-tokenizer_manager": {"TokenizedGenerateReqInput", "TokenizedEmbeddingReqInput", *control},
        "detokenizer<-schedulers": {"BatchTokenIDOutput", "BatchEmbeddingOutput"},
        "tokenizer_manager<-engine": {"BatchStrOutput", "BatchEmbeddingOutput", "FlushCacheReqOutput",
                                      "UpdateWeightsFromTensorReqOutput"},
    }
    for rank in range(dp_size):
        out[f"scheduler_{rank}<-controller"] = {"TokenizedGenerateReqInput", *control}
    return out


#: The span names of one request's trace, in order: generate requests, then embeddings.
CHAIN = ("tokenizer_manager.request", "controller.dispatch", "scheduler.request", "detokenizer.decode",
         "tokenizer_manager.response")
EMBED_CHAIN = ("tokenizer_manager.request", "controller.dispatch", "scheduler.embed", "detokenizer.pass_embedding",
               "tokenizer_manager.response")
