"""Per-implementation expected-failure lists (conformance/expectations/<impl>.txt).

Two kinds of line (``#`` starts a comment; blank lines are ignored):

``<check id> [| <message prefix>] [# reason]``
    One check. It is an expected failure when it fails with a message starting with the
    prefix (any message when there is none).

``cause: <cause> | <message> | <check-id glob> [<check-id glob> ...] [| trigger: <trigger> ...]``
    One known defect, listed once by its cause, for every check it breaks. A check whose
    id matches a glob (``*`` any run of characters, dots too; ``?`` one; ``[..]`` a set) is
    an expected failure when the FIRST line of its failure message contains ``<message>``
    (``re:<regex>``: the regex is searched for in that line instead). A ``#`` on a cause
    line is part of it. A check may be matched by several causes; any of them explains it.
    The optional last part names the values that set the defect off (``TRIGGERS``): a
    Generated check the cause covers never draws them, so hypothesis goes on searching for
    other defects instead of shrinking to this one's example (the check then passes, which
    is only noted). Lines without it keep their meaning.

A failure is judged difference by difference: when a check's failure lists several differing
paths (the suite's failure messages carry them, conformance/suite/failure.py), it is an
expected failure only when EVERY difference is explained by the check's own line or a cause
(each difference judged as the first line it would have had alone); an unexplained one fails
the run and is named. A known defect never hides a new one in the same check.

A listed check (by id or by a cause's glob) that passes fails the run, so a list can never
go stale, except a Generated one: a search that met no counterexample is only noted. A
listed check that fails with a message the list does not expect is a failure, reported
with its actual message. Any unlisted failure fails the run. ``ipc-conformance run
--fix-expectations`` keeps the cause lines as written and the per-check lines that still match, and
writes the new failures: one ``cause:`` line per group of failures that share a first line (their
subjects aside), with the trigger they all show, and one line for any other.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

HERE = Path(__file__).resolve().parent
CAUSE = "cause:"
TRIGGER = "trigger:"

#: What a cause's ``trigger:`` may name (conformance/strategies.py draws none of them for the
#: Generated checks the cause covers). A name ending in ':' takes a glob after it.
TRIGGERS: dict[str, str] = {
    "ndarray-0d": "a 0-d numpy array",
    "tensor-0d": "a 0-d tensor",
    "ndarray-dtype:": "numpy arrays of the dtypes the glob matches (numpy's names: float32, bool, ...)",
    "tensor-dtype:": "tensors of the dtypes the glob matches (torch's names: float8_e4m3fn, bfloat16, ...)",
    "float-nan": "NaN floats (lists, maps, arrays and Any values too)",
    "float-inf": "infinite floats (lists, maps, arrays and Any values too)",
}


def known_trigger(trigger: str) -> bool:
    if trigger in TRIGGERS and not trigger.endswith(":"):
        return True
    return any(t.endswith(":") and trigger.startswith(t) and len(trigger) > len(t) for t in TRIGGERS)


@dataclass(frozen=True)
class Expectation:
    """One check's line: its failure message starts with `prefix`."""

    check_id: str
    prefix: str = ""
    reason: str = ""

    def matches(self, message: str) -> bool:
        return message.startswith(self.prefix)

    def describe(self) -> str:
        return f"a message starting {self.prefix!r}" if self.prefix else "any message"

    def line(self) -> str:
        text = self.check_id + (f" | {self.prefix}" if self.prefix else "")
        return text + (f"  # {self.reason}" if self.reason else "")


@dataclass(frozen=True)
class Cause:
    """One known defect: every check matching `globs` whose failure's first line has `message`."""

    cause: str
    message: str
    globs: tuple[str, ...]
    text: str = ""  # the line as written, kept by --fix-expectations
    triggers: tuple[str, ...] = ()  # values a Generated check it covers no longer draws

    def covers(self, check_id: str) -> bool:
        return any(fnmatch.fnmatchcase(check_id, g) for g in self.globs)

    def matches(self, message: str) -> bool:
        first = (message.splitlines() or [""])[0]
        if self.message.startswith("re:"):
            return re.search(self.message[3:], first) is not None
        return self.message in first

    def describe(self) -> str:
        how = f"matching /{self.message[3:]}/" if self.message.startswith("re:") else f"containing {self.message!r}"
        return f"cause {self.cause!r} (first line {how})"


