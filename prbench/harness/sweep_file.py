"""The sweep file: a grid of scorers x conditions, read and checked before any cell runs.

A sweep file (YAML) lists the scorers (rows of the final table) and the conditions (columns);
every scorer is evaluated under every condition. A scorer entry is what ``prbench eval`` takes as
``--model_args`` (plus a row name and, for ``--dry_run``, size hints); a condition entry is what
it takes as ``--tasks`` and ``--metadata``::

    output_path: results/sweep        # default of -o/--output_path
    limit: 10                         # optional, for every cell (overridden by --limit)
    eval_args: ["--batch_size", "8"]  # optional, more `prbench eval` flags for every cell
    metadata: {}                      # optional, merged under every condition's metadata
    resources: {gpus: 1, cpus: 4, memory: 32}   # optional, --executor ray only (memory in GiB)
    scorers:
      - name: length                  # row label (default: the scorer id)
        model_args: {scorer: length}  # or the string "scorer=length,unit=words"
        estimate: {params_b: 8.0, tokens_per_s: 20000, generated_tokens: 0}   # --dry_run only
        stand_in: "what stands in for what"   # optional: labels the row STAND-IN in every table
        resources: {gpus: 0}          # optional, over the file's resources (--executor ray)
    conditions:
      - name: own
        tasks: personalized_rewardbench_sample          # a name or a list of names
        metadata: {prbench_profile_k: 5}                # optional
        stand_in: "..."                                 # optional, as for a scorer

:func:`load_sweep` reads it into a :class:`Sweep` whose :meth:`Sweep.cells` are what
:mod:`prbench.harness.sweep` runs; every problem is one :class:`SweepFileError` naming the field.

The file's shape (which keys, of which types, which required) is a pydantic model
(:func:`_sweep_model`: strict types, ``extra="forbid"`` at every level), its first error written
as the line of the field (:data:`_FIELD_RULES`). What stays prbench's own is what is not a
type: PyYAML's reading without aliases (an alias bomb must be refused while parsing, before any
model sees the data), metadata that JSON cannot carry (a YAML date, a key that is not text: the
line says to quote it), ``eval_args`` read by ``prbench eval``'s own parsers, a ``model_args``
value with a comma, the default names, unique names and twin cells.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from prbench.hashing import json_sha256
from prbench.issues import shown_path
from prbench.records import DataSourceError
from prbench.typed_input import STRICT, first_error, place

SWEEP_KEYS = ("output_path", "limit", "eval_args", "metadata", "scorers", "conditions",
              "description", "resources")
SCORER_KEYS = ("name", "model_args", "estimate", "stand_in", "resources")
CONDITION_KEYS = ("name", "tasks", "metadata", "description", "stand_in")
ESTIMATE_KEYS = ("params_b", "tokens_per_s", "generated_tokens")
#: what a cell asks of a Ray node (``--executor ray``); memory in GiB
RESOURCE_KEYS = ("gpus", "cpus", "memory")
#: the ``prbench eval`` options the sweep sets itself (by argparse dest); set in ``eval_args``
#: under any spelling they are an error
OWN_OPTIONS = ("tasks", "model_args", "output_path", "metadata", "limit", "log_samples")


class SweepFileError(DataSourceError):
    """A sweep file that cannot be read or is not a valid sweep (the message names the field)."""


@dataclasses.dataclass(frozen=True)
class Scorer:
    """One row of the grid: a scorer with its options."""

    name: str
    model_args: str
    estimate: dict[str, float]
    stand_in: str = ""  # what stands in for what the paper used ("": nothing)
    #: what its cells ask of a Ray node (the file's ``resources:`` under the scorer's); only the
    #: keys given (the executor fills in its defaults). Not part of a cell's definition: where a
    #: cell runs does not change its results.
    resources: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Condition:
    """One column group of the grid: tasks plus metadata."""

    name: str
    tasks: tuple[str, ...]
    metadata: dict[str, Any]
    stand_in: str = ""  # what stands in for what the paper used ("": nothing)


@dataclasses.dataclass(frozen=True)
class Cell:
    """One (scorer, condition) evaluation."""

    scorer: Scorer
    condition: Condition
    limit: float | None
    eval_args: tuple[str, ...]

    @property
    def key(self) -> str:
        """``<scorer>/<condition>``."""
        return f"{self.scorer.name}/{self.condition.name}"

    def definition(self) -> dict[str, Any]:
        """What makes the cell (a finished cell made from another definition runs again)."""
        return {
            "model_args": self.scorer.model_args, "tasks": list(self.condition.tasks),
            "metadata": self.condition.metadata, "limit": self.limit,
            "eval_args": list(self.eval_args),
        }

    def fingerprint(self) -> str:
        """A hash of :meth:`definition`."""
        return json_sha256(self.definition(), ascii=True)[:16]


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A parsed sweep file."""

    path: Path
    output_path: str | None
    scorers: tuple[Scorer, ...]
    conditions: tuple[Condition, ...]
    limit: float | None
    eval_args: tuple[str, ...]

    def cells(self, limit: float | None = None) -> list[Cell]:
        """Every cell, scorer by scorer (``limit`` overrides the file's)."""
        use = self.limit if limit is None else limit
        return [Cell(s, c, use, self.eval_args) for s in self.scorers for c in self.conditions]

    def stand_ins(self) -> dict[str, str]:
        """Row or column name -> what stands in there for what the paper used."""
        return {x.name: x.stand_in for x in (*self.scorers, *self.conditions) if x.stand_in}


