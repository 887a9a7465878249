"""The sample sweep locally and on Ray, in one run: wall times, their ratio, Ray's cost per cell.

Three runs of ``prbench sweep sweeps/sample.yaml --limit N --no_report`` (12 cells), each into a
fresh folder with a fresh cache:

1. ``local``: ``--executor local`` (the default), one cell after the other.
2. ``ray, 1 node``: ``--executor ray`` on a one-node cluster of 1 CPU, so cells also run one
   after the other: the difference to ``local`` is what Ray adds (joining, the storage probe,
   scheduling, a worker per task).
3. ``ray, 2 nodes``: the same cluster with a second node of 1 CPU added: cells run two at a time.
4. ``local again``: run 1 once more, last: on a shared machine the load drifts during the
   runs, and the two local runs show by how much.

Printed: each run's wall time and the seconds its cell commands took (the sum of the ``seconds``
of its cell records: ``prbench eval`` itself, timed where it runs), ``ray 2 nodes / local`` and
``ray 1 node / local`` (ratios of wall times measured in this run), and Ray's added seconds per
cell: the time a sweep spends outside its cell commands (``wall - sum of cell seconds``: joining
the cluster, the storage probe, scheduling, starting workers, the driver's bookkeeping), on Ray
with one node minus locally (the mean of the two local runs), over the cells. That difference
does not move with how fast the commands themselves ran, which a shared machine's load does
change from run to run. ``uptime`` is
printed before and after: compare ratios, not seconds.

The cluster is a real Ray cluster (``ray.cluster_utils.Cluster``) on 127.0.0.1 inside a network
namespace of this script's own (``unshare -n``, loopback only; needs root): the script re-runs
itself there. It never calls ``ray stop`` and starts nothing on another address.

Usage::

    python benchmarks/bench_ray_sweep.py [--limit 1] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
INSIDE = "PRBENCH_BENCH_RAY_NAMESPACE"


def _sweep(out: Path, limit: str, env: dict[str, str], *more: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "prbench.cli", "sweep", str(REPO / "sweeps" / "sample.yaml"),
         "--limit", limit, "--no_report", "--no-progress", "-o", str(out), *more],
        env=env, cwd=REPO, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"the sweep into {out} failed ({proc.returncode}):\n"
                 f"{(proc.stdout + proc.stderr)[-3000:]}")
    return seconds


def _cell_seconds(out: Path) -> float:
    """The sum of the ``seconds`` of a sweep's cell records (its cell commands' own time)."""
    return sum(float(json.loads(p.read_text(encoding="utf-8"))["seconds"])
               for p in (out / "cells").glob("*/*.json"))


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _inside(args: argparse.Namespace) -> int:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    from ray.cluster_utils import Cluster

    tmp = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    base = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1"}
    cells = 12
    before = _uptime()
    walls: dict[str, float] = {}
    walls["local"] = _sweep(tmp / "local", args.limit,
                            {**base, "PRBENCH_CACHE_DIR": str(tmp / "cache-local")})
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False})
    try:
        walls["ray, 1 node"] = _sweep(
            tmp / "ray1", args.limit, {**base, "PRBENCH_CACHE_DIR": str(tmp / "cache-ray1")},
            "--executor", "ray", "--ray_address", cluster.address)
        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        walls["ray, 2 nodes"] = _sweep(
            tmp / "ray2", args.limit, {**base, "PRBENCH_CACHE_DIR": str(tmp / "cache-ray2")},
            "--executor", "ray", "--ray_address", cluster.address)
    finally:
        cluster.shutdown()
    walls["local again"] = _sweep(tmp / "local2", args.limit,
                                  {**base, "PRBENCH_CACHE_DIR": str(tmp / "cache-local2")})
    after = _uptime()
    folders = {"local": tmp / "local", "ray, 1 node": tmp / "ray1", "ray, 2 nodes": tmp / "ray2",
               "local again": tmp / "local2"}
    inside = {name: _cell_seconds(folder) for name, folder in folders.items()}
    outside = {name: walls[name] - inside[name] for name in walls}
    local_outside = (outside["local"] + outside["local again"]) / 2
    per_cell = (outside["ray, 1 node"] - local_outside) / cells
    print(f"sample sweep, {cells} cells, --limit {args.limit}")
    print(f"uptime before: {before}")
    print(f"uptime after:  {after}")
    for name, wall in walls.items():
        rest = ("cells overlap" if name == "ray, 2 nodes"
                else f"{outside[name]:5.1f} s outside them")
        print(f"  {name:<13} {wall:7.1f} s wall, {inside[name]:7.1f} s in cell commands, {rest}")
    for local in ("local", "local again"):
        print(f"ray 2 nodes / {local} (wall ratio): {walls['ray, 2 nodes'] / walls[local]:.2f}; "
              f"ray 1 node / {local}: {walls['ray, 1 node'] / walls[local]:.2f}")
    print("Ray's added seconds per cell, (outside(ray, 1 node) - mean outside(local runs)) / "
          f"cells, outside = wall - sum of cell seconds: {per_cell:+.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "cells": cells, "limit": args.limit, "wall_s": walls, "cell_command_s": inside,
            "per_cell_overhead_s": per_cell,
            "uptime_before": before, "uptime_after": after}, indent=2) + "\n", encoding="utf-8")
    return 0


def main() -> int:
    """Re-run inside a network namespace of its own, then measure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", default="1", help="pairs per task (default: 1)")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()
    if os.environ.get(INSIDE) == "1":
        return _inside(args)
    if os.geteuid() != 0:
        sys.exit("error: needs root, for `unshare -n` (a network namespace with loopback only)")
    return subprocess.run(["unshare", "-n", sys.executable, *sys.argv],
                          env={**os.environ, INSIDE: "1"}, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