@dataclass(frozen=True)
class Listing:
    """What the list says about one check: its own line and the causes that cover it."""

    check_id: str
    own: Optional[Expectation] = None
    causes: tuple[Cause, ...] = ()

    def explains(self, message: str) -> Optional[str]:
        """The reason when the list expects this failure message, else None."""
        if self.own is not None and self.own.matches(message):
            return self.own.reason or "listed in the expected-failure list"
        return next((c.cause for c in self.causes if c.matches(message)), None)

    def explains_each(self, lines: Iterable[str]) -> tuple[Optional[str], list[str]]:
        """Judge a failure difference by difference (`lines`: the first line each difference
        would have had alone): (the reasons joined, when every one is explained, else None;
        the lines nothing explains)."""
        reasons: list[str] = []
        unexplained: list[str] = []
        for line in lines:
            reason = self.explains(line)
            if reason is None:
                unexplained.append(line)
            elif reason not in reasons:
                reasons.append(reason)
        return ("; ".join(reasons) if reasons and not unexplained else None), unexplained

    @property
    def triggers(self) -> tuple[str, ...]:
        """The triggers of every cause covering this check."""
        return tuple(dict.fromkeys(t for c in self.causes for t in c.triggers))

    def describe(self) -> str:
        parts = ([self.own.describe()] if self.own else []) + [c.describe() for c in self.causes]
        return " or ".join(parts)


@dataclass
class Expectations:
    checks: dict[str, Expectation] = field(default_factory=dict)
    causes: list[Cause] = field(default_factory=list)

    def get(self, check_id: str) -> Optional[Listing]:
        own = self.checks.get(check_id)
        causes = tuple(c for c in self.causes if c.covers(check_id))
        return Listing(check_id, own, causes) if own is not None or causes else None

    def __len__(self) -> int:
        return len(self.checks) + len(self.causes)


class ExpectationsError(ValueError):
    pass


def _cause(raw: str, where: str) -> Cause:
    parts = [p.strip() for p in raw.strip()[len(CAUSE):].split("|")]
    triggers: tuple[str, ...] = ()
    if len(parts) > 3 and parts[-1].startswith(TRIGGER):
        triggers = tuple(parts.pop()[len(TRIGGER):].split())
        unknown = [t for t in triggers if not known_trigger(t)]
        if not triggers or unknown:
            raise ExpectationsError(f"{where}: unknown trigger(s) {unknown or '(none given)'}; a trigger is one of "
                                    f"{', '.join(t + ('<glob>' if t.endswith(':') else '') for t in TRIGGERS)}")
    if len(parts) < 3 or not parts[0] or not parts[1] or not parts[-1].split():
        raise ExpectationsError(f"{where}: a cause line reads 'cause: <cause> | <message> | <check-id glob> ... "
                                f"[| trigger: <trigger> ...]', got {raw.strip()!r}")
    message = "|".join(parts[1:-1])  # a '|' inside the message (e.g. a regex alternation)
    if message.startswith("re:"):
        try:
            re.compile(message[3:])
        except re.error as exc:
            raise ExpectationsError(f"{where}: bad regex {message[3:]!r}: {exc}") from None
    return Cause(parts[0], message, tuple(parts[-1].split()), raw.strip(), triggers)


def parse(text: str, source: str = "<expectations>") -> Expectations:
    out = Expectations()
    for number, raw in enumerate(text.splitlines(), 1):
        if raw.strip().startswith(CAUSE):
            out.causes.append(_cause(raw, f"{source}:{number}"))
            continue
        body, _, reason = raw.partition("#")
        if not body.strip():
            continue
        check_id, _, prefix = body.partition("|")
        out.checks[check_id.strip()] = Expectation(check_id.strip(), prefix.strip(), reason.strip())
    return out


def path_for(labels: Iterable[str]) -> Optional[Path]:
    """The bundled list for the first label that has one (e.g. 'sglang-0.5.23', then 'sglang')."""
    for label in labels:
        candidate = HERE / f"{label}.txt"
        if candidate.exists():
            return candidate
    return None


def bundled_lists() -> list[str]:
    """The labels of the bundled lists (e.g. 'sglang-0.5.23')."""
    return sorted(p.stem for p in HERE.glob("*.txt"))


def resolve(spec: str, *, new_ok: bool = False) -> Path:
    """An --expectations value: a file, or the label of a bundled list (sglang-0.5.23). With
    new_ok (--fix-expectations writes it), a path that does not exist yet is fine."""
    from conformance.errors import UsageError

    path = Path(spec)
    if path.exists() and not path.is_dir():  # a file, or /dev/null: no list
        return path
    if (HERE / f"{spec}.txt").is_file() and "/" not in spec:
        return HERE / f"{spec}.txt"
    if new_ok:
        return path
    raise UsageError(f"no expected-failure list {spec!r}: give a file or a bundled list "
                     f"({', '.join(bundled_lists()) or 'none'}); --fix-expectations writes a new one")


def load(path: Optional[Path]) -> Expectations:
    return parse(path.read_text(), str(path)) if path and path.exists() else Expectations()


#: (trigger, what in a first line shows it): a cause written by --fix-expectations names the trigger
#: every failure of its group shows, so the Generated checks it covers stop drawing those values
_SHOWN_TRIGGERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("float-nan", re.compile(r"\bnan\b", re.IGNORECASE)),
    ("float-inf", re.compile(r"\binf\b", re.IGNORECASE)),
    ("ndarray-0d", re.compile(r"ndarray shape \(\)")),
    ("tensor-0d", re.compile(r"tensor shape torch\.Size\(\[\]\)")),
)
_DTYPE = re.compile(r"\b(float8_\w+|bfloat16|float16|complex\d+|bits\w+|u?int[1-7])\b")
#: a group's message shorter than this says too little to tell its defect from others
MIN_CAUSE_TEXT = 12