_ALL_KEYS = {*SWEEP_KEYS, *SCORER_KEYS, *CONDITION_KEYS, *ESTIMATE_KEYS, *RESOURCE_KEYS}

#: the message of each field whose value is wrong, by its name (``estimate.`` and ``resources.``:
#: any key of those mappings); ``{value}`` is what was given
_FIELD_RULES = {
    "scorers": "must be a non-empty list",
    "conditions": "must be a non-empty list",
    "eval_args": "must be a list of strings",
    "metadata": "must be a mapping",
    "model_args": "must be a non-empty mapping or string (e.g. {{scorer: length}})",
    "tasks": "must be a task name or a list",
    "stand_in": "must be text",
    "limit": "must be a positive number, got {value!r}",
    "estimate.": "must be a number",
    "resources.gpus": "must be a number >= 0 (a count), got {value!r}",
    "resources.cpus": "must be a number >= 0 (a count), got {value!r}",
    "resources.memory": "must be a number >= 0 (GiB), got {value!r}",
}


@functools.cache
def _sweep_model() -> Any:
    """The pydantic model of a sweep file (built on first use: pydantic is not imported before).

    Strict types and ``extra="forbid"`` at every level; what YAML allows and the file format
    forgives stays as it was: an empty ``metadata``, ``eval_args``, ``estimate`` or ``stand_in``
    is none, a scorer's or condition's ``name`` and the ``output_path`` are any value (read as
    text), a ``description`` is anything.
    """
    from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model

    def none_if_empty(value: Any) -> Any:
        return value or None

    config = ConfigDict(**STRICT, protected_namespaces=())  # type: ignore[typeddict-item]
    number = Annotated[float, Field(ge=0)]
    mapping = Annotated[dict[Any, Any] | None, BeforeValidator(none_if_empty)]
    text = Annotated[str, BeforeValidator(lambda v: v or "")]

    # a key given as null is no number: the default None is never validated, only a given value
    Resources = create_model("Resources", __config__=config,
                             **{key: (number, None) for key in RESOURCE_KEYS})
    Estimate = create_model("Estimate", __config__=config,
                            **{key: (number, None) for key in ESTIMATE_KEYS})

    class ScorerEntry(BaseModel):
        model_config = config
        name: Any = None
        model_args: str | dict[Any, Any]
        estimate: Annotated[Estimate | None, BeforeValidator(none_if_empty)] = None  # type: ignore[valid-type]
        stand_in: text = ""
        resources: Resources | None = None  # type: ignore[valid-type]

    class ConditionEntry(BaseModel):
        model_config = config
        name: Any = None
        tasks: str | Annotated[list[str], Field(min_length=1)]
        metadata: mapping = None
        description: Any = None
        stand_in: text = ""

    class SweepFile(BaseModel):
        model_config = config
        output_path: Any = None
        limit: Annotated[float, Field(gt=0)] | None = None
        eval_args: Annotated[list[str] | None, BeforeValidator(none_if_empty)] = None
        metadata: mapping = None
        scorers: Annotated[list[ScorerEntry], Field(min_length=1)]
        conditions: Annotated[list[ConditionEntry], Field(min_length=1)]
        description: Any = None
        resources: Resources | None = None  # type: ignore[valid-type]

    return SweepFile


