"""The documentation cannot go stale: its links resolve and its commands parse.

Every markdown page a reader starts from (README.md, CONTRIBUTING.md, docs/*.md) is read here:

* every relative link ``[text](path)`` / ``[text](path#anchor)`` names a file that exists, and an
  anchor names a heading of that page (GitHub's heading slugs); the plugins', tasks' and data
  folders' READMEs are link-checked too (their commands may name files only their readers have);
* every ``prbench …`` / ``lm_eval …`` command line of a shell block (also behind ``.venv/bin/``,
  ``accelerate launch … -m lm_eval`` or ``-m prbench.cli``, inside ``for`` loops with the loop
  variable expanded) parses with the real parsers: prbench's subcommand parser, then, for
  ``prbench eval`` and ``lm_eval``, lm-eval's own ``run`` parser and the checks ``prbench eval``
  makes before it starts (JSON flags, ``--tasks`` given and spelt like a task of prbench's or a
  plugin's folders, no ``--use_cache``); every ``--model_args`` names a registered scorer and only
  options its options dataclass (or the scorer runtime) declares, with values of the declared
  types. Nothing runs; only the parsers and the plugin registry are used;
* every ``make TARGET`` in a shell block is a target of the Makefile;
* no page users read (these, ARCHITECTURE.md, CHANGELOG.md and the folders' READMEs) names an
  issue or pull request number or an internal run label ("issue 38's check", "stop 4").

The scorer ids come from prbench's built-ins, the plugins bundled in ``plugins/`` (``make setup``
installs them) and the plugin CONTRIBUTING.md builds (``mymodel``, loaded from its snippet as a
``--plugin`` file); the task names also from the package ``prbench plugins new mymodel`` writes.
The checker functions take text, so the planted faults below show that each check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import sys
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.test_contributing_snippet import PLUGIN_API, snippet_files

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "CONTRIBUTING.md", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
#: every markdown page of the repository, for the link check (plugin, task and data READMEs too)
LINK_PAGES = sorted({*PAGES, "CHANGELOG.md", *(str(p.relative_to(ROOT)) for pattern in (
    "plugins/*/*.md", "tasks/**/*.md", "prbench/data/**/*.md") for p in ROOT.glob(pattern))})
SHELL_LANGS = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^\s*```(\S*)\s*$")  # also indented, inside a list item
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
SUBST = re.compile(r"\$\(")
OPERATORS = {";", "&&", "||", "|", "&", ">", ">>", "<", "(", ")", "2>", "&>"}
#: the scorer lm-eval's ``prbench`` model uses when ``--model_args`` names none
DEFAULT_SCORER = "embedding-similarity"


@dataclass(frozen=True)
class Command:
    """One command line of a shell block: where it is and its words."""

    page: str
    line: int
    argv: tuple[str, ...]

    def where(self) -> str:
        """``page:line``, for the problem list."""
        return f"{self.page}:{self.line}"


# -- reading markdown ---------------------------------------------------------------------------

def blocks(text: str) -> Iterator[tuple[str, int, list[str]]]:
    """Every fenced block: its language, the line of its first body line, and its lines."""
    lang, start, body = None, 0, []
    for number, line in enumerate(text.split("\n"), 1):
        fence = FENCE.match(line)
        if lang is None and fence:
            lang, start, body = fence.group(1).lower(), number + 1, []
        elif lang is not None and line.lstrip().startswith("```"):
            yield lang, start, body
            lang = None
        elif lang is not None:
            body.append(line)


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines outside fenced blocks, numbered."""
    inside = False
    for number, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            inside = not inside
            continue
        if not inside:
            yield number, line


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"`|\*|_{2,}", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a page's headings (a repeated heading gets ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _number, line in prose_lines(text):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def link_problems(page: Path, text: str, root: Path = ROOT) -> list[str]:
    """A line per relative link of ``text`` (the page at ``page``) that does not resolve."""
    problems = []
    for number, line in prose_lines(text):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            path_part, _, anchor = target.partition("#")
            where = f"{page.relative_to(root)}:{number}"
            dest = (page.parent / path_part).resolve() if path_part else page
            if path_part and not dest.exists():
                problems.append(f"{where}: link to {target!r}: {path_part!r} does not exist")
                continue
            if anchor and dest.suffix == ".md":
                dest_text = text if dest == page else dest.read_text(encoding="utf-8")
                if anchor not in anchors(dest_text):
                    problems.append(f"{where}: link to {target!r}: no heading with anchor "
                                    f"#{anchor} in {dest.name}")
    return problems


