"""``prbench plugins new NAME``: a new plugin package, written from the template plugin.

The template plugin (``plugins/prbench-plugin-template`` in a checkout; the same folder ships in
the wheel as ``prbench/_plugin_template``) is the only source: nothing here holds a second copy
of its files. The new package is the template's files, every name the template owns renamed
after ``NAME`` (kebab-case, e.g. ``my-rm``):

============================  ==================================  ==========================
in the template               in the new package                  what it names
============================  ==================================  ==========================
``prbench-plugin-template``   ``prbench-plugin-my-rm``            distribution, folder
``prbench_plugin_template``   ``prbench_plugin_my_rm``            import package
``template``                  ``my-rm`` (``my_rm`` beside ``_``)  entry point = namespace;
                                                                  task names, test file
``question-overlap``          ``my-rm``                           the scorer id
``question_overlap``          ``my_rm``                           test names
``QuestionOverlap``           ``MyRm``                            the scorer's and its
                                                                  options' classes
``last-posts``                ``my-rm-last-posts``                the profile builder id
``LastPosts``                 ``MyRmLastPosts``                   the builder's and its
                                                                  options' classes
============================  ==================================  ==========================

A name is renamed where it stands as a whole word, a word being letters and digits: ``-``,
``_``, ``/``, ``.`` and quotes separate words, so ``template_sample_last_posts`` becomes
``my_rm_sample_last_posts`` and ``template/question-overlap`` becomes ``my-rm/my-rm``; a class
name's part ends where a capital letter starts the next, so ``QuestionOverlapScorer`` becomes
``MyRmScorer`` (the scorer a new plugin starts from is already its own, to rewrite in place).
All names are renamed in one pass, so a ``NAME`` that contains ``template`` is not renamed
twice. The template therefore uses the word ``template`` for its own name only (its prose says
"this plugin"), and a new registration or class in it needs a row above:
``tests/test_plugin_scaffold.py`` fails when a name the template registers, or a class it
defines, survives the renaming.

The package is written to a hidden folder beside the destination and renamed into place, so an
interrupted run leaves no half-written plugin; an existing destination is never touched.

Why no template engine (cookiecutter, copier): those render a template written with
placeholders, which is not itself an installable plugin; here the template is a working plugin
that ``make setup`` installs, its tests run and CI builds into a wheel, so the renaming is a
table of whole-word names, not a second, placeholder copy of it (and no new dependency).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from prbench.errors import PrbenchUserError
from prbench.outputs import check_output_dir, open_atomic, write_failure, write_text

__all__ = [
    "PluginNames",
    "ScaffoldError",
    "check_name",
    "constraints_file",
    "rename",
    "template_dir",
    "template_files",
    "write_plugin",
]

#: a plugin name: lowercase words of letters and digits joined by single hyphens
_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
#: what no template file needs: caches and build output left by tests and editable installs
_SKIP_DIRS = frozenset({"__pycache__", "build", "dist", ".pytest_cache", ".ruff_cache", ".git"})
_SKIP_SUFFIXES = (".pyc", ".pyo", ".egg-info", ".dist-info")
#: the template's own names, matched as whole words (letters and digits around them end a word)
_TEMPLATE_WORDS = re.compile(
    r"(?<![A-Za-z0-9])(?:(?:(?P<scorer>question-overlap)|(?P<scorer_snake>question_overlap)"
    r"|(?P<builder>last-posts)|(?P<name>template))(?![A-Za-z0-9])"
    r"|(?:(?P<scorer_class>QuestionOverlap)|(?P<builder_class>LastPosts))(?![a-z0-9]))"
)


class ScaffoldError(PrbenchUserError, ValueError):
    """A plugin name that cannot be used, or a destination that exists."""


@dataclass(frozen=True)
class PluginNames:
    """Every name of a new plugin, derived from its kebab-case ``name``."""

    name: str

    @property
    def snake(self) -> str:
        """``name`` with underscores, for Python modules and lm-eval task names."""
        return self.name.replace("-", "_")

    @property
    def distribution(self) -> str:
        """The distribution (and folder) name: ``prbench-plugin-<name>``."""
        return f"prbench-plugin-{self.name}"

    @property
    def module(self) -> str:
        """The import package: ``prbench_plugin_<name with underscores>``."""
        return f"prbench_plugin_{self.snake}"

    @property
    def camel(self) -> str:
        """``name`` in CamelCase, for class names: ``my-rm`` -> ``MyRm``."""
        return "".join(part[:1].upper() + part[1:] for part in self.name.split("-"))

    @property
    def scorer(self) -> str:
        """The id of the scorer: the plugin's name."""
        return self.name

    @property
    def builder(self) -> str:
        """The id of the worked-example profile builder."""
        return f"{self.name}-last-posts"