def _file_error(error: Mapping[str, Any], path: Path) -> SweepFileError:
    """One pydantic error as the sweep file's line (the field, what it must be)."""
    from prbench.options import suggest

    def known(loc: Sequence[Any]) -> list[Any]:  # without the names pydantic gives union arms
        return [p for p in loc if isinstance(p, int) or p in _ALL_KEYS]

    kind, value = error["type"], error.get("input")
    if kind == "extra_forbidden":
        loc, key = known(error["loc"][:-1]), str(error["loc"][-1])
        names = [p for p in loc if isinstance(p, str)]
        keys = {"scorers": SCORER_KEYS, "conditions": CONDITION_KEYS, "estimate": ESTIMATE_KEYS,
                "resources": RESOURCE_KEYS}.get(names[-1] if names else "", SWEEP_KEYS)
        return SweepFileError(where_in(path, f"{place(loc) or 'the file'}: unknown key "
                                             f"{key!r}{suggest(key, keys)}; allowed: "
                                             + ", ".join(keys)))
    loc = known(error["loc"])
    if kind in ("model_type", "model_attributes_type"):
        return SweepFileError(where_in(path, f"{place(loc) or 'the file'} must be a mapping, "
                                             f"got {type(value).__name__}"))
    for j in range(len(loc) - 1, -1, -1):  # the innermost field with a rule
        if isinstance(loc[j], str):
            above = [p for p in loc[:j] if isinstance(p, str)][-1:]
            parent = f"{above[0]}." if above and above[0] in ("estimate", "resources") else ""
            rule = _FIELD_RULES.get(parent + loc[j]) or _FIELD_RULES.get(parent)
            if rule:
                return SweepFileError(where_in(path, f"{place(loc[: j + 1])} "
                                                     + rule.format(value=value)))
    return SweepFileError(where_in(path, f"{place(loc) or 'the file'}: {error['msg']}"))


def slug(name: str) -> str:
    """A file-name-safe form of a row or column name."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name).strip("_") or "_"


def where_in(path: Path, field: str) -> str:
    """``<sweep file>: <field and problem>``, the form of every sweep file error."""
    return f"{path}: {field}"


def _names(items: Sequence[Any], path: Path, what: str) -> None:
    seen: set[str] = set()
    for item in items:
        if slug(item.name) in seen:
            raise SweepFileError(where_in(path, f"two {what} named {item.name!r} (names must be "
                                              "unique, also as file names)"))
        seen.add(slug(item.name))


def model_args_text(value: Any, path: Path, where: str) -> str:
    """``--model_args`` text from a mapping or a string; a value with a comma is refused."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    if not isinstance(value, dict) or not value:
        raise SweepFileError(where_in(path, f"{where}.model_args must be a non-empty mapping or "
                                          "string (e.g. {scorer: length})"))
    parts = []
    for key, val in value.items():
        text = json.dumps(val) if isinstance(val, dict | list) else str(val).lower() \
            if isinstance(val, bool) else str(val)
        if "," in text:
            raise SweepFileError(where_in(path, f"{where}.model_args.{key}: a value with a comma "
                                              "cannot pass through --model_args"))
        parts.append(f"{key}={text}")
    return ",".join(parts)


def _sweep_loader() -> type:
    """PyYAML's safe loader without aliases or repeated keys, each refused where it is read.

    An alias repeats a node without copying its text, so a few lines of nested aliases expand to
    billions of values (an alias-expansion bomb) before any check could run; a sweep file has no
    need of them. A key given twice in one mapping (``scorers:`` twice, ``{scorer: length,
    scorer: random}``) would keep only the last value and drop the rest without a word; the
    command line refuses a flag or option given twice, and so does the sweep file.
    """
    import yaml

    class SweepLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None, None, f"an alias (*{event.anchor}) is not allowed in a sweep file: "
                    "write the value out", event.start_mark)
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                first: dict[Any, int] = {}
                for key_node, _value_node in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    line = key_node.start_mark.line + 1
                    try:
                        if key in first:
                            raise yaml.constructor.ConstructorError(
                                None, None, f"the key {key!r} is given twice (first on line "
                                f"{first[key]}); the second would replace the first: keep one",
                                key_node.start_mark)
                        first[key] = line
                    except TypeError:  # an unhashable key: the constructor refuses it
                        continue
            return super().construct_mapping(node, deep=deep)

    return SweepLoader