@dataclass
class Rewrite:
    """What --fix-expectations wrote: cause lines kept and added, per-check lines kept and added."""

    path: Path
    causes_kept: int = 0
    causes_added: int = 0
    checks_kept: int = 0
    checks_added: int = 0
    dropped: list[str] = field(default_factory=list)  # listed checks that no longer failed

    def line(self) -> str:
        return (f"expectations: rewrote {self.path}: {self.causes_kept + self.causes_added} cause lines "
                f"({self.causes_added} new), {self.checks_kept + self.checks_added} check lines "
                f"({self.checks_added} new); {len(self.dropped)} listed checks no longer fail and left the list")


def _first(message: str) -> str:
    """A failure's first line as a list matches it: without the count of further differences,
    which a run of the same defect may change."""
    return re.sub(r" \(\+\d+ more\)$", "", (message.splitlines() or [""])[0].strip())


def _common_text(lines: list[str]) -> str:
    """The longest text every line contains (what a cause's message matches)."""
    common = lines[0]
    for other in lines[1:]:
        best = ""
        for i in range(len(common)):
            for j in range(len(common), i + len(best), -1):
                if common[i:j] in other:
                    best = common[i:j]
                    break
        common = best
    return common.strip()


def _escape(check_id: str) -> str:
    """A check id as a glob that matches it alone."""
    return re.sub(r"([*?\[])", r"[\1]", check_id)


def _trigger(firsts: list[str], check_ids: list[str]) -> str:
    """The trigger every failure of a group shows, for a group with a Generated check ('' else)."""
    if not any(".Generated." in c for c in check_ids):
        return ""
    for name, shows in _SHOWN_TRIGGERS:
        if all(shows.search(line) for line in firsts):
            return name
    dtypes = {m.group(1) for line in firsts for m in [_DTYPE.search(line)] if m}
    if len(dtypes) == 1 and all(_DTYPE.search(line) for line in firsts) and all("tensor" in line for line in firsts):
        return f"tensor-dtype:{dtypes.pop()}"
    return ""


def write(path: Path, failures: dict[str, str], previous: Expectations, header: str,
          subjects: Optional[dict[str, str]] = None) -> Rewrite:
    """Rewrite the list from this run's failures: cause lines kept as written, per-check lines
    kept where they still match; the new failures that share a first line (their subjects aside,
    `subjects`: check id -> its subject) grouped into one `cause:` line naming each check, with the
    trigger they all show where one applies; any other new failure one line with its first line."""
    lines = [f"# {header}", "# <check id> [| <message prefix>] [# reason]",
             "# cause: <cause> | <message in the first line, or re:<regex>> | <check-id glob> ... "
             "[| trigger: <trigger> ...]"]
    done = Rewrite(path, causes_kept=len(previous.causes))
    lines += [c.text for c in previous.causes]
    new: dict[str, list[str]] = {}
    kept: list[str] = []
    for check_id in sorted(failures):
        if any(c.covers(check_id) and c.matches(failures[check_id]) for c in previous.causes):
            continue
        old = previous.checks.get(check_id)
        if old is not None and old.matches(failures[check_id]):
            kept.append(old.line())
            continue
        first = _first(failures[check_id])
        subject = (subjects or {}).get(check_id, "")
        key = re.sub(rf"(?<![\w.]){re.escape(subject)}(?![\w])", "<subject>", first) if subject else first
        new.setdefault(key, []).append(check_id)
    done.checks_kept = len(kept)
    added: list[str] = []
    for check_ids in new.values():
        firsts = [_first(failures[c]) for c in check_ids]
        message = _common_text(firsts).replace("|", " ").split("#")[0].strip() if len(check_ids) > 1 else ""
        if len(check_ids) > 1 and len(message) >= MIN_CAUSE_TEXT:
            trigger = _trigger(firsts, check_ids)
            added.append(f"cause: TODO name the defect ({len(check_ids)} checks fail with it) | {message} | "
                         + " ".join(_escape(c) for c in check_ids) + (f" | trigger: {trigger}" if trigger else ""))
            done.causes_added += 1
            continue
        for check_id, first in zip(check_ids, firsts):
            # A Generated check's first line depends on the value drawn: any message is listed.
            prefix = "" if ".Generated." in check_id else first.split("#")[0].strip()
            added.append(Expectation(check_id, prefix, "TODO reason").line())
            done.checks_added += 1
    lines += sorted(kept + [line for line in added if not line.startswith(CAUSE)])
    lines += sorted(line for line in added if line.startswith(CAUSE))
    done.dropped = sorted(c for c in previous.checks if c not in failures)
    path.write_text("\n".join(lines) + "\n")
    return done