# -- reading shell blocks -----------------------------------------------------------------------

def _without_substitutions(line: str) -> str:
    """``$(...)`` (balanced, quotes respected) replaced by the word ``SUBSTITUTED``."""
    out, i = [], 0
    while True:
        match = SUBST.search(line, i)
        if not match:
            out.append(line[i:])
            return "".join(out)
        out.append(line[i:match.start()])
        depth, j, quote = 1, match.end(), ""
        while j < len(line) and depth:
            char = line[j]
            if quote:
                quote = "" if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
            j += 1
        out.append("SUBSTITUTED")
        i = j


def _quotes_open(text: str) -> bool:
    """True when ``text`` ends inside a quoted string (it goes on on the next line)."""
    try:
        shlex.split(_without_substitutions(text), comments=True)
    except ValueError:
        return True
    return False


def _logical_lines(body: Sequence[str], start: int) -> Iterator[tuple[int, str]]:
    """Lines joined at trailing backslashes and open quotes, with the number of their first line."""
    pending, first = "", start
    for offset, line in enumerate(body):
        if not pending:
            first = start + offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        pending += line
        if _quotes_open(pending) and offset + 1 < len(body):
            pending += "\n"
            continue
        yield first, pending
        pending = ""
    if pending:
        yield first, pending


def _segments(line: str) -> list[list[str]]:
    """A shell line split into simple commands at ``;``, ``&&``, ``|``, ... (comments dropped)."""
    lexer = shlex.shlex(_without_substitutions(line), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    out: list[list[str]] = [[]]
    for token in lexer:
        if token in OPERATORS or set(token) <= set(";&|<>()"):
            out.append([])
        else:
            out[-1].append(token)
    return [s for s in out if s]


def shell_commands(page: str, text: str) -> Iterator[Command]:
    """Every simple command of every shell block, ``for`` loops expanded over their values."""
    for lang, start, body in blocks(text):
        if lang not in SHELL_LANGS:
            continue
        loops: list[tuple[str, list[str]]] = []
        for number, line in _logical_lines(body, start):
            for words in _segments(line):
                if words[0] == "for" and len(words) >= 3 and words[2] == "in":
                    loops.append((words[1], words[3:]))
                    continue
                if words[0] in ("do", "then", "else"):
                    words = words[1:]
                if words and words[0] == "done":
                    if loops:
                        loops.pop()
                    continue
                if not words:
                    continue
                expansions = [words]
                for var, values in loops:
                    expansions = [
                        [w.replace(f"${{{var}}}", v).replace(f"${var}", v) for w in e]
                        for e in expansions for v in values
                    ]
                for argv in expansions:
                    yield Command(page, number, tuple(argv))


INLINE = re.compile(r"^\| `((?:prbench|lm_eval) [^`]+)` \|")


def inline_commands(page: str, text: str) -> Iterator[Command]:
    """The command lines of command tables: rows whose first cell, under a ``command`` header,
    is inline code (the README's one-line command table).

    Inline code inside a sentence (``prbench rl --resume``) names a command or a flag, not a whole
    command line, and is not read. A cell with optional parts or an ellipsis (``[--all]``,
    ``...``, ``|``) is a synopsis and is left out; in the others an upper-case word (``ID``,
    ``K=V``) stands for a value the reader picks.
    """
    header = ""
    for number, line in prose_lines(text):
        if not line.startswith("|"):
            header = ""
            continue
        if not header:
            header = line.strip("| ").split("|")[0].strip().lower()
        match = INLINE.match(line)
        if header != "command" or not match:
            continue
        span = match.group(1)
        if any(mark in span for mark in ("[", "...", "…", "\\|")):
            continue
        yield Command(page, number, tuple(shlex.split(span)))


def tool_argv(argv: Sequence[str]) -> tuple[str, list[str]] | None:
    """``("prbench" | "lm_eval" | "make", args)`` for a command that runs one of them, else None.

    Leading ``NAME=value`` assignments are skipped; ``.venv/bin/prbench`` is ``prbench``; a
    launcher's ``-m lm_eval`` / ``-m prbench.cli`` (accelerate, torchrun, python) starts the tool.
    """
    words = list(argv)
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if not words:
        return None
    name = words[0].rsplit("/", 1)[-1]
    if name in ("prbench", "lm_eval", "make"):
        return name, words[1:]
    for i, word in enumerate(words[:-1]):
        if word == "-m" and words[i + 1] in ("lm_eval", "prbench.cli"):
            return ("lm_eval" if words[i + 1] == "lm_eval" else "prbench"), words[i + 2:]
    return None


# -- checking commands --------------------------------------------------------------------------

class Checker:
    """Parses command lines with prbench's and lm-eval's parsers; resolves scorers and tasks."""

    def __init__(self, registry: Any, task_names: set[str], make_targets: set[str]) -> None:
        from prbench.cli import build_parser

        self.registry = registry
        self.task_names = task_names
        self.make_targets = make_targets
        self.parser = build_parser()

    def problems(self, command: Command) -> list[str]:
        """A line per problem of one command (empty when it parses and names what exists)."""
        tool = tool_argv(command.argv)
        if tool is None:
            return []
        name, args = tool
        try:
            if name == "make":
                found = self._make(args)
            elif name == "lm_eval":
                found = self._lm_eval(args, prbench_eval=False)
            else:
                found = self._prbench(args)
        except Exception as exc:  # a crash of the checker is a problem of the docs line too
            found = [f"{type(exc).__name__}: {exc}"]
        shown = " ".join(command.argv)
        shown = shown if len(shown) <= 120 else shown[:119] + "…"
        return [f"{command.where()}: {p}  [{shown}]" for p in found]

    def _make(self, args: Sequence[str]) -> list[str]:
        targets = [a for a in args if not a.startswith("-") and "=" not in a]
        return [f"make: no target {t!r} in the Makefile" for t in targets
                if t not in self.make_targets]

    def _parse(self, parser: argparse.ArgumentParser, args: Sequence[str],
               ) -> tuple[argparse.Namespace | None, list[str], str]:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                ns, extra = parser.parse_known_args(list(args))
        except SystemExit:
            lines = err.getvalue().strip().splitlines()
            return None, [], lines[-1] if lines else "does not parse"
        return ns, extra, ""

    def _prbench(self, args: Sequence[str]) -> list[str]:
        ns, extra, error = self._parse(self.parser, args)
        if ns is None:
            return [error]
        if ns.command is None:
            return [] if not extra else [f"unrecognized arguments: {' '.join(extra)}"]
        module = ns._module
        if ns.command == "eval":
            from prbench.commands.eval import undeclared_flags_problem

            problem = undeclared_flags_problem(extra, [])
            return [problem] if problem else self._eval(ns)
        if extra and not getattr(module, "ACCEPTS_EXTRA_ARGS", False):
            return [f"prbench {ns.command}: unrecognized arguments: {' '.join(extra)}"]
        from prbench.commands import ROLES, component_args, scorer_specs

        out: list[str] = []
        for role in ROLES:
            if role != "model" and hasattr(ns, f"{role}_args"):
                component_args(ns, role)
        if hasattr(ns, "model_args") and hasattr(ns, "prbench_scorer_required"):
            for spec in scorer_specs(ns):
                scorer, _, rest = spec.partition(":")
                out += self._scorer(scorer, rest)
        return out

    def _eval(self, ns: argparse.Namespace) -> list[str]:
        """What ``prbench eval`` checks before it runs, on a parsed command line."""
        from prbench.errors import PrbenchUserError
        from prbench.harness.eval_options import (
            misspelt_task,
            read_metadata,
            read_model_args,
            requested_tasks,
            reserved_metadata_keys,
        )

        if not requested_tasks(ns.tasks):
            return ["no --tasks given"]
        if ns.log_samples and not ns.output_path:
            return ["--log_samples needs --output_path"]
        try:
            given = read_model_args(ns.model_args)
            metadata = read_metadata(ns.metadata)
        except PrbenchUserError as exc:
            return [str(exc)]
        out = []
        if reserved_metadata_keys(metadata):
            out.append("--metadata sets keys the task YAMLs fix")
        typo = misspelt_task(requested_tasks(ns.tasks), self.task_names)
        if typo:
            out.append(typo)
        return out + self._given_scorer(given)

    def _given_scorer(self, given: dict[str, Any]) -> list[str]:
        options = dict(given)
        scorer = str(options.pop("scorer", DEFAULT_SCORER))
        return self._scorer(scorer, ",".join(f"{k}={v}" for k, v in options.items()
                                              if "," not in str(v)))

    def _lm_eval(self, args: Sequence[str], *, prbench_eval: bool) -> list[str]:
        """A plain ``lm_eval`` line: lm-eval's own parser, then what prbench reads of it."""
        from lm_eval._cli.harness import HarnessCLI

        from prbench.errors import PrbenchUserError
        from prbench.harness.eval_options import (
            USE_CACHE_REFUSED,
            argv_given,
            argv_values,
            json_flag_problem,
            misspelt_task,
            read_model_args,
            requested_tasks,
        )

        argv = list(args)
        problem = json_flag_problem(argv, ("--model_args", "-a", "--metadata"))
        if problem:
            return [problem]
        try:
            ns, _, error = self._parse(HarnessCLI()._parser, ["run", *argv])
        except ValueError as exc:  # K=V text holding "{": plain lm_eval reads it as text
            # (prbench's start-up hook, lm_eval_compat.allow_braces_in_values)
            ns, error = "text", str(exc)
            if "Invalid JSON" not in error:
                raise
        if ns is None:
            return [f"lm_eval run: {error}"]
        out = []
        if argv_given(argv, "--use_cache", "-c"):
            out.append(USE_CACHE_REFUSED)
        tasks = requested_tasks(argv_values(argv, "--tasks", "-t"))
        if not tasks:
            out.append("no --tasks given")
        typo = misspelt_task(tasks, self.task_names)
        if typo:
            out.append(typo)
        models = argv_values(argv, "--model", "-M")
        if models and models[-1] == "prbench":
            try:
                given = read_model_args(argv_values(argv, "--model_args", "-a"))
            except PrbenchUserError as exc:
                return [*out, str(exc)]
            out += self._given_scorer(given)
        return out

    def _scorer(self, scorer: str, rest: str) -> list[str]:
        """Problems of one scorer id with its ``K=V,...`` options (empty when it resolves).

        An upper-case id or option name (``scorer=ID,K=V``) is a placeholder and is not checked.
        """
        from prbench.errors import PrbenchUserError
        from prbench.options import parse_kv_string
        from prbench.scoring.runtime_options import split_options

        if scorer.isupper():
            return []
        try:
            component = self.registry.get("scorer", scorer)
            options = {k: v for k, v in parse_kv_string(rest).items() if not k.isupper()}
            _runtime, raw = split_options(component, options)
            component.parse_options(raw)
        except PrbenchUserError as exc:
            return [f"--model_args scorer={scorer}: {exc}"]
        return []


# -- the set-up the checks run in ---------------------------------------------------------------

def bundled_plugin_names(root: Path = ROOT) -> list[str]:
    """The entry-point names of the plugins in ``plugins/`` that ``make setup`` installs."""
    names = []
    for project in sorted(root.glob("plugins/*/pyproject.toml")):
        if project.parent.name == "prbench-plugin-example-second":  # CI's extra, not make setup
            continue
        data = tomllib.loads(project.read_text(encoding="utf-8"))
        names += list(data.get("project", {}).get("entry-points", {}).get("prbench", {}))
    return names


def make_targets(root: Path = ROOT) -> set[str]:
    """The targets the Makefile defines."""
    text = (root / "Makefile").read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^([A-Za-z][\w-]*):(?!=)", text, re.MULTILINE)}


@pytest.fixture(scope="module")
def checker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Checker]:
    """A checker over prbench's built-ins, the bundled plugins and CONTRIBUTING's ``mymodel``."""
    from prbench.harness import tasks
    from prbench.plugin_scaffold import write_plugin
    from prbench.plugins import PluginRegistry

    snippet = snippet_files("\n".join(
        (ROOT / name).read_text(encoding="utf-8") for name in ("CONTRIBUTING.md", PLUGIN_API)))
    root = tmp_path_factory.mktemp("mymodel")  # the package, loaded as CONTRIBUTING says
    for name, text in snippet.items():
        if name.startswith("prbench_plugin_mymodel/"):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
    (root / "prbench_plugin_mymodel" / "__init__.py").touch()
    path_before = list(sys.path)
    registry = PluginRegistry(plugin_files=[root / "prbench_plugin_mymodel" / "plugin.py"],
                              env={"PRBENCH_LOAD_PLUGINS": ",".join(bundled_plugin_names())})
    assert registry.file_trouble() is None, registry.file_trouble()
    missing = [p for p in bundled_plugin_names() if p not in registry.plugins]
    assert not missing, f"bundled plugins not installed (run `make setup`): {missing}"
    dirs = [path for path, _desc, _plugin in registry.task_dirs if Path(path).is_dir()]
    # and the tasks of the package `prbench plugins new mymodel` writes (CONTRIBUTING starts there)
    new, _ = write_plugin("mymodel", tmp_path_factory.mktemp("new") / "prbench-plugin-mymodel")
    dirs.append(str(new / "prbench_plugin_mymodel" / "tasks"))
    yield Checker(registry, tasks.task_names(dirs), make_targets())
    sys.path[:] = path_before
    for name in [m for m in sys.modules if m.startswith("prbench_plugin_mymodel")]:
        del sys.modules[name]