def _check_json(value: Any, path: Path, where: str) -> None:
    """Refuse what JSON cannot carry (``--metadata`` is JSON), naming the field.

    A key that is not a string, a YAML date or any other non-JSON value would end the run in a
    traceback when the metadata is written as JSON.
    """
    if isinstance(value, dict):
        for key, val in value.items():
            if not isinstance(key, str):
                raise SweepFileError(where_in(path, f"{where}: the key {key!r} is not a "
                                                  f"string ({type(key).__name__}); keys must be "
                                                  f"strings (quote it: '{key}')"))
            _check_json(val, path, f"{where}.{key}")
    elif isinstance(value, list):
        for i, val in enumerate(value):
            _check_json(val, path, f"{where}[{i}]")
    elif value is not None and not isinstance(value, str | int | float | bool):
        raise SweepFileError(where_in(path, f"{where}: {value!s} is a YAML "
                                          f"{type(value).__name__}, not a JSON value; quote it "
                                          f"('{value!s}') to pass it as text"))


def _check_eval_args(eval_args: Sequence[str], path: Path) -> None:
    """Parse ``eval_args`` as ``prbench eval`` does; refuse options the sweep sets itself."""
    from prbench.cli import eval_flags_given  # the `prbench eval` parser itself
    from prbench.options import OptionsError

    try:
        given = eval_flags_given(eval_args)
    except OptionsError as exc:
        raise SweepFileError(where_in(path, f"eval_args {list(eval_args)}: {exc}")) from None
    own = [f"--{dest}" for dest in given if dest in OWN_OPTIONS]
    if own:
        raise SweepFileError(where_in(path, f"eval_args {list(eval_args)}: {', '.join(own)} "
                                          f"{'is' if len(own) == 1 else 'are'} set by the sweep "
                                          "itself (use scorers/conditions/limit)"))


def resolved_scorer(model_args: str) -> dict[str, Any]:
    """What a cell's scorer computes: its id and every option of it, defaults filled in.

    ``scorer=random,seed=0`` and ``scorer=random`` resolve alike. The runtime's options
    (``cache``, ``chunk_size``, ``progress``, ``call_timeout``, ...) change how a run goes, not
    its scores, and are left out. A scorer that is not installed here, or whose options do not
    resolve (its cells fail when run, with the scorer's own error), is its options as written.

    Raises:
        prbench.options.OptionsError: ``model_args`` is not ``key=value`` text (a key twice).
    """
    from prbench.errors import PrbenchUserError
    from prbench.harness.lm import DEFAULT_SCORER
    from prbench.options import options_to_dict, parse_kv_string
    from prbench.plugins import get_registry
    from prbench.scoring.runtime_options import split_options

    written = parse_kv_string(model_args)
    raw = dict(written)
    scorer = raw.pop("scorer", DEFAULT_SCORER)
    try:
        component = get_registry().get("scorer", scorer)
        _runtime, options = split_options(component, raw)
        resolved = options_to_dict(component.parse_options(options))
    except PrbenchUserError:
        return {"scorer": scorer, "written": raw}
    return {"scorer": component.qualified_id, "options": resolved}


