"""A mutant behind the testee protocol: the reference testee whose codec is a mutant's.

    ipc-conformance run --impl "cmd:python -m reference_tools.proof.mutant_testee Float32Narrowing"
    ipc-conformance run --impl "cmd:python -m reference_tools.proof.mutant_testee tests.defective_adapters:NoBase64"

The requirement table proves each clause on two paths: in-process (the mutant as an adapter)
and through the testee protocol, where the same bug lives in a separate process and the runner
sees only its answers. Every op of the reference testee (reference_impl/testee.py) goes through
the mutant's adapter methods instead of the codec (a mutant of reference_tools/proof/mutants.py by
name, or any reference adapter with a planted bug as ``module:Class``): ``decode`` and ``encode`` (both steps of a
decode request), ``receive`` (the untrusted receive path), ``unwrap`` and ``http``. Options
after the mutant's name are the reference testee's (``--ops``, ``--transports``, ``--spec``).
"""

from __future__ import annotations

import importlib
import pickle
import sys
from typing import Any, Optional

from reference_impl import testee
from reference_impl.errors import WireError
from reference_tools.adapter import ReferenceAdapter
from reference_tools.proof import mutants


class MutantTestee(testee.Testee):
    """The reference testee with every codec call going through ``mutant``."""

    mutant: ReferenceAdapter

    def started(self) -> dict:
        hello = super().started()
        hello["implementation"]["mutant"] = type(self.mutant).__name__
        return hello

    def _decode(self, data: bytes, transport: str, **options: Any) -> Any:
        try:
            if options.get("unwrap_wrappers") and options.get("allow_pickle") is False:
                return self.mutant.receive(data, transport)
            return self.mutant.decode(data, transport)
        except WireError as exc:
            raise testee.ParseError(str(exc)) from None
        except (pickle.UnpicklingError, EOFError) as exc:
            raise testee.ParseError(f"{type(exc).__name__}: {exc}") from None

    def _encode(self, obj: Any, transport: str) -> bytes:
        try:
            return self.mutant.encode(obj, transport)
        except WireError as exc:
            raise testee.SerializeError(str(exc)) from None

    def op_unwrap(self, request: dict) -> bytes:
        obj = self._decode(request["payload"], self._transport(request))
        try:
            obj = self.mutant.unwrap(obj)
        except WireError as exc:
            raise testee.ParseError(str(exc)) from None
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)

    def op_http(self, request: dict) -> bytes:
        from pydantic import ValidationError

        if request.get("struct", "") not in self.classes:
            raise testee.ParseError(f"unknown struct {request.get('struct')!r}")
        try:
            obj = self.mutant.validate_http(request["struct"], request["json"])
        except ValidationError as exc:
            raise testee.ParseError(str(exc)) from None
        return self._encode(obj, "msgpack")


def _adapter_class(name: str) -> Optional[type]:
    if ":" in name:
        module, _, attr = name.partition(":")
        found = getattr(importlib.import_module(module), attr, None)
    else:
        found = {cls.__name__: cls for cls in mutants.MUTANTS}.get(name)
    return found if isinstance(found, type) and issubclass(found, ReferenceAdapter) else None


def main(argv: Optional[list[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    adapter = _adapter_class(args[0]) if args else None
    if adapter is None:
        print("usage: python -m reference_tools.proof.mutant_testee MUTANT|module:Class [testee options]; mutants: "
              f"{', '.join(sorted(cls.__name__ for cls in mutants.MUTANTS))}", file=sys.stderr)
        return 2
    chosen = type(f"{adapter.__name__}Testee", (MutantTestee,), {"mutant": adapter()})
    testee.Testee = chosen  # testee.main builds its Testee by this name: the mutant's, for this process
    return testee.main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
