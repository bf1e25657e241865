"""Run-wide state of a conformance run: the implementation, its manifest, the cases."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, Optional, Union

from conformance.adapters import Adapter, load_adapter
from conformance.releases import Choice
from conformance.schema.manifest import Manifest, load_manifest
from conformance.schema.values import VARIANTS, ValueBuilder
from conformance.transport import TRANSPORTS, Transport


@dataclass
class Session:
    impl: str = "reference"
    transport: Union[Transport, Literal["both"]] = "both"
    manifest_id: Optional[str] = None
    profile: str = "dev"
    peer: Optional[str] = None  # a bundled release the Peer checks exchange messages with

    @cached_property
    def adapter(self) -> Adapter:
        return load_adapter(self.impl)

    @cached_property
    def choice(self) -> Optional[Choice]:
        """What the installed version runs against when no --manifest is given (conformance.releases)."""
        from conformance import expectations
        from conformance.releases import choose
        from conformance.schema.manifest import bundled_manifests

        claimed = None if self.manifest_id else self.adapter.manifest_id()
        return choose(claimed, bundled_manifests(), expectations.bundled_lists()) if claimed else None

    @cached_property
    def manifest(self) -> Manifest:
        if self.manifest_id or self.choice is None:
            return load_manifest(self.manifest_id or "sglang-0.5.23")
        if self.choice.manifest is None:  # a development install: its own catalogue, by its own id
            try:
                return self.live_manifest
            except NotImplementedError:
                return load_manifest(self.adapter.manifest_id() or "")  # the error that names the unknown id
        return load_manifest(self.choice.manifest)

    @cached_property
    def transports(self) -> tuple[Transport, ...]:
        chosen = TRANSPORTS if self.transport == "both" else (self.transport,)
        return tuple(t for t in chosen if t in self.adapter.transports)

    @cached_property
    def classes(self) -> Any:
        return self.adapter.classes()

    def instance(self, struct: str, variant: str) -> Any:
        """A fresh canonical instance (checks may mutate what they get)."""
        return ValueBuilder(self.manifest, self.classes, variant).instance(struct)

    @property
    def message_names(self) -> list[str]:
        return [s.name for s in self.manifest.messages]

    def manifest_message_names(self) -> list[str]:
        return self.message_names

    @cached_property
    def live_manifest(self) -> Manifest:
        from conformance.schema.manifest.identity import own_identity

        return own_identity(self.adapter.live_manifest())

    @property
    def all_message_names(self) -> list[str]:
        """Messages of the manifest and of the implementation: generated checks cover both."""
        live = [s.name for s in self.live_manifest.messages]
        return sorted(set(self.message_names) | set(live))

    @property
    def strategies(self) -> Any:
        """Strategies from the implementation's own field types, drawing its own classes.
        A fresh builder per check, so what one check draws never depends on the checks
        that ran before it (the selection must not change verdicts)."""
        return self.strategies_without(())

    def strategies_without(self, triggers: Any) -> Any:
        """`strategies`, drawing none of the values of `triggers` (known defects' triggers,
        conformance/expectations)."""
        from conformance.strategies import StrategyBuilder

        # devices=None: the local ones, asked (importing torch) only where a tensor is drawn
        return StrategyBuilder(self.live_manifest, self.classes, devices=None, exclude=triggers)

    def pickle_residue(self) -> dict[str, Any]:
        """Fields that still travel as PickleWrapper or Any, and (when the implementation
        counts them) the object types that went through pickle during this run."""
        from conformance.schema.manifest import parse

        fields = []
        for spec in self.live_manifest.structs.values():
            for f in spec.fields:
                kinds = {(n.kind, n.name) for n in parse(f.type).walk()}
                if ("Ref", "PickleWrapper") in kinds or any(k == "Any" for k, _ in kinds):
                    fields.append((f"{spec.name}.{f.name}", f.type))
        counter = getattr(self.adapter, "pickle_residue", None)
        return {"fields": fields, "wrapped": dict(counter()) if callable(counter) else {}}

    @property
    def hypothesis_settings(self) -> Any:
        from conformance.profiles import settings_for

        return settings_for(self.profile)

    variants = VARIANTS