def _page_commands() -> list[Command]:
    return [c for page in PAGES
            for c in shell_commands(page, (ROOT / page).read_text(encoding="utf-8"))]


# -- the docs -----------------------------------------------------------------------------------

def test_every_relative_link_resolves() -> None:
    assert "plugins/prbench-plugin-skywork/README.md" in LINK_PAGES
    problems = [p for page in LINK_PAGES for p in link_problems(
        ROOT / page, (ROOT / page).read_text(encoding="utf-8"))]
    assert not problems, "\n".join(problems)


def test_every_command_in_the_docs_parses(checker: Checker) -> None:
    commands = _page_commands()
    checked = [c for c in commands if tool_argv(c.argv) is not None]
    tools = {tool_argv(c.argv)[0] for c in checked}  # type: ignore[index]
    assert len(checked) >= 30 and tools == {"prbench", "lm_eval", "make"}, (len(checked), tools)
    problems = [p for c in checked for p in checker.problems(c)]
    assert not problems, "\n".join(problems)


def test_every_inline_command_parses(checker: Checker) -> None:
    commands = [c for page in PAGES
                for c in inline_commands(page, (ROOT / page).read_text(encoding="utf-8"))]
    assert len(commands) >= 12
    problems = [p for c in commands for p in checker.problems(c)]
    assert not problems, "\n".join(problems)


