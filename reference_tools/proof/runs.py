"""Running the suite against planted violations: in subprocesses, several runs per process.

One ``ipc-conformance run`` spends about 5 s starting (torch, the catalogue, collection);
the proof runs many small selections, so a worker process (``python -m
reference_tools.proof.runs JOBS.json``) runs a list of jobs one after the other in-process
and writes one JSON report per job. Mutants restore whatever they patch after each call,
so runs in one process stay independent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from conformance.paths import data_root
from conformance.records import Outcome, load_results

#: outcomes that count as "the check caught it"
FAILING = frozenset({Outcome.FAILED, Outcome.RECOMMENDED_FAILED})


@dataclass(frozen=True)
class Job:
    """One suite run: implementation (module:Class or a cmd: testee), -k selection, options."""

    impl: str
    selection: Optional[str] = None
    transport: str = "both"
    e2e: bool = False
    report: str = ""
    extra: tuple[str, ...] = field(default_factory=tuple)


def _pytest_args(job: Job) -> list[str]:
    return [*(["-k", job.selection] if job.selection else []), *job.extra]


def run_jobs_here(jobs: Sequence[Job]) -> None:
    """Run each job in a child forked from this process (the worker's body): the imports are
    paid once, and nothing one run leaves behind (a late-defined message subclass, a patched
    function) reaches the next."""
    import torch  # noqa: F401 - imported before the fork: the children share it

    from conformance import runner

    for job in jobs:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                runner.run(impl=job.impl, transport=job.transport, report=job.report, expectations=os.devnull,
                           hypothesis_profile="ci", e2e=job.e2e, pytest_args=_pytest_args(job))
                code = 0
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.waitpid(pid, 0)


def _env(root: Path) -> dict[str, str]:
    # Defective adapters live in tests/ (importable as tests.defective_adapters from the root);
    # the root comes first, so a snapshot of the tree (snapshot()) is what runs.
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p),
            "PYTHONHASHSEED": "0"}


def snapshot(target: Path) -> Path:
    """A copy of the working tree's files (tracked and untracked, not ignored) under target: a
    long run keeps one consistent suite while the tree changes under it."""
    import shutil

    root = data_root()
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = root / name
        if src.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target / name)
    return target


def run_batch(jobs: Sequence[Job], *, timeout: float = 3600, root: Optional[Path] = None) -> list[dict[str, Outcome]]:
    """Run the jobs in one worker process; for each job, check id -> outcome ({} when the run
    produced no report: nothing selected, or the implementation failed to load)."""
    with tempfile.TemporaryDirectory(prefix="ipc-proof-") as tmp:
        jobs = [Job(**{**asdict(j), "report": str(Path(tmp) / f"{i}.json"), "extra": tuple(j.extra)})
                for i, j in enumerate(jobs)]
        spec = Path(tmp) / "jobs.json"
        spec.write_text(json.dumps([asdict(j) for j in jobs]))
        proc = subprocess.run([sys.executable, "-m", "reference_tools.proof.runs", str(spec)], capture_output=True,
                              text=True, env=_env(root or data_root()), cwd=str(root or data_root()), timeout=timeout)
        out = []
        for job in jobs:
            path = Path(job.report)
            if path.exists():
                out.append({r.id: r.outcome for r in load_results(path).results})
            else:
                out.append({})
        if not any(out) and proc.returncode:
            raise RuntimeError(f"proof worker failed ({proc.returncode}):\n"
                               f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return out


def run_batches(batches: Sequence[Sequence[Job]], workers: int = 2, root: Optional[Path] = None
                ) -> list[list[dict[str, Outcome]]]:
    """Several worker processes at once (2 by default: CI machines have 2 cores)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda b: run_batch(b, root=root), batches))


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    jobs = [Job(**{**j, "extra": tuple(j["extra"])}) for j in json.loads(Path(args[0]).read_text())]
    run_jobs_here(jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
