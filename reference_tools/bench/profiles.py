"""Top costs per engine process from ``serve --profile-dir`` (cProfile files), as short tables.

    python -m reference_tools.bench.profiles DIR [DIR ...] [--top 8] [--format markdown]

Each DIR holds one server's ``<process>.prof`` files (``bench serve --profile-dir`` writes
``<base>/c<concurrency>-<transport>``). Functions are ranked by their own time (tottime);
idle waits (poll, select, epoll) are listed apart so the table shows where work goes.
"""

from __future__ import annotations

import argparse
import pstats
import sys
from pathlib import Path
from typing import Optional

# Where a loop waits for work: reported as idle, not as cost.
IDLE = ("poll", "select", "epoll", "_run_once", "sleep", "wait", "acquire")


def _label(func: tuple[str, int, str]) -> str:
    filename, line, name = func
    if filename == "~":
        return name
    parts = Path(filename).parts
    for root in ("reference_impl", "msgspec", "zmq", "uvicorn", "starlette", "asyncio", "fastapi", "httpx"):
        if root in parts:
            return f"{'/'.join(parts[parts.index(root):])}:{line}({name})"
    return f"{Path(filename).name}:{line}({name})"


def top_costs(path: Path, top: int) -> tuple[float, float, list[tuple[str, float, int]]]:
    """(busy seconds, idle seconds, [(function, own seconds, calls)]) of one profile."""
    stats = pstats.Stats(str(path))
    rows = []
    busy = idle = 0.0
    for func, (_cc, nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if any(word in func[2] for word in IDLE):
            idle += tt
            continue
        busy += tt
        rows.append((_label(func), tt, nc))
    rows.sort(key=lambda r: -r[1])
    return busy, idle, rows[:top]


def render(dirs: list[Path], top: int, markdown: bool) -> str:
    out = []
    for d in dirs:
        for prof in sorted(d.glob("*.prof")):
            busy, idle, rows = top_costs(prof, top)
            title = f"{d.name} / {prof.stem}: {busy:.2f} s busy, {idle:.2f} s waiting"
            if markdown:
                out += [f"**{title}**", "", "| function | own s | share of busy | calls |", "|---|---|---|---|"]
                out += [f"| `{name}` | {tt:.3f} | {tt / busy:.0%} | {calls:,} |" for name, tt, calls in rows]
            else:
                out.append(title)
                out += [f"  {tt:8.3f} s {tt / busy:5.0%} {calls:>9,}  {name}" for name, tt, calls in rows]
            out.append("")
    return "\n".join(out)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reference_tools.bench.profiles", description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="+", type=Path)
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--format", choices=["text", "markdown"], default="text")
    args = p.parse_args(argv)
    sys.stdout.write(render(args.dirs, args.top, args.format == "markdown"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