def test_the_docs_name_scorers_of_every_origin(checker: Checker) -> None:
    """The commands reach built-in, bundled-plugin and CONTRIBUTING-plugin scorers alike."""
    named = set()
    for command in _page_commands():
        for word in command.argv:
            named.update(re.findall(r"(?:^|,)scorer=([\w./-]+)", word))
    assert {"embedding-similarity", "length", "hf-classifier", "served-rm", "mymodel"} <= named
    unknown = [s for s in sorted(named)
               if any("unknown scorer" in p for p in checker._scorer(s, ""))]
    assert not unknown


#: the pages users read (CHANGELOG.md and the plugins', tasks' and data folders' READMEs included)
USER_PAGES = sorted({*LINK_PAGES, "ARCHITECTURE.md"})
#: an issue, pull request or internal run label: "issue 38", "issues 36-38", "PR #12", "stop 4",
#: "(#45)"; what the docs say must hold for the version in hand, not point at a tracker or a run
INTERNAL_LABEL = re.compile(
    r"\b(?:issues?|tickets?|PRs?|pull requests?|stops?)\s*#?\d+|(?:^|[\s(\[])#\d+\b", re.I)


def internal_labels(page: str, text: str) -> list[str]:
    """``page:line: label`` for each issue number or run label in ``text``, code blocks included."""
    return [f"{page}:{number}: {match.group(0).strip()!r}"
            for number, line in enumerate(text.split("\n"), 1)
            for match in INTERNAL_LABEL.finditer(line)]


