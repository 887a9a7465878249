"""The ``prbench`` command.

Subcommands live in their own modules, listed in :data:`COMMANDS`; each exposes
``add_arguments(parser)`` and ``run(args) -> int`` and is cheap to import (no torch). A module
that sets ``ACCEPTS_EXTRA_ARGS = True`` receives unparsed arguments in ``args.extra_args`` (used by
``prbench eval`` to pass lm-eval's own flags through).

Every subcommand takes ``--plugin FILE`` and ``--no_progress`` (progress bars off; they are also
off when standard error is not a terminal, see :mod:`prbench.progress`). Bad input, bad options and
unknown or ambiguous component ids end the command with one ``error:`` line and exit 1, never a
traceback.

One command-line style, the same for every subcommand because every parser is a
:class:`CommandParser` (subparsers inherit the class): each long flag is accepted with dashes or
underscores (``--max-steps`` and ``--max_steps``) and ``--help`` shows the underscore spelling, as
lm-eval does; ``--help`` shows every default (:class:`HelpFormatter`); a command's output folder or
file is ``-o/--output_path``. A component and its options are given as
``--<role>_args KEY=ID,K=V,...`` in every command, as lm-eval's ``--model_args``: a scorer as
``--model_args scorer=ID,K=V`` (:func:`prbench.commands.add_scorer_argument`,
:func:`prbench.commands.scorer_specs`), a judge, profile builder, pair generator or sampling
policy as ``--judge_args judge=ID,...``, ``--profile_args builder=ID,...``,
``--generator_args generator=ID,...``, ``--policy_args model=PATH,...``
(:data:`prbench.commands.ROLES`, :func:`prbench.commands.add_component_argument`,
:func:`prbench.commands.component_args`). A flag the command does not have is one ``error:``
line that suggests the flag meant (exit 2, argparse's code for a command-line mistake).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import io
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from prbench import __version__
from prbench.commands import spellings, unknown_flags_hint
from prbench.errors import PrbenchUserError, one_line

#: a reST role (``:mod:`x```, ``:class:`~a.B```), a reST literal (````x````), a markdown code span
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`]*)`")
_LITERAL = re.compile(r"``([^`]*)``")
_CODE = re.compile(r"`([^`\n]*)`")
#: argparse's message for a value not among an argument's choices, and a quoted choice in it
_INVALID_CHOICE = re.compile(r"argument \S+: invalid choice: '([^']*)' \(choose from (.*)\)$")
_QUOTED = re.compile(r"'([^']*)'")


def plain_text(text: str) -> str:
    """Text for a terminal, without the markup docstrings and help strings are written in.

    A reST role shows its target (``:mod:`prbench.progress``` -> ``prbench.progress``); a reST
    literal or a code span shows its words in single quotes (```` ``prbench rank DATA -o OUT`` ````
    -> ``'prbench rank DATA -o OUT'``).
    """
    text = _ROLE.sub(r"\1", text)
    return _CODE.sub(r"'\1'", _LITERAL.sub(r"'\1'", text))


def command_summary(doc: str | None, name: str) -> str:
    """A command's line in ``prbench --help``: its docstring's first paragraph, in plain text.

    The paragraph is taken whole (joined across its lines), so the line never stops mid-sentence.
    """
    first = (doc or "").strip().split("\n\n", 1)[0]
    return plain_text(" ".join(first.split())).rstrip(".") or name


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions kept as written, every default shown, one spelling per flag, no markup.

    A default is appended as ``(default: X)`` unless the help already states it, the default is
    empty (``None``, ``""``, ``[]``) or the flag is a switch. Only the underscore spelling of a
    long flag is listed (the dash spelling works too, see :class:`CommandParser`). Descriptions,
    epilogs and help strings are shown by :func:`plain_text` (no reST roles or backticks).
    """

    _SWITCHES = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction,
                 argparse._VersionAction, argparse._CountAction, argparse._AppendConstAction)

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain_text(text))

    def _get_help_string(self, action: argparse.Action) -> str:
        text = plain_text(action.help or "")
        if "%(default)" in text or "(default" in text or "default:" in text:
            return text
        if isinstance(action, self._SWITCHES) or action.default in (None, "", [], ()):
            return text
        if action.default is argparse.SUPPRESS:
            return text
        if not action.option_strings and action.nargs not in ("?", "*"):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"

    def _format_action_invocation(self, action: argparse.Action) -> str:
        hidden = getattr(action, "prbench_hidden", ())
        if hidden:
            shown = copy.copy(action)
            shown.option_strings = [o for o in action.option_strings if o not in hidden]
            return super()._format_action_invocation(shown)
        return super()._format_action_invocation(action)


