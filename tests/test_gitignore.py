"""What the commands write into the working folder by default is ignored by git.

A user who runs ``prbench bon`` or ``make downstream-demo`` in the checkout should not find the
outputs among the files to commit. The folders come from the commands' own parsers (the default
of every ``-o/--output_path``), the Makefile's ``--output_path`` / ``-o`` arguments and the sweep
files' ``output_path``; each must be a top-level folder that ``.gitignore`` names.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import yaml

from prbench.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def _parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its command words, nested ones too."""
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                out[name] = child
                out.update({f"{name} {k}": v for k, v in _parsers(child).items()})
    return out


def _ignored_folders(text: str) -> set[str]:
    """The top-level folders a .gitignore names as ``NAME/`` or ``/NAME/`` (no wildcards)."""
    out = set()
    for line in text.splitlines():
        match = re.fullmatch(r"/?([\w.-]+)/", line.strip())
        if match:
            out.add(match.group(1))
    return out


def _top(path: str) -> str:
    return Path(path).parts[0]


def default_output_folders() -> dict[str, str]:
    """``where -> top-level folder`` of every default output the commands write here."""
    found: dict[str, str] = {}
    for words, parser in _parsers(build_parser()).items():
        for action in parser._actions:
            if "--output_path" in action.option_strings and isinstance(action.default, str):
                found[f"prbench {words} -o"] = _top(action.default)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for number, line in enumerate(makefile.splitlines(), 1):
        for path in re.findall(r"(?:--output_path|-o)\s+([\w./-]+)", line):
            found[f"Makefile:{number}"] = _top(path)
    for sweep in sorted((ROOT / "sweeps").glob("*.yaml")):
        given = yaml.safe_load(sweep.read_text(encoding="utf-8")).get("output_path")
        if given:
            found[f"sweeps/{sweep.name}"] = _top(given)
    return found


def test_the_matcher_reads_folder_lines_only() -> None:
    assert _ignored_folders("/bon/\nresults/\n*.pyc\n# report/\n/dist\n") == {"bon", "results"}


def test_the_defaults_are_found() -> None:
    found = default_output_folders()
    assert {found["prbench bon -o"], found["prbench report -o"],
            found["prbench correlate -o"]} == {"bon", "report", "correlation"}
    assert {"results", "downstream"} <= set(found.values())  # make demo, make downstream-demo


@pytest.mark.parametrize(("where", "folder"), sorted(default_output_folders().items()))
def test_every_default_output_folder_is_ignored(where: str, folder: str) -> None:
    ignored = _ignored_folders((ROOT / ".gitignore").read_text(encoding="utf-8"))
    assert folder in ignored, f"{where} writes {folder}/, which .gitignore does not name"
