"""PNG plot of a codec benchmark report: round-trip throughput (bytes/s) by payload size."""

from __future__ import annotations

from typing import Any

COLORS = {"pickle": "#d62728", "msgpack": "#1f77b4", "msgpack+oob": "#2ca02c", "sglang msgpack": "#ff7f0e",
          "memcpy": "#7f7f7f"}


def plot_codec(report: dict, path: str) -> None:
    """Left: tensor payloads, bytes/s of the tensor bytes vs tensor size (with the memcpy floor).
    Right: structured payloads, bytes/s of the message (reference msgpack size) vs that size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2))
    tensors = [p for p in report["payloads"] if p["group"] == "tensor"]
    others = [p for p in report["payloads"] if p["group"] != "tensor"]
    for name in report["transports"]:
        for dtype, style in (("float32", "-"), ("bfloat16", "--")):
            pts = sorted((p["tensor_bytes"], _throughput(p, name, p["tensor_bytes"]))
                         for p in tensors if dtype in p["payload"] and name in p["transports"])
            pts = [(x, y) for x, y in pts if y]
            if pts:
                left.plot(*zip(*pts), style, marker="o", color=COLORS.get(name), label=f"{name} ({dtype})")
        if name == "memcpy":  # the floor of the tensor bytes only, not of a whole message
            continue
        pts = sorted((p["message_bytes"], _throughput(p, name, p["message_bytes"]))
                     for p in others if name in p["transports"] and p["message_bytes"])
        pts = [(x, y) for x, y in pts if y]
        if pts:
            right.scatter(*zip(*pts), color=COLORS.get(name), label=name, s=22)
    for ax, title, xlabel in ((left, "tensor payloads", "tensor bytes"),
                              (right, "structured payloads (requests, batch outputs)", "message bytes (msgpack)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("round trip throughput (bytes/s)")
        ax.grid(True, which="both", alpha=0.3)
        if ax.has_data():
            ax.legend(fontsize=7)
    meta = report["meta"]
    fig.suptitle(f"ipc-conformance bench codec - {meta['cpus']} CPUs, {meta['machine']}, "
                 f"torch {meta['torch']}, msgspec {meta['msgspec']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _throughput(p: dict, name: str, nbytes: int) -> Any:
    rt = p["transports"][name].get("roundtrip")
    if not rt or not rt["median"] or not nbytes:
        return None
    return nbytes / rt["median"]