def _no_twins(scorers: Sequence[Scorer], conditions: Sequence[Condition], path: Path) -> None:
    """Refuse two scorers with the same options, or two conditions with equal tasks and metadata.

    They would make identical cells under two labels; the error names both. Scorers are compared
    by their resolved options (:func:`resolved_scorer`), not by how they are written.
    """
    from prbench.options import OptionsError

    seen: dict[str, str] = {}
    for scorer in scorers:
        try:
            key = json.dumps(resolved_scorer(scorer.model_args), sort_keys=True, default=str)
        except OptionsError as exc:
            raise SweepFileError(where_in(path, f"scorer {scorer.name!r}: model_args: {exc}")) \
                from None
        if key in seen:
            raise SweepFileError(where_in(path, f"scorers {seen[key]!r} and {scorer.name!r} have "
                                              "the same model_args: their cells would be "
                                              "identical; remove one"))
        seen[key] = scorer.name
    seen = {}
    for condition in conditions:
        key = json.dumps([list(condition.tasks), condition.metadata], sort_keys=True)
        if key in seen:
            raise SweepFileError(where_in(path, f"conditions {seen[key]!r} and {condition.name!r} "
                                              "have the same tasks and metadata: their cells "
                                              "would be identical; remove one"))
        seen[key] = condition.name


def load_sweep(path: str | os.PathLike[str]) -> Sweep:
    """Read and check a sweep file.

    Raises:
        SweepFileError: unreadable, not YAML, or a missing, unknown or malformed field.
    """
    import stat

    import yaml

    file = Path(path)
    try:
        mode = file.stat().st_mode
        if not stat.S_ISREG(mode):  # a FIFO or /dev/stdin would wait for a writer forever
            kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if \
                stat.S_ISFIFO(mode) else "not a regular file"
            raise SweepFileError(f"{shown_path(file)}: the sweep file is {kind}; name a YAML "
                                 "file")
        data = yaml.load(file.read_text(encoding="utf-8"), Loader=_sweep_loader())
    except OSError as exc:
        raise SweepFileError(f"{shown_path(file)}: cannot read the sweep file "
                             f"({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise SweepFileError(f"{shown_path(file)}: the sweep file is not UTF-8 text (byte "
                             f"{exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise SweepFileError(f"{file}:{line} not valid YAML ({getattr(exc, 'problem', exc)})") \
            from exc
    from pydantic import ValidationError

    try:
        sweep = _sweep_model().model_validate(data)
    except ValidationError as exc:
        raise _file_error(first_error(exc.errors()), file) from None
    shared_meta = sweep.metadata or {}
    _check_json(shared_meta, file, "metadata")
    eval_args = sweep.eval_args or []
    _check_eval_args(eval_args, file)
    scorers = []
    for i, entry in enumerate(sweep.scorers):
        where = f"scorers[{i}]"
        args = model_args_text(entry.model_args, file, where)
        scorer_id = dict(p.split("=", 1) for p in args.split(",") if "=" in p).get("scorer")
        name = str(entry.name or scorer_id or "")
        if not name:
            raise SweepFileError(where_in(file, f"{where}: give a name or model_args.scorer"))
        scorers.append(Scorer(name, args, _given(entry.estimate), entry.stand_in.strip(),
                              {**_given(sweep.resources), **_given(entry.resources)}))
    conditions = []
    for i, entry in enumerate(sweep.conditions):
        where = f"conditions[{i}]"
        tasks = [entry.tasks] if isinstance(entry.tasks, str) else entry.tasks
        meta = entry.metadata or {}
        _check_json(meta, file, f"{where}.metadata")
        name = str(entry.name or "+".join(tasks))
        conditions.append(Condition(name, tuple(tasks), {**shared_meta, **meta},
                                    entry.stand_in.strip()))
    _names(scorers, file, "scorers")
    _names(conditions, file, "conditions")
    _no_twins(scorers, conditions, file)
    out = sweep.output_path
    return Sweep(file, None if out is None else str(out), tuple(scorers), tuple(conditions),
                 sweep.limit, tuple(eval_args))


def _given(numbers: Any) -> dict[str, float]:
    """The keys of an ``estimate:`` or ``resources:`` mapping that were given, as numbers."""
    if numbers is None:
        return {}
    return {key: float(getattr(numbers, key)) for key in type(numbers).model_fields
            if key in numbers.model_fields_set}


__all__ = [
    "CONDITION_KEYS",
    "ESTIMATE_KEYS",
    "OWN_OPTIONS",
    "RESOURCE_KEYS",
    "SCORER_KEYS",
    "SWEEP_KEYS",
    "Cell",
    "Condition",
    "Scorer",
    "Sweep",
    "SweepFileError",
    "load_sweep",
    "model_args_text",
    "slug",
    "where_in",
]
