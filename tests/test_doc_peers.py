"""Every peer command the docs give exists in that peer's released parser or config.

The docs tell users to run other projects' commands: ``lm_eval`` (lm-eval 0.4.13's ``run``
parser), OpenRLHF 0.11.2's ``train_ppo_ray`` flags, verl 0.9.1's hydra overrides of ``main_ppo``
and TRL's config dataclasses. A flag the peer does not have (the docs once said OpenRLHF's
``--max_len``; 0.11.2 has ``--data.max_len``) sends a user to an error in someone else's tool, or
worse, to a flag silently ignored. Here the flags are read out of the docs' code blocks and
inline code and looked up in the peers' own code, so the docs cannot drift from the releases
they name:

- ``lm_eval``: every ``--flag`` after ``lm_eval`` in a command (code block or inline span);
- OpenRLHF: every dotted ``--group.name`` flag anywhere, every ``--flag`` of a command that runs
  ``openrlhf``, and every inline ``--flag`` of a clause that names OpenRLHF, unless it is one
  of prbench's own flags (``prbench serve --api_key_env``) or a name the docs give as an older
  release's (:data:`OPENRLHF_OLD_NAMES`); OpenRLHF's flags are read from its
  ``openrlhf/cli/train_ppo_ray.py`` (its parser is built under ``__main__``, so its
  ``add_argument`` calls are read, not run);
- verl: the ``key=value`` overrides of a ``verl.trainer.main_ppo`` command, composed with
  verl's own hydra config (an unknown key, or ``+key`` over an existing one, is hydra's error);
- TRL: the keyword arguments of a ``trl`` ``...Config(...)`` call in a Python code block are
  fields of that dataclass.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: the pages that give peer commands (examples/ holds the OpenRLHF reward function file)
PAGES = sorted([*(REPO / "docs").glob("*.md"), REPO / "README.md", REPO / "CONTRIBUTING.md",
                *(REPO / "examples").glob("*.py")])
#: OpenRLHF flags the docs name as an older release's spelling, on purpose
OPENRLHF_OLD_NAMES = frozenset({"--remote_rm_url", "--label_key"})
_FENCE = re.compile(r"^\s*```(\w*)\s*$")
_SPAN = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(r"(?<![\w-])--[A-Za-z_]+(?:\.[A-Za-z_]+)+")
#: where a clause of prose ends: a sentence, a semicolon, a colon, a table cell
_CLAUSE = re.compile(r"[.;:](?:\s|$)|\|")
#: tokens that end a command inside a line
_ENDS = {"|", "||", "&&", ";", ">", ">>", "2>", "&"}


@dataclasses.dataclass(frozen=True)
class Block:
    """A fenced code block or a prose paragraph of a page."""

    page: Path
    line: int
    text: str
    code: str | None  # the fence's language ("" for none); None for prose


def _blocks(page: Path) -> Iterator[Block]:
    """The page's code blocks and prose paragraphs (a Python file is one code block)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    if page.suffix == ".py":
        yield Block(page, 1, "\n".join(lines), "python-file")
        return
    fence: str | None = None
    start, body = 1, []
    for number, line in enumerate(lines, start=1):
        match = _FENCE.match(line)
        if match and fence is None:
            if body:
                yield Block(page, start, "\n".join(body), None)
            fence, start, body = match.group(1), number + 1, []
        elif match and fence is not None and not match.group(1):
            yield Block(page, start, "\n".join(body), fence)
            fence, start, body = None, number + 1, []
        elif fence is None and not line.strip():
            if body:
                yield Block(page, start, "\n".join(body), None)
            start, body = number + 1, []
        else:
            body.append(line)
    if body:
        yield Block(page, start, "\n".join(body), fence)


def _commands(block: Block) -> Iterator[list[str]]:
    """The shell commands of a code block, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", block.text)
    for line in joined.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not line:
            continue
        try:
            yield shlex.split(line)
        except ValueError:  # an unbalanced quote in an example: split on spaces
            yield line.split()


def _flags_after(tokens: list[str], start: int) -> list[str]:
    """The ``--flag`` names (before any ``=``) of ``tokens`` from ``start`` to the command's end."""
    flags = []
    for token in tokens[start:]:
        if token in _ENDS:
            break
        if token.startswith("--") and len(token) > 2:
            flags.append(token.split("=", 1)[0])
    return flags


def _where(block: Block) -> str:
    return f"{block.page.relative_to(REPO)}:{block.line}"


def _all_blocks() -> list[Block]:
    return [b for page in PAGES for b in _blocks(page)]


def _shell_texts(block: Block) -> list[list[str]]:
    """Commands to look at: a shell code block's commands, or a prose block's inline spans."""
    if block.code is None:
        out = []
        for span in _SPAN.findall(block.text):
            try:
                out.append(shlex.split(span))
            except ValueError:
                out.append(span.split())
        return out
    if block.code in ("bash", "sh", "shell", "console", ""):
        return list(_commands(block))
    return []


# -- lm-eval ---------------------------------------------------------------------------------


def _lm_eval_run_flags() -> set[str]:
    from lm_eval._cli.harness import HarnessCLI

    run = HarnessCLI()._parser._subparsers._group_actions[0].choices["run"]
    return {option for action in run._actions for option in action.option_strings}


