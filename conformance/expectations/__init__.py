"""Per-implementation expected-failure lists (conformance/expectations/<impl>.txt).

One check per line: ``<check id> [| <message prefix>] [# reason]``. A listed check
that fails (with that message prefix, when given) is an expected failure; a listed
check that passes fails the run, and so does any unlisted failure, so a list can
never go stale. ``ipc-conformance run --fix-expectations`` rewrites the list.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Expectation:
    check_id: str
    prefix: str = ""
    reason: str = ""

    def matches(self, message: str) -> bool:
        return message.startswith(self.prefix)

    def line(self) -> str:
        text = self.check_id + (f" | {self.prefix}" if self.prefix else "")
        return text + (f"  # {self.reason}" if self.reason else "")


def parse(text: str) -> dict[str, Expectation]:
    out: dict[str, Expectation] = {}
    for raw in text.splitlines():
        body, _, reason = raw.partition("#")
        if not body.strip():
            continue
        check_id, _, prefix = body.partition("|")
        out[check_id.strip()] = Expectation(check_id.strip(), prefix.strip(), reason.strip())
    return out


def path_for(labels: Iterable[str]) -> Optional[Path]:
    """The bundled list for the first label that has one (e.g. 'sglang-0.5.23', then 'sglang')."""
    for label in labels:
        candidate = HERE / f"{label}.txt"
        if candidate.exists():
            return candidate
    return None


def load(path: Optional[Path]) -> dict[str, Expectation]:
    return parse(path.read_text()) if path and path.exists() else {}


def write(path: Path, failures: dict[str, str], previous: dict[str, Expectation], header: str) -> None:
    """Rewrite the list from this run's failures, keeping known reasons and prefixes."""
    lines = [f"# {header}", "# <check id> [| <message prefix>] [# reason]"]
    for check_id in sorted(failures):
        old = previous.get(check_id)
        if old is not None and old.matches(failures[check_id]):
            lines.append(old.line())
        else:
            first = (failures[check_id].splitlines() or [""])[0]
            lines.append(Expectation(check_id, "", f"TODO reason; failed with: {first[:80]}").line())
    path.write_text("\n".join(lines) + "\n")
