"""The reference serving engine: HTTP -> tokenizer manager -> data-parallel controller ->
scheduler(s) -> detokenizer -> back, every link a ZeroMQ socket carrying reference structs.

See DESIGN.md in this folder for the message flow and the file per responsibility.
Nothing heavy is imported here; start a server with ``launch_server(EngineConfig(...))``
or ``python -m reference_impl.server``.
"""

from .config import EngineConfig

__all__ = ["EngineConfig", "launch_server"]


def launch_server(config: EngineConfig) -> None:
    from .launcher import launch_server as _launch

    _launch(config)