def check_name(name: str) -> PluginNames:
    """The names of a plugin called ``name``, or one error saying what to write instead.

    Raises:
        ScaffoldError: ``name`` is not kebab-case (lowercase letters and digits, single hyphens,
            a letter first) or is a distribution/module name instead of the plugin's own.
    """
    for prefix in ("prbench-plugin-", "prbench_plugin_"):
        if name.startswith(prefix) and len(name) > len(prefix):
            raise ScaffoldError(
                f"plugin name {name!r}: give the model's name only, e.g. "
                f"`prbench plugins new {name[len(prefix):].replace('_', '-')}` (the package is "
                f"named prbench-plugin-<name>)"
            )
    if not _NAME.fullmatch(name):
        fixed = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        hint = (f"; e.g. {fixed!r}" if fixed and fixed != name and _NAME.fullmatch(fixed)
                else "")
        raise ScaffoldError(
            f"plugin name {name!r}: use lowercase letters and digits in words joined by single "
            f"hyphens, a letter first (it becomes the scorer id, the package "
            f"prbench-plugin-<name> and the module prbench_plugin_<name>){hint}"
        )
    return PluginNames(name)


def template_dir() -> Path:
    """The template plugin's folder: in the wheel, or in the source checkout.

    Raises:
        ScaffoldError: neither exists (a broken install).
    """
    package = Path(__file__).resolve().parent
    for candidate in (package / "_plugin_template",
                      package.parent / "plugins" / "prbench-plugin-template"):
        if (candidate / "pyproject.toml").is_file():
            return candidate
    raise ScaffoldError(
        f"the template plugin is missing: looked for {package / '_plugin_template'} (installed "
        f"wheel) and {package.parent / 'plugins' / 'prbench-plugin-template'} (source "
        "checkout); reinstall prbench"
    )


def constraints_file() -> Path | None:
    """The path of prbench's ``constraints-cpu.txt`` (it pins torch's version), if one is seen.

    The source checkout's root holds it (the template is then ``plugins/prbench-plugin-template``
    in it); an installed wheel does not, so the working folder (a checkout's root) is tried next.
    ``None`` when neither has it.
    """
    root = template_dir().parents[1]
    for candidate in (root / "constraints-cpu.txt", Path.cwd() / "constraints-cpu.txt"):
        if candidate.is_file():
            return candidate
    return None


def _skipped(rel: Path) -> bool:
    return any(part in _SKIP_DIRS or part.endswith(_SKIP_SUFFIXES) or part.startswith(".")
               for part in rel.parts)


def template_files() -> list[Path]:
    """The template's files, relative to its folder, sorted; caches and build output left out."""
    root = template_dir()
    return sorted(p.relative_to(root) for p in root.rglob("*")
                  if p.is_file() and not _skipped(p.relative_to(root)))


def rename(text: str, names: PluginNames) -> str:
    """``text`` with every name of the template replaced by the new plugin's (see the table)."""
    def _one(match: re.Match[str]) -> str:
        fixed = {"scorer": names.scorer, "scorer_snake": names.snake,
                 "scorer_class": names.camel, "builder": names.builder,
                 "builder_class": f"{names.camel}LastPosts"}
        for group, value in fixed.items():
            if match.group(group):
                return value
        start, end = match.span()
        beside = text[start - 1:start] + text[end:end + 1]
        return names.snake if "_" in beside else names.name

    return _TEMPLATE_WORDS.sub(_one, text)


def write_plugin(name: str, destination: str | Path | None = None) -> tuple[Path, list[Path]]:
    """Write the template plugin renamed after ``name`` to ``destination``.

    Args:
        name: the plugin's name (checked by :func:`check_name`).
        destination: the folder to create (default ``prbench-plugin-<name>`` in the working
            folder); it must not exist.

    Returns:
        The folder written and its files, relative to it.

    Raises:
        ScaffoldError: a bad name, or a destination that exists.
        OutputPathError: the destination's folder cannot be written.
        OutputWriteError: a file could not be written (nothing is left behind).
    """
    names = check_name(name)
    root = template_dir()
    target = Path(destination) if destination else Path(names.distribution)
    if target.exists() or target.is_symlink():
        raise ScaffoldError(
            f"{target} exists already; prbench plugins new writes a new folder only: remove it, "
            "or choose another name or -o/--output_path"
        )
    check_output_dir(target, flag="-o/--output_path")
    target.parent.mkdir(parents=True, exist_ok=True)
    files = template_files()
    # a hidden folder beside the target (created with the umask's mode), renamed into place
    staging = target.parent / f".{target.name[:80]}.{os.getpid()}.{secrets.token_hex(4)}"
    written: list[Path] = []
    try:
        staging.mkdir()
        for rel in files:
            out = Path(rename(rel.as_posix(), names))
            data = (root / rel).read_bytes()
            try:
                text = rename(data.decode("utf-8"), names)
            except UnicodeDecodeError:  # not text: copied as it is
                with open_atomic(staging / out, "wb") as handle:
                    handle.write(data)
            else:
                write_text(staging / out, text)
            written.append(out)
        if target.exists():  # made while we wrote: never replaced
            raise ScaffoldError(f"{target} appeared while the plugin was written; nothing changed")
        staging.rename(target)
    except OSError as exc:
        if isinstance(exc, PrbenchUserError):
            raise
        raise write_failure(target, exc) from None
    finally:
        if staging.exists():
            with contextlib.suppress(OSError):
                shutil.rmtree(staging)
    return target, written
