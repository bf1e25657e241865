"""The conformance run behind the plugin's hooks: its options, the session the checks use,
the expected-failure list, one record per check, and the files written at the end.

It lives in pytest's config.stash and is built only when a run is asked for. Under
pytest-xdist each worker has its own, judging the checks it runs; the controller's
collects every record from the reports the workers send, merges what each worker saw
of the implementation (worker_output/merge_worker) and writes the files once.
"""

from __future__ import annotations

import datetime
import re
from collections import Counter
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import msgspec

from conformance.errors import UsageError
from conformance.plugin import options, verdicts
from conformance.plugin.checks import check_id_of
from conformance.records import CheckIdentity, CheckRecord, Note, Outcome, encode_results

if TYPE_CHECKING:
    import pytest

    from conformance.expectations import Expectations
    from conformance.session import Session

COLLECTION_CHECK = "Required.Harness.Collection.Collects"


def _quote(word: str) -> str:
    """A shell word, quoted only when it needs it."""
    import shlex

    return word if re.fullmatch(r"[A-Za-z0-9_.:/=@+-]+", word) else shlex.quote(word)


class ConformanceRun:
    def __init__(self, values: dict[str, Any]) -> None:
        self.options = values
        self.records: list[CheckRecord] = []
        self._workers: list[dict[str, Any]] = []  # what each pytest-xdist worker reported at its end
        self.versions_shown = False  # the header named the spec versions (serial runs, at collection)
        self.usage_error = ""  # the user's mistake the run stopped on, before any check
        self.rewrite_line = ""  # what --fix-expectations wrote

    @property
    def via_cli(self) -> bool:
        """Started by `ipc-conformance run` (it prints the summary itself)."""
        return bool(self.options["summary"] == "caller")

    def flag_for(self, name: str) -> str:
        """The flag its user typed: --strict for `ipc-conformance run`, --ipc-strict under pytest."""
        option = options.BY_DEST[name.replace("-", "_")]
        return option.cli_flag if self.via_cli else option.pytest_flag

    def replay_command(self, check_id: str) -> str:
        """The command that runs check `check_id` again as this run did (`ipc-conformance run`,
        whichever way this run was started: it is what a third party types)."""
        words = ["ipc-conformance", "run", "--impl", _quote(str(self.options["impl"]))]
        for dest in ("manifest", "expectations", "peer", "hypothesis_profile"):
            if self.options[dest]:
                words += [options.BY_DEST[dest].cli_flag, _quote(str(self.options[dest]))]
        if self.options["transport"] != "both":
            words += ["--transport", self.options["transport"]]
        if ".E2E." in check_id:
            words.append("--e2e")
        return " ".join(words + ["--", "-k", f"'{check_id}'"])  # a check id holds no quote

    @cached_property
    def session(self) -> Session:
        from conformance import profiles
        from conformance.session import Session

        return Session(impl=self.options["impl"], transport=self.options["transport"],
                       manifest_id=self.options["manifest"],
                       profile=profiles.chosen(self.options["hypothesis_profile"]), peer=self.options["peer"])

    def preflight(self, *, start: bool) -> None:
        """Load what the run needs, or (start=False) only resolve the names, so that a mistake
        in them raises conformance.errors.UsageError before any check is collected."""
        from conformance.adapters import check_spec
        from conformance.schema.manifest import load_manifest

        for given in (self.options["manifest"], self.options["peer"]):
            if given:
                load_manifest(given)
        peer = self.options["peer"]
        if peer and load_manifest(peer).is_dataclass_catalogue:
            from conformance.schema.manifest import wire_manifests

            raise UsageError(f"--peer {peer}: a dataclass catalogue (pickle only) has no structs to exchange with; "
                             f"give a msgspec release ({', '.join(wire_manifests())})")
        self._check_outputs()
        if self.options["expectations"]:
            self.expectations_path  # noqa: B018 - a list that is neither a file nor bundled is a UsageError
        if start:
            self.session.manifest  # noqa: B018 - loads the adapter, then the manifest it claims
        else:
            check_spec(self.options["impl"])

    def _check_outputs(self) -> None:
        """--report and --report-dir are written after the checks: a folder that cannot hold them
        is said now, not after minutes of work."""
        if self.options["report"] and not Path(self.options["report"]).parent.is_dir():
            raise UsageError(f"--report {self.options['report']}: no folder {Path(self.options['report']).parent}")
        if self.options["report_dir"]:
            try:
                Path(self.options["report_dir"]).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"--report-dir {self.options['report_dir']}: cannot create it: "
                                 f"{(exc.strerror or str(exc)).lower()}") from None

    @cached_property
    def target_spec(self) -> str:
        """The spec version the implementation targets (Adapter.spec_version, a testee's 'spec')."""
        import pytest

        from conformance import spec_versions

        adapter = self.session.adapter
        try:
            return spec_versions.normalize(getattr(adapter, "spec_version", spec_versions.CURRENT))
        except ValueError as exc:
            self.usage_error = f"{adapter.label}: spec_version: {exc}"
            raise pytest.UsageError(self.usage_error) from None

    def versions_line(self, check_ids: list[str], target: Optional[str] = None) -> str:
        from conformance import spec_versions

        return spec_versions.header_line(check_ids, target or self.target_spec)

    @cached_property
    def expectations_path(self) -> Path:
        from conformance import expectations

        if self.options["expectations"]:
            return expectations.resolve(self.options["expectations"], new_ok=self.options["fix_expectations"])
        adapter = self.session.adapter
        choice = self.session.choice
        if choice is not None and choice.manifest is None:  # a development install: the nearest release's list
            labels = [adapter.label, *([choice.expectations] if choice.expectations else [])]
            return expectations.path_for(labels) or expectations.HERE / f"{adapter.label}.txt"
        return expectations.path_for([adapter.label, adapter.name]) or expectations.HERE / f"{adapter.label}.txt"

    @cached_property
    def changed_names(self) -> dict[str, list[str]]:
        """What the implementation's live catalogue changed against the run's manifest, by name."""
        from conformance.schema.check import changed_names

        try:
            return changed_names(self.session.live_manifest, self.session.manifest)
        except NotImplementedError:
            return {}

    def schema_hint(self, check_id: str) -> str:
        """For a failing check of a struct the live catalogue changed: the line that says so and
        the command that shows the change ('' otherwise)."""
        names = [n for n in check_id.split(".") if n in self.changed_names]
        if not names:
            return ""
        ipc = self.session
        return (f"  schema: {names[0]} differs between {ipc.manifest.id} and the implementation's live catalogue "
                f"({', '.join(self.changed_names[names[0]])}): ipc-conformance schema check --impl "
                f"{_quote(str(self.options['impl']))} --against {ipc.manifest.id}")

    def catalogue_lines(self) -> list[str]:
        """The header's lines on the catalogue: what a development install runs against, and how
        the implementation's live catalogue differs from the manifest the run checks it against."""
        from conformance.schema.check import live_differs_line

        ipc = self.session
        lines = [ipc.choice.note] if ipc.choice is not None and ipc.choice.note else []
        try:
            live = ipc.live_manifest
        except NotImplementedError:
            return lines
        against = ipc.manifest
        if ipc.choice is not None and ipc.choice.nearest and ipc.choice.manifest is None:
            from conformance.schema.manifest import load_manifest

            against = load_manifest(ipc.choice.nearest)  # a development install: how it differs from its release
        differs = live_differs_line(live, against, self.options["impl"])
        return lines + ([differs] if differs else [])

    @cached_property
    def expectations(self) -> Expectations:
        from conformance import expectations

        return expectations.load(self.expectations_path)

    def start_check(self) -> None:
        """Before each check: an adapter that keeps state for its failure messages (a testee's last
        requests) forgets the previous check's, so no message names another check's requests."""
        if "session" not in self.__dict__ or "adapter" not in self.session.__dict__:
            return  # nothing started yet: nothing to forget
        self.session.adapter.start_check()

    # -- records: one per check, from the reports (a worker's arrive at the controller) --
    def record(self, report: pytest.TestReport) -> None:
        check_id = check_id_of(report.nodeid)
        if not check_id:
            return
        message = verdicts.message_of(report)
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            xfailed = bool(getattr(report, "wasxfail", "")) and report.skipped
            outcome = Outcome.XFAILED if xfailed else verdicts.outcome_of(report) or Outcome(report.outcome)
            identity = verdicts.identity_of(report)
            if identity is not None and identity.id != check_id:  # the id pytest shows is the check's own
                identity = None
            self.records.append(CheckRecord(id=check_id, outcome=outcome,
                                            message=verdicts.prop(report, verdicts.MESSAGE) or message,
                                            reason=report.wasxfail if xfailed else "",
                                            note=verdicts.note_of(report), check=identity))
        elif report.when == "teardown" and report.failed:
            # An error after the check (e.g. stopping a crashed testee) fails pytest's run: the
            # check's record must say so too, or the summary and the exit status disagree.
            at = next((i for i in reversed(range(len(self.records))) if self.records[i].id == check_id), None)
            if at is None:
                self.records.append(CheckRecord(id=check_id, outcome=Outcome.FAILED, message="teardown: " + message,
                                                check=verdicts.identity_of(report)))
            else:
                before = self.records[at]
                self.records[at] = msgspec.structs.replace(before, outcome=Outcome.FAILED,
                                                           message=f"{before.message}\nteardown: {message}".strip())

    def record_collection_error(self, report: pytest.CollectReport) -> None:
        # A suite module that cannot be collected runs none of its checks: a failure of the run.
        self.records.append(CheckRecord(id=COLLECTION_CHECK, outcome=Outcome.FAILED,
                                        message=f"{report.nodeid}: {verdicts.message_of(report)}",
                                        check=CheckIdentity("Required", "Harness", "Collection", "Collects")))

    # -- the implementation's side: meta and pickle residue, from each process that ran checks --
    def worker_output(self) -> Optional[dict[str, Any]]:
        """What a worker hands the controller: what only a process that loaded the
        implementation knows (None when this worker ran no check)."""
        if "session" not in self.__dict__:
            return None
        return {"meta": self._meta(), "residue": self.session.pickle_residue(),
                "expectations_path": str(self.expectations_path), "catalogue": self.catalogue_lines()}

    def merge_worker(self, output: Optional[dict[str, Any]]) -> None:
        if output:
            self._workers.append(output)

    def _meta(self) -> dict[str, Any]:
        from conformance import __version__, spec_versions

        ipc = self.session
        return {"impl": ipc.adapter.label, "manifest": ipc.manifest.id, "transport": ipc.transport,
                # for the report site: what ran, and the --impl its reproducer commands name
                "impl_spec": self.options["impl"], "impl_version": ipc.adapter.version,
                "transports": list(ipc.transports), "suite_version": __version__,
                "spec_version": spec_versions.CURRENT, "target_spec_version": self.target_spec}

    def _merged(self) -> tuple[dict[str, Any], dict[str, Any], Path]:
        """(meta, pickle residue, expectations path) of the whole run."""
        if not self._workers:  # a serial run: this process ran the checks
            return self._meta(), self.session.pickle_residue(), self.expectations_path
        first = self._workers[0]
        wrapped: Counter[str] = Counter()
        for w in self._workers:
            wrapped.update(w["residue"]["wrapped"])
        residue = {"fields": [tuple(f) for f in first["residue"]["fields"]], "wrapped": dict(wrapped)}
        return first["meta"], residue, Path(first["expectations_path"])

    @staticmethod
    def _newer_than_target(meta: dict[str, Any], records: list[CheckRecord]) -> dict[str, int]:
        """family -> how many checks of this run are newer than the implementation's target."""
        from conformance import spec_versions

        return dict(sorted(spec_versions.newer_checks((r.id for r in records), meta["target_spec_version"]).items()))

    def final_versions_line(self) -> str:
        """The versions line for a run whose header could not show it (the pytest-xdist controller
        collects no checks): from the records and the workers' meta; '' once shown."""
        if self.versions_shown or not self.records or (not self._workers and "session" not in self.__dict__):
            return ""  # shown already, or nothing loaded the implementation (no line worth starting it for)
        meta = self._merged()[0]
        catalogue = self._workers[0].get("catalogue", []) if self._workers else self.catalogue_lines()
        return "\n".join([self.versions_line([r.id for r in self.records], meta["target_spec_version"]),
                          *catalogue])

    # -- the end: files, a rewritten list --
    def finish(self) -> None:
        if not self.records:
            return
        # Sorted by id: a parallel run finishes checks in another order than a serial one.
        records = self.records = sorted(self.records, key=lambda r: r.id)
        meta, residue, path = self._merged()
        meta["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
        meta["newer_than_target"] = self._newer_than_target(meta, records)
        if self.options["report"] or self.options["report_dir"]:
            from conformance import report  # (with the site's templates: imported only for files asked for)

            if self.options["report"]:
                Path(self.options["report"]).write_text(encode_results(report.results_json(meta, records, residue)))
            if self.options["report_dir"]:
                report.write_all(Path(self.options["report_dir"]), meta, records, residue)
        if not self.options["fix_expectations"]:
            return
        from conformance import expectations

        # A harness error can never be an expected failure, nor can a listed check that passed:
        # neither is written into the list.
        failing = {r.id: r.message for r in records if r.outcome in (Outcome.FAILED, Outcome.XFAILED)
                   and r.note not in (Note.LISTED_BUT_PASSED, Note.HARNESS_ERROR)}
        subjects = {r.id: r.identity.subject for r in records}
        self.rewrite_line = expectations.write(path, failing, expectations.load(path),
                                               f"expected failures of {meta['impl']} against {meta['manifest']}",
                                               subjects).line()
