"""Start-up costs of the lm-eval integration, measured in one run (compare the ratios).

1. ``prbench eval`` against plain ``lm_eval`` on the same tiny job (one pair per domain of the
   bundled sample, the ``constant`` scorer, so start-up dominates): ``prbench eval`` skips indexing
   lm-eval's ~14.7k built-in tasks when only prbench tasks are asked for.
2. The interpreter start-up hook (``prbench_lm_eval.pth``): the import time of its module as
   reported by ``python -X importtime``, and the wall time of ``python -c pass`` with and without
   the hook's site folder.

Plain ``lm_eval`` uses the installed hook when ``prbench_lm_eval.pth`` is in site-packages;
otherwise the repository's ``.pth`` is processed with ``site.addsitedir`` exactly as at start-up.

Usage::

    python benchmarks/bench_startup.py [--repeats 3] [--pass-repeats 20]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
TASK = "personalized_rewardbench_sample_noprofile"
JOB = ["--model", "prbench", "--model_args", "scorer=constant", "--tasks", TASK, "--limit", "1"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def _site_dir(root: Path, with_hook: bool) -> Path:
    site = root / ("with_hook" if with_hook else "without_hook")
    site.mkdir(parents=True, exist_ok=True)
    if with_hook:
        shutil.copy(REPO / "prbench/harness/prbench_lm_eval.pth", site / "prbench_lm_eval.pth")
        shutil.copy(REPO / "prbench/harness/_startup.py", site / "_prbench_lm_eval_startup.py")
    return site


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return elapsed


def _hook_installed() -> bool:
    return (Path(sysconfig.get_paths()["purelib"]) / "prbench_lm_eval.pth").exists()


def bench_eval(repeats: int, tmp: Path) -> None:
    env = _env()
    prbench_cmd = [PYTHON, "-m", "prbench.cli", "eval", *JOB]  # = the `prbench` script
    if _hook_installed():
        lm_eval_cmd = [PYTHON, "-m", "lm_eval", *JOB]  # = the `lm_eval` script
        how = "installed hook"
    else:
        site = _site_dir(tmp, True)
        code = (
            f"import site, sys; site.addsitedir({str(site)!r}); sys.argv = ['lm_eval', *{JOB!r}]; "
            "from lm_eval.__main__ import cli_evaluate; cli_evaluate()"
        )
        lm_eval_cmd = [PYTHON, "-c", code]
        how = "repository .pth via site.addsitedir"
    _timed(prbench_cmd, env)  # warm the file cache once
    ours, theirs = [], []
    for _ in range(repeats):  # interleaved, so drifting machine load hits both alike
        ours.append(_timed(prbench_cmd, env))
        theirs.append(_timed(lm_eval_cmd, env))
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"same job ({TASK}, constant scorer, --limit 1), median of {repeats}:")
    print(f"  prbench eval : {a:6.2f} s")
    print(f"  lm_eval      : {b:6.2f} s   ({how})")
    print(f"  ratio lm_eval / prbench eval = {b / a:.2f}x  (prbench eval saves {b - a:.2f} s)")


def bench_hook(repeats: int, tmp: Path) -> None:
    env = _env()
    with_hook, without = _site_dir(tmp, True), _site_dir(tmp, False)
    pattern = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|\s+_prbench_lm_eval_startup")
    selfs = []
    for _ in range(repeats):
        proc = subprocess.run(
            [PYTHON, "-X", "importtime", "-c",
             f"import site; site.addsitedir({str(with_hook)!r})"],
            env=env, capture_output=True, text=True, check=True,
        )
        match = pattern.search(proc.stderr)
        if match is None:
            raise SystemExit(f"the hook module was not imported:\n{proc.stderr[-2000:]}")
        selfs.append(int(match.group(2)))
    walls: dict[str, list[float]] = {"with": [], "without": []}
    for _ in range(repeats):
        for label, site in (("with", with_hook), ("without", without)):
            cmd = [PYTHON, "-c", f"import site; site.addsitedir({str(site)!r})"]
            walls[label].append(_timed(cmd, env))
    w, wo = statistics.median(walls["with"]), statistics.median(walls["without"])
    print(f"start-up hook, median of {repeats}:")
    if _hook_installed():
        installed = []
        for _ in range(repeats):
            proc = subprocess.run([PYTHON, "-X", "importtime", "-c", "pass"], env=env,
                                  capture_output=True, text=True, check=True)
            match = pattern.search(proc.stderr)
            if match is not None:
                installed.append(int(match.group(2)))
        if installed:
            print(f"  import time of the installed hook (python -X importtime -c pass): "
                  f"{statistics.median(installed) / 1000:.2f} ms (budget: 5 ms)")
    print(f"  import time of the hook from an appended site folder (upper bound: the whole "
          f"sys.path is searched first): {statistics.median(selfs) / 1000:.2f} ms")
    print(f"  python start, with the hook's site folder   : {w * 1000:7.1f} ms")
    print(f"  python start, without (an empty site folder): {wo * 1000:7.1f} ms")
    print(f"  ratio with / without = {w / wo:.3f}  (difference {1000 * (w - wo):+.1f} ms, noise "
          "included)")
    print(f"  hook installed in this environment: {_hook_installed()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each eval command")
    parser.add_argument("--pass-repeats", type=int, default=20, help="runs of `python -c pass`")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("PRBENCH_CACHE_DIR", str(Path(tmp) / "cache"))
        bench_hook(args.pass_repeats, Path(tmp))
        print()
        bench_eval(args.repeats, Path(tmp))


if __name__ == "__main__":
    main()