class CommandParser(argparse.ArgumentParser):
    """The parser of ``prbench`` and of each subcommand: one command-line style everywhere.

    Before it parses or prints help, every long flag gets its other spelling (``--max_steps`` and
    ``--max-steps`` both parse; help lists the underscore one). Prefix abbreviations are off (an
    abbreviation of one of lm-eval's flags must reach lm-eval unchanged under ``prbench eval``).
    A mistake on the command line is one ``error:`` line (exit 2, argparse's code) that suggests
    the flag meant (:func:`flag_hint`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def add_spellings(self) -> None:
        """Give every long flag both spellings (idempotent)."""
        for action in list(self._actions):
            if getattr(action, "prbench_spelled", False) or not action.option_strings:
                continue
            action.prbench_spelled = True  # type: ignore[attr-defined]
            short = [o for o in action.option_strings if not o.startswith("--")]
            shown: list[str] = []
            hidden: list[str] = []
            for flag in action.option_strings:
                if not flag.startswith("--"):
                    continue
                under, dash = spellings(flag)
                for alt, bucket in ((under, shown), (dash, hidden)):
                    owner = self._option_string_actions.get(alt)
                    if owner is not None and owner is not action:
                        continue  # another flag already owns this spelling
                    if alt not in shown and alt not in hidden:
                        bucket.append(alt)
                        self._option_string_actions[alt] = action
            hidden = [h for h in hidden if h not in shown]
            action.option_strings = [*short, *shown, *hidden]
            action.prbench_hidden = tuple(hidden)  # type: ignore[attr-defined]

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:  # noqa: D102
        self.add_spellings()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:  # noqa: D102
        self.add_spellings()
        return super().format_help()

    def format_usage(self) -> str:  # noqa: D102
        self.add_spellings()
        return super().format_usage()

    def error(self, message: str) -> Any:
        """One ``error:`` line naming each flag by its shown spellings, with the fix; exit 2.

        An unrecognized flag gets the close match among this command's flags, or the form that
        replaced a flag of an earlier draft (:data:`prbench.commands.REMOVED_FLAGS`).
        """
        for action in self._actions:
            hidden = getattr(action, "prbench_hidden", ())
            if hidden:
                shown = [o for o in action.option_strings if o not in hidden]
                message = message.replace("/".join(action.option_strings), "/".join(shown))
        if message.startswith("unrecognized arguments: "):
            words = message.removeprefix("unrecognized arguments: ").split()
            message += unknown_flags_hint(words, self.flags())
        choice = _INVALID_CHOICE.match(message)
        if choice:  # a misspelt command or choice: the close match
            from prbench.options import suggest

            message += suggest(choice.group(1), _QUOTED.findall(choice.group(2)))
        self.exit(2, f"error: {self.prog}: {message} (see '{self.prog} --help')\n")

    def flags(self) -> list[str]:
        """Every flag this parser shows in ``--help`` (the underscore spellings)."""
        self.add_spellings()
        return [o for a in self._actions for o in a.option_strings
                if o not in getattr(a, "prbench_hidden", ())]


#: subcommand -> module with ``add_arguments(parser)`` and ``run(args) -> int``
COMMANDS: dict[str, str] = {
    "build": "prbench.commands.build",
    "bon": "prbench.commands.bon",
    "correlate": "prbench.commands.correlate",
    "eval": "prbench.commands.eval",
    "plugins": "prbench.commands.plugins",
    "prefs": "prbench.commands.prefs",
    "rank": "prbench.commands.rank",
    "report": "prbench.commands.report",
    "rl": "prbench.commands.rl",
    "scorers": "prbench.commands.scorers",
    "serve": "prbench.commands.serve",
    "sweep": "prbench.commands.sweep",
    "validate": "prbench.commands.validate",
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = CommandParser(
        prog="prbench",
        description="Personalized RewardBench: does a reward model prefer, for one user, the "
        "answer that covers what this user asked for?",
    )
    parser.add_argument("--version", action="version", version=f"prbench {__version__}")
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="PATH",
        help="load a plugin from a Python file (after installed plugins); repeatable",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        summary = command_summary(module.__doc__, name)
        p = sub.add_parser(name, help=summary, description=(module.__doc__ or "").strip())
        p.add_argument(
            "--plugin",
            action="append",
            default=[],
            dest="plugin_files",
            metavar="PATH",
            help="load a plugin from a Python file (after installed plugins); repeatable",
        )
        module.add_arguments(p)
        p.add_spellings()
        if "--no_progress" not in p._option_string_actions:  # one flag, whatever the command
            p.add_argument(
                "--no_progress",
                action="store_true",
                help="no progress bars (they are also off when stderr is not a terminal)",
            )
        p.set_defaults(_module=module, _parser=p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``prbench`` command; returns the exit code."""
    try:
        return _main(argv)
    except KeyboardInterrupt:  # the user's Ctrl-C, at any point: also while commands are imported
        print("interrupted", file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    if extra and not getattr(args._module, "ACCEPTS_EXTRA_ARGS", False):
        args._parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra_args = extra
    args.argv = args_list[args_list.index(args.command) + 1:] if args.command in args_list else []
    args.plugin = [*args.plugin, *getattr(args, "plugin_files", [])]
    from prbench.interrupts import watch_sigint

    try:
        # Ctrl-C told apart from a plugin's KeyboardInterrupt; in-process callers (tests,
        # notebooks) get their environment and tqdm back after the command
        with quiet_progress(bool(getattr(args, "no_progress", False))), watch_sigint():
            check_plugin_files(args)
            check_outputs(args)
            return int(args._module.run(args) or 0)
    except PrbenchUserError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 1


class _Unset:
    """A value no option takes: marks the options a command line did not set."""


def eval_flags_given(argv: Sequence[str]) -> list[str]:
    """The ``prbench eval`` options that ``argv`` sets, by their argparse dest.

    ``argv`` goes through ``prbench eval``'s own parser, so every spelling of an option is found
    (``-a``, ``--model-args``, ``--flag=value``, the abbreviations argparse accepts), not only the
    one a string comparison would catch. (``prbench sweep`` refuses ``eval_args`` that set what
    the sweep sets itself with it.)

    Args:
        argv: arguments as they would follow ``prbench eval``.

    Returns:
        The dests (``model_args``, ``output_path``, ...) the arguments set, in parser order.

    Raises:
        prbench.options.OptionsError: the arguments do not parse, or name a flag ``prbench
            eval`` does not take.
    """
    from prbench.commands.eval import undeclared_flags_problem
    from prbench.options import OptionsError

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    eval_parser = sub.choices["eval"]
    actions = [a for a in eval_parser._actions
               if a.dest not in (argparse.SUPPRESS, "help") and a.option_strings]
    dests = [a.dest for a in actions]
    unset = _Unset()
    # a list-collecting flag starts from None (argparse adds to what is there)
    start = {a.dest: None if isinstance(a, argparse._ExtendAction | argparse._AppendAction)
             else unset for a in actions}
    noise = io.StringIO()
    try:
        with contextlib.redirect_stderr(noise), contextlib.redirect_stdout(io.StringIO()):
            ns, rest = eval_parser.parse_known_args(list(argv), argparse.Namespace(**start))
    except SystemExit:
        said = [ln for ln in noise.getvalue().splitlines() if ln.strip()]
        why = said[-1].split("error:", 1)[-1].strip() if said else "they do not parse"
        raise OptionsError(f"not valid `prbench eval` arguments: {why}") from None
    problem = undeclared_flags_problem(rest, eval_parser.flags())  # type: ignore[attr-defined]
    if problem:
        raise OptionsError(problem)
    return [dest for dest in dests if getattr(ns, dest) not in (unset, None)]


def check_plugin_files(args: argparse.Namespace) -> None:
    """Load the ``--plugin`` files before the command runs; one that does not load whole ends it.

    ``prbench plugins`` is left to list them with their problems (it exits 1 then).

    Raises:
        PluginError: a file that is missing, a folder, fails to import, or drops a registration.
    """
    if not args.plugin or args.command == "plugins":
        return
    from prbench.plugins import PluginError, get_registry

    trouble = get_registry(args.plugin).file_trouble()
    if trouble:
        raise PluginError(trouble)


def check_outputs(args: argparse.Namespace) -> None:
    """Check a command's output locations before it does any work.

    A command module declares ``OUTPUTS``: ``{dest: "dir" | "file"}`` for the arguments that name
    where it writes (``{"output_path": "dir"}``); each one given is checked by
    :func:`prbench.outputs.check_output_dir` / :func:`~prbench.outputs.check_output_file`.

    Raises:
        OutputPathError: a location that is a file where a folder is needed (or the reverse), not
            creatable or not writable.
    """
    from prbench.outputs import check_output_dir, check_output_file

    for dest, kind in getattr(args._module, "OUTPUTS", {}).items():
        value = getattr(args, dest, None)
        if not value:
            continue
        flag = "-o/--output_path" if dest == "output_path" else "--" + dest
        (check_output_dir if kind == "dir" else check_output_file)(value, flag=flag)


@contextlib.contextmanager
def quiet_progress(no_progress: bool) -> Iterator[None]:
    """Apply ``--no_progress`` for one command: prbench's bars off, and the libraries' bars.

    prbench's own bars read ``PRBENCH_PROGRESS`` (see :mod:`prbench.progress`). The libraries'
    tqdm bars are off for ``--no_progress`` and without a terminal through the environment
    (:func:`prbench.progress.library_bars_off`); nothing of tqdm is replaced. Everything is put
    back when the command ends.
    """
    from prbench.progress import (
        ENV_VAR,
        disable_progress,
        library_bars_off,
        progress_enabled,
        restored_env,
    )

    with restored_env(ENV_VAR):
        if no_progress:
            disable_progress()
        if progress_enabled():
            yield
            return
        with library_bars_off():
            yield


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