def _lm_eval_uses() -> list[tuple[str, str]]:
    uses = []
    for block in _all_blocks():
        for tokens in _shell_texts(block):
            for i, token in enumerate(tokens):
                if token == "lm_eval" or token.endswith("/lm_eval"):
                    start = i + 2 if tokens[i + 1:i + 2] == ["run"] else i + 1
                    uses += [(_where(block), flag) for flag in _flags_after(tokens, start)]
    return uses


def test_every_lm_eval_flag_in_the_docs_is_one_of_lm_eval_run() -> None:
    known = _lm_eval_run_flags()
    uses = _lm_eval_uses()
    assert len(uses) > 5, uses  # the docs run lm_eval in several places
    unknown = sorted({(where, flag) for where, flag in uses if flag not in known})
    assert not unknown, f"flags lm_eval run does not have: {unknown}"


# -- OpenRLHF --------------------------------------------------------------------------------


def _openrlhf_flags() -> set[str]:
    spec = importlib.util.find_spec("openrlhf")
    if spec is None or spec.origin is None:
        pytest.skip("OpenRLHF (--no-deps): the peers extra")
    source = Path(spec.origin).parent / "cli" / "train_ppo_ray.py"
    flags = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flags |= {a.value for a in node.args
                      if isinstance(a, ast.Constant) and str(a.value).startswith("--")}
    assert "--reward.remote_url" in flags and "--data.max_len" in flags, sorted(flags)[:20]
    return flags


def _prbench_flags() -> set[str]:
    """Every option string of ``prbench`` and its subcommands (and theirs)."""
    import argparse

    from prbench.cli import build_parser

    flags: set[str] = set()
    parsers = [build_parser()]
    while parsers:
        parser = parsers.pop()
        for action in parser._actions:
            flags |= set(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                parsers += list(action.choices.values())
    return flags


def _openrlhf_uses() -> list[tuple[str, str]]:
    uses = []
    for block in _all_blocks():
        uses += [(_where(block), flag) for flag in _DOTTED.findall(block.text)]
        if block.code is not None:
            for tokens in _commands(block):
                if any("openrlhf" in token for token in tokens[:4]):
                    uses += [(_where(block), flag) for flag in _flags_after(tokens, 0)]
        else:
            for clause in _CLAUSE.split(block.text):
                if "OpenRLHF" not in clause:
                    continue
                uses += [(_where(block), span.split()[0].split("=", 1)[0])
                         for span in _SPAN.findall(clause) if span.startswith("--")]
    return uses


def test_every_openrlhf_flag_in_the_docs_is_one_of_openrlhf_0_11_2() -> None:
    known = _openrlhf_flags() | _prbench_flags() | OPENRLHF_OLD_NAMES
    uses = _openrlhf_uses()
    assert any(flag == "--reward.remote_url" for _, flag in uses), uses
    unknown = sorted({(where, flag) for where, flag in uses if flag not in known})
    assert not unknown, f"flags OpenRLHF 0.11.2's train_ppo_ray does not have: {unknown}"


def test_the_doc_check_finds_a_flag_openrlhf_does_not_have(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The check itself: the old advice (raise OpenRLHF's ``--max_len``) is caught."""
    page = tmp_path / "page.md"
    page.write_text("Raise OpenRLHF's `--max_len` (its prompt budget), or use\n"
                    "`prbench serve --strip`.\n", encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.PAGES", [page])
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    known = _openrlhf_flags() | _prbench_flags()
    assert [flag for _, flag in _openrlhf_uses() if flag not in known] == ["--max_len"]


# -- verl ------------------------------------------------------------------------------------


def _verl_overrides() -> list[tuple[str, list[str]]]:
    found = []
    for block in _all_blocks():
        if block.code is None:
            continue
        for tokens in _commands(block):
            if "verl.trainer.main_ppo" in tokens:
                start = tokens.index("verl.trainer.main_ppo") + 1
                found.append((_where(block), [t for t in tokens[start:]
                                              if "=" in t and not t.startswith("-")]))
    return found


def test_every_verl_override_in_the_docs_composes_with_verl_0_9_1() -> None:
    if not all(importlib.util.find_spec(m) for m in ("verl", "hydra", "omegaconf")):
        pytest.skip("verl (--no-deps) and hydra-core: the peers extra")
    from tests._peers_fixtures import compose_verl_config

    found = _verl_overrides()
    assert found and all(overrides for _, overrides in found), found
    for where, overrides in found:
        try:
            compose_verl_config(overrides)
        except Exception as exc:  # hydra's error names the key
            pytest.fail(f"{where}: verl 0.9.1's main_ppo config refuses {overrides}: {exc}")


# -- TRL -------------------------------------------------------------------------------------


def _trl_config_calls() -> list[tuple[str, str, list[str]]]:
    calls = []
    for block in _all_blocks():
        if block.code not in ("python", "py"):
            continue
        try:
            tree = ast.parse(block.text)
        except SyntaxError:
            continue
        from_trl = {alias.asname or alias.name for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trl")
                    for alias in node.names}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                    node.func.id in from_trl and node.func.id.endswith("Config")):
                calls.append((_where(block), node.func.id,
                              [k.arg for k in node.keywords if k.arg is not None]))
    return calls


def test_every_trl_config_field_in_the_docs_exists() -> None:
    trl = pytest.importorskip("trl")
    calls = _trl_config_calls()
    assert calls, "the docs show a TRL config"
    for where, name, keywords in calls:
        fields = {f.name for f in dataclasses.fields(getattr(trl, name))}
        unknown = [k for k in keywords if k not in fields]
        assert not unknown, f"{where}: trl.{name} has no field {unknown}"
