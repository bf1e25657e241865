"""The testee protocol: any-language implementations under test as subprocesses.

spec/testee.md is the normative description. `frames` holds every frame kind as a struct
(the published JSON Schema is generated from them), `protocol` the framing and the checks of
the testee's answers through those structs, `adapter` the SubprocessAdapter behind `--impl cmd:<command>`, and
`smoke` the quick check `ipc-conformance smoke` runs before a full run, `replay` the
reproducer a failure message names (`ipc-conformance testee replay FILE --impl cmd:...`).
"""

from conformance.testee.adapter import (
           SubprocessAdapter,
           TesteeAnswerError,
           TesteeError,
           TesteeRuntimeError,
           TesteeSkipped,
           command_argv,
)

__all__ = ["SubprocessAdapter", "TesteeAnswerError", "TesteeError", "TesteeRuntimeError", "TesteeSkipped",
           "command_argv"]