def test_the_docs_name_no_issue_numbers_or_run_labels() -> None:
    problems = [problem for page in USER_PAGES
                for problem in internal_labels(page, (ROOT / page).read_text(encoding="utf-8"))]
    assert not problems, "\n".join(problems)


def test_issue_numbers_and_run_labels_are_found() -> None:
    text = ("| `make test` | 15 min | CI, issue 35's final check |\n"
            "measured for issues 36–38, see PR #12 (#45)\n"
            "before Stop 4; ## Heading; 3 issues, #fff colour, &#39; and #1f77b4 are fine\n")
    assert [p.rsplit(": ", 1)[1] for p in internal_labels("X.md", text)] == [
        "'issue 35'", "'issues 36'", "'PR #12'", "'(#45'", "'Stop 4'"]


def test_readme_and_contributing_stay_short() -> None:
    for page in ("README.md", "CONTRIBUTING.md"):
        lines = (ROOT / page).read_text(encoding="utf-8").count("\n")
        assert lines <= 250, (page, lines)


# -- the checks fail on planted faults ----------------------------------------------------------

PLANTED = """# Title

## A section

See [the section](#a-section), [usage](docs/usage.md#commands) and [gone](docs/gone.md), and
[a bad anchor](docs/usage.md#no-such-heading).

```bash
prbench eval --tasks personalized_rewardbench_sample --model_args scorer=length
prbench eval --tasks personalized_rewardbench_sample --model_args scorer=length --lmit 4
prbench validate sample --fromat json
prbench bon --model_args scorer=lenght -o out
prbench bon --model_args scorer=length,chunk_sise=8 -o out
lm_eval --tasks personalized_rewardbench_sampel --model prbench --model_args scorer=length
prbench eval --tasks personalized_rewardbench_sample --model_args scorer=length,chunk_size=many
for s in length oracle-rubric lenght; do
  prbench eval --tasks personalized_rewardbench_sample --model_args scorer=$s
done
prbench eval --tasks personalized_rewardbench_sample --metadata '{"prbench_data": sample}'
make tset
```
"""


