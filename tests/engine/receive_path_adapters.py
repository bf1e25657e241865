"""The reference with a receive path that skips the PickleWrapper unwrap (EngineConfig.debug_skip_unwrap),
for `ipc-conformance run --impl receive_path_adapters:<name>` (tests/engine on PYTHONPATH)."""

from reference_tools.adapter import ReferenceAdapter


def ControllerSkipsUnwrap() -> ReferenceAdapter:  # noqa: N802 - named like the other defect adapters
    return ReferenceAdapter(engine_debug_skip_unwrap=("controller",))


def SchedulerSkipsUnwrap() -> ReferenceAdapter:  # noqa: N802 - named like the adapter classes it stands for
    return ReferenceAdapter(engine_debug_skip_unwrap=("scheduler_1",))


def DetokenizerSkipsUnwrap() -> ReferenceAdapter:  # noqa: N802 - named like the adapter classes it stands for
    return ReferenceAdapter(engine_debug_skip_unwrap=("detokenizer",))


def TokenizerManagerSkipsUnwrap() -> ReferenceAdapter:  # noqa: N802 - named like the adapter classes it stands for
    return ReferenceAdapter(engine_debug_skip_unwrap=("tokenizer_manager",))


class ControllerDropsUnroutable(ReferenceAdapter):
    """R-DP-5: the controller logs a request it cannot route and drops it (no AbortReq)."""

    def _rig(self, transport):
        rig = super()._rig(transport)
        controller = rig.controller

        def handle_dropping_errors(obj):
            try:
                controller.dispatch(obj)
            except Exception:  # noqa: BLE001 - the planted defect: an unroutable request vanishes
                pass

        controller.handle = handle_dropping_errors
        return rig
