"""The throwaway faulty plugin and helpers of the plugin-fault and runtime-output tests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

GROUP = "personalized_rewardbench_sample_noprofile"
CUSTOM = "personalized_rewardbench_custom_noprofile"

#: A ``--plugin`` file (saved as ``faulty.py``, so the plugin is named ``faulty``): a scorer with
#: faults on demand (``meddle`` rewrites the requests it is handed, frozen or not), a scorer
#: that records its options, a clash with prbench's ``length``, and a profile builder returning
#: one kind of garbage per ``mode``.
FAULTY = '''
import dataclasses
import json
import math
import os
import signal
import time

import numpy as np

from prbench import hookimpl
from prbench.profiles.base import ProfileView
from prbench.records import ProfileItem


@dataclasses.dataclass(frozen=True)
class ScorerOptions:
    mode: str = "ok"
    fail_after: int = -1  # calls that succeed before the fault (-1: never fail)
    log: str = ""
    fingerprint: str = "ok"  # ok / raise / int / exit: what fingerprint() does


class Faulty:
    """Length in characters, or one of many faults (``mode``) after ``fail_after`` calls."""

    def __init__(self, options):
        self.options = options
        self.calls = 0

    def fingerprint(self):
        how = self.options.fingerprint
        if how == "raise":
            raise RuntimeError("no fingerprint today")
        if how == "int":
            return 7
        if how == "exit":
            raise SystemExit(0)
        return "faulty-v1"  # faults do not change the scores it does give

    def score(self, requests):
        self.calls += 1
        if self.options.log:
            with open(self.options.log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(len(requests)) + "\\n")
        good = [float(len(r.response)) for r in requests]
        if self.options.fail_after < 0 or self.calls <= self.options.fail_after:
            return good
        mode = self.options.mode
        if mode == "raise":
            raise ZeroDivisionError("model exploded\\non two lines")
        if mode == "exit":
            raise SystemExit(0)
        if mode == "interrupt":
            raise KeyboardInterrupt
        if mode == "hang":
            time.sleep(3600)
        if mode == "sigint":  # what a user's Ctrl-C does while the scorer runs
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        if mode == "short":
            return good[:-1]
        if mode == "long":
            return good + [1.0]
        if mode == "string-number":
            return ["1.5" for _ in requests]
        if mode == "bool":
            return [True for _ in requests]
        if mode == "none":
            return None
        if mode == "string":
            return "1.5"
        if mode == "nested":
            return [[s] for s in good]
        if mode == "nan":
            return [math.nan for _ in requests]
        if mode == "numpy":
            return list(np.asarray(good, dtype=np.float32))
        if mode == "meddle":  # reads the profile, then rewrites what it was handed
            out = []
            for r in requests:
                out.append(float(len(r.response) + len(r.profile.text)))
                object.__setattr__(r.profile, "text", "x" * (500 - len(r.response)))
                object.__setattr__(r, "response", "")
            return out
        return good


@dataclasses.dataclass(frozen=True)
class EchoOptions:
    revision: str = ""
    kind: str = ""
    n: int = 0
    ratio: float = 0.0
    pretrained: str = ""  # lm-eval names result folders after it; prbench does not


class Echo:
    """A constant scorer whose options are recorded in the manifest."""

    def __init__(self, options):
        self.options = options

    def score(self, requests):
        return [1.0 for _ in requests]


@dataclasses.dataclass(frozen=True)
class BuilderOptions:
    mode: str = "ok"


def _post(record):
    p = record.profile[0]
    return ProfileItem(id=p.id, category=p.category, text=p.text)


class Garbage:
    """A profile builder returning one kind of garbage (``mode``)."""

    def __init__(self, options):
        self.options = options

    def build(self, records):
        mode = self.options.mode
        ok = [ProfileView(text=r.profile[0].text, items=(_post(r),), n_tokens=3, builder="g")
              for r in records]
        if mode == "raise":
            raise KeyError("profile")
        if mode == "exit":
            raise SystemExit(0)
        if mode == "none":
            return None
        if mode == "string":
            return "a profile"
        if mode == "strings":
            return ["a profile" for _ in records]
        if mode == "short":
            return ok[:-1]
        if mode == "dict":
            return [{"text": "x"} for _ in records]
        if mode == "text-list":
            return [ProfileView(text=["a", "b"]) for _ in records]
        if mode == "items-strings":
            return [ProfileView(text="x", items=("post 1", "post 2")) for _ in records]
        if mode == "tokens-string":
            return [ProfileView(text="x", n_tokens="12") for _ in records]
        if mode == "tokens-float":
            return [ProfileView(text="x", n_tokens=12.5) for _ in records]
        if mode == "tokens-negative":
            return [ProfileView(text="x", n_tokens=-1) for _ in records]
        if mode == "builder-none":
            return [ProfileView(text="x", builder=None) for _ in records]
        return ok


@hookimpl
def register_scorers(register):
    register("faulty", Faulty, options=ScorerOptions, description="test: faults on demand")
    register("echo", Echo, options=EchoOptions, description="test: records its options")
    register("length", Faulty, options=ScorerOptions, description="test: clashes with prbench's")


@hookimpl
def register_profile_builders(register):
    register("garbage", Garbage, options=BuilderOptions, description="test: garbage views")
'''

SCORER = "scorer 'faulty/faulty' (plugin 'faulty')"
BUILDER = "profile builder 'faulty/garbage' (plugin 'faulty')"


def one_error_line(err: str) -> str:
    """The single ``error:`` line of a command's stderr (and no traceback)."""
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


def strict_load(text: str) -> Any:
    """``json.loads`` that fails on a bare NaN, Infinity or -Infinity."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"bare {constant} in a JSON file")

    return json.loads(text, parse_constant=refuse)


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder nobody may write in: read-only for a user, ``/proc`` for root."""
    import pytest

    if hasattr(os, "geteuid") and os.geteuid() == 0:
        if not Path("/proc/self").is_dir():
            pytest.skip("root without /proc: no folder root cannot write")
        return Path("/proc")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    return folder