def test_a_dead_link_and_a_bad_anchor_fail() -> None:
    problems = link_problems(ROOT / "PLANTED.md", PLANTED)
    assert len(problems) == 2, problems
    assert "docs/gone.md" in problems[0] and "does not exist" in problems[0]
    assert "#no-such-heading" in problems[1]


def test_misspelt_flags_ids_options_and_tasks_fail(checker: Checker) -> None:
    by_line = [(c.argv, checker.problems(c)) for c in shell_commands("PLANTED.md", PLANTED)]
    assert by_line[0][1] == []  # the good line passes
    expected = [
        "--lmit",                         # a misspelt lm-eval flag under prbench eval
        "--fromat",                       # a misspelt prbench flag
        "unknown",                        # a misspelt scorer id
        "chunk_sise",                     # a misspelt runtime option
        "personalized_rewardbench_sampel",  # a misspelt task
        "chunk_size",                     # a value of the wrong type
    ]
    for (argv, problems), word in zip(by_line[1:7], expected, strict=True):
        assert len(problems) == 1 and word in problems[0], (argv, problems)
    loop = by_line[7:10]
    assert [bool(p) for _argv, p in loop] == [False, False, True]  # $s expanded per value
    assert "lenght" in loop[2][1][0]
    assert "invalid JSON" in by_line[10][1][0]
    assert "tset" in by_line[11][1][0]


def test_a_key_twice_fails_and_braces_reach_the_scorer(checker: Checker) -> None:
    """A documented command that gives a key twice is a problem; one whose value holds ``{``
    parses and hands the value on as written, for ``prbench eval`` and plain ``lm_eval``."""
    page = (
        "```bash\n"
        "prbench eval --tasks personalized_rewardbench_sample --model_args "
        "'scorer=hf-classifier,pretrained=MODEL,profile_position=user,"
        "user_format=Q: {question} P: {profile}'\n"
        "lm_eval --model prbench --tasks personalized_rewardbench_sample --model_args "
        "'scorer=hf-classifier,pretrained=MODEL,system_format=Before: {profile}'\n"
        "prbench eval --tasks personalized_rewardbench_sample --model_args "
        "scorer=length,unit=words,unit=chars\n"
        "```\n"
    )
    problems = [checker.problems(c) for c in shell_commands("PLANTED.md", page)]
    assert problems[0] == [] and problems[1] == [], problems
    assert len(problems[2]) == 1 and "'unit' is given twice" in problems[2][0]
    braces = [c for c in _page_commands() if "user_format=" in " ".join(c.argv)
              or "system_format=" in " ".join(c.argv)]
    assert braces, "the docs show a user_format/system_format command"


def test_inline_commands_skip_synopses_and_keep_placeholders(checker: Checker) -> None:
    text = ("| command | what |\n|---|---|\n"
            "| `prbench eval --tasks T --model_args scorer=ID,K=V` | ok |\n"
            "| `prbench plugins [--all]` | a synopsis |\n"
            "| `prbench rank DATA -o OUT --buidler_args model=M` | a misspelt flag |\n\n"
            "| step | what |\n|---|---|\n| `prbench rl --resume` | names a flag |\n")
    commands = list(inline_commands("x.md", text))
    assert [c.argv[1] for c in commands] == ["eval", "rank"]
    assert checker.problems(commands[0]) == []
    (problem,) = checker.problems(commands[1])
    assert "--buidler_args" in problem and problem.startswith("x.md:5: ")


def test_commands_are_read_through_launchers_loops_and_continuations() -> None:
    text = """```bash
PRBENCH_LOAD_PLUGINS= .venv/bin/prbench plugins   # a comment
accelerate launch --num_processes 8 -m prbench.cli eval \\
    --tasks t --model_args scorer=length
prbench rl --policy_args model=$(python -c "print('x (y)')") --model_args scorer=length -o out
pip install -e . && lm_eval --tasks t | tee log
```"""
    argvs = [tool_argv(c.argv) for c in shell_commands("x.md", text)]
    assert argvs == [
        ("prbench", ["plugins"]),
        ("prbench", ["eval", "--tasks", "t", "--model_args", "scorer=length"]),
        ("prbench", ["rl", "--policy_args", "model=SUBSTITUTED", "--model_args", "scorer=length",
                     "-o", "out"]),
        None,
        ("lm_eval", ["--tasks", "t"]),
        None,
    ]
    assert [c.line for c in shell_commands("x.md", text)][:3] == [2, 3, 5]


def test_slugs_follow_github() -> None:
    assert slug("Served reward models (vLLM / SGLang)") == "served-reward-models-vllm--sglang"
    assert slug("Plain `lm_eval`") == "plain-lm_eval"
    assert slug("Does the reward model use *this* user? The profile-swap control") == (
        "does-the-reward-model-use-this-user-the-profile-swap-control")
    assert anchors("# A\n\n```bash\n# not a heading\n```\n\n## A\n") == {"a", "a-1"}


def test_an_old_component_option_form_in_the_docs_fails(checker: Checker) -> None:
    text = ("```bash\n"
            "prbench bon --model_args scorer=length --profile_args builder=none -o b\n"
            "prbench bon --model_args scorer=length --profile none -o b\n"
            "prbench rank sample -o r.jsonl --builder_args model=minilm\n"
            "prbench bon --scorer length -o b\n"
            "```\n")
    problems = [checker.problems(c) for c in shell_commands("OLD.md", text)]
    assert problems[0] == []
    for found in problems[1:]:
        assert len(found) == 1 and ": unrecognized arguments: --" in found[0], found
