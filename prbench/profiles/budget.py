"""Token counting, token budgets and the options and checks shared by the profile builders."""

from __future__ import annotations

import dataclasses
import math
import string
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prbench.profiles.base import POST_FORMAT, ProfileView, render_posts

if TYPE_CHECKING:
    from prbench.records import ProfileItem, Record

POST_FIELDS = ("index", "category", "text", "id")
QUERY_FIELDS = ("question", "category", "domain", "id")
DOC_FIELDS = ("text", "category", "id")


def check_format(fmt: str, fields: Sequence[str], option: str) -> None:
    """Check a ``str.format`` template uses only ``fields`` (by name).

    Raises:
        ValueError: a malformed template or an unknown/positional field, naming the option.
    """
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError as exc:
        raise ValueError(f"option {option!r}: malformed template {fmt!r}: {exc}") from exc
    for _, name, _, _ in parsed:
        if name is None:
            continue
        base = name.split(".", 1)[0].split("[", 1)[0]
        if base not in fields:
            raise ValueError(
                f"option {option!r}: unknown field {{{name}}} in {fmt!r}; "
                f"its fields are {', '.join('{' + f + '}' for f in fields)}"
            )


def check_positive(value: int | None, option: str, *, allow_none: bool = True) -> None:
    """Raise ValueError unless ``value`` is >= 1 (or ``None`` when allowed)."""
    if value is None and allow_none:
        return
    if value is None or value < 1:
        raise ValueError(f"option {option!r} must be >= 1, got {value!r}")


#: The default and help text of each option the ranking builders (``bm25``, ``dense``) share (a
#: builder may give its own help text).
RANKED_OPTIONS: dict[str, tuple[Any, str]] = {
    "k": (10, "posts kept, best first"),
    "query_format": ("{question}", "the query; fields {question} {category} {domain} {id}"),
    "doc_format": ("{text}", "a post as indexed; fields {text} {category} {id}"),
    "format": (POST_FORMAT, "rendering of one post; fields {index} {category} {text} {id}"),
    "max_tokens": (None, "token budget of the rendered profile; none = no budget"),
    "tokenizer": (None, "count budget tokens with this tokenizer; none = whitespace words"),
    "trust_remote_code": (
        False, "run code shipped with the model or tokenizer folder (only if you trust it)"
    ),
}


#: the bounds of the shared counts (``ge``/``le``, checked when options are read and shown by
#: ``--options``): at least one, and no more than a million (more posts, tokens or texts per
#: batch than any profile or model has; a larger value is a typo)
TABLE_BOUNDS: dict[str, dict[str, int]] = {
    name: {"ge": 1, "le": 1_048_576} for name in ("k", "max_tokens", "max_length", "batch_size")
}


def table_option(
    table: Mapping[str, tuple[Any, str]], name: str, help: str | None = None
) -> Any:
    """A dataclass field for the shared option ``name`` of ``table`` (name -> (default, help)).

    Args:
        table: the shared options, e.g. :data:`RANKED_OPTIONS`.
        name: a key of ``table``.
        help: the component's own help text (replaces the shared one).
    """
    default, shared_help = table[name]
    return dataclasses.field(default=default, metadata={"help": help or shared_help,
                                                        **TABLE_BOUNDS.get(name, {})})


def ranked_option(name: str, help: str | None = None) -> Any:
    """A dataclass field for the shared ranking option ``name`` (see :func:`table_option`)."""
    return table_option(RANKED_OPTIONS, name, help)


def check_ranked_options(options: Any) -> None:
    """Check the shared ranking options (``k``, ``max_tokens`` and the three templates).

    Raises:
        ValueError: a count below 1 or a bad template, naming the option.
    """
    check_positive(options.k, "k", allow_none=False)
    check_positive(options.max_tokens, "max_tokens")
    check_format(options.query_format, QUERY_FIELDS, "query_format")
    check_format(options.doc_format, DOC_FIELDS, "doc_format")
    check_format(options.format, POST_FIELDS, "format")


def query_text(record: Record, fmt: str) -> str:
    """The retrieval query of a record (``fmt`` fields: question, category, domain, id)."""
    return fmt.format(
        question=record.question, category=record.category, domain=record.domain, id=record.id
    )


def doc_text(item: ProfileItem, fmt: str) -> str:
    """The text of a post as the retriever sees it (``fmt`` fields: text, category, id)."""
    return fmt.format(text=item.text, category=item.category, id=item.id)


def builder_id(name: str, options: object, shown: Iterable[str], skip: Iterable[str] = ()) -> str:
    """``name(opt=value,...)``: the ``shown`` options always, any other option when not default.

    Options in ``skip`` (batch size, device, cache: nothing that changes the output) never appear.
    """
    shown = list(shown)
    skip = set(skip)
    parts = []
    fields = {f.name: f for f in dataclasses.fields(options)}  # type: ignore[arg-type]
    for key in shown:
        parts.append(f"{key}={_fmt_value(getattr(options, key))}")
    for key, f in fields.items():
        if key in shown or key in skip:
            continue
        value = getattr(options, key)
        default = f.default if f.default is not dataclasses.MISSING else None
        if value != default:
            parts.append(f"{key}={_fmt_value(value)}")
    return f"{name}({','.join(parts)})"


def _fmt_value(value: Any) -> str:
    if isinstance(value, str) and (not value or any(c in value for c in ",()= {}\n'")):
        return repr(value)
    return str(value)


class TokenCounter:
    """Counts tokens with a Hugging Face tokenizer, or whitespace-separated words without one.

    Args:
        tokenizer: ``None`` or ``""`` for words; else ``minilm``, a hub id or a local folder (loaded
            with ``AutoTokenizer``; special tokens are not counted).
        revision: hub revision of the tokenizer.
        trust_remote_code: run code shipped with the tokenizer (never implied).

    Raises:
        prbench.model_ref.ModelUnavailableError: the tokenizer cannot be found, or needs
            its own code and ``trust_remote_code`` is false.
    """

    def __init__(
        self,
        tokenizer: str | None = None,
        revision: str | None = None,
        *,
        trust_remote_code: bool = False,
    ) -> None:
        self.name = tokenizer or "words"
        self._tok: Any = None
        if tokenizer:
            from prbench.model_ref import resolve_model

            ref = resolve_model(tokenizer, revision)
            from transformers import AutoTokenizer

            from prbench.model_ref import remote_code_error

            src = str(ref.local_dir) if ref.local_dir is not None else ref.source
            try:
                self._tok = AutoTokenizer.from_pretrained(
                    src, revision=None if ref.local_dir else revision,
                    trust_remote_code=trust_remote_code,
                )
            except ValueError as exc:
                error = remote_code_error(src, exc)
                if error is None:
                    raise
                raise error from exc

    def count(self, text: str) -> int:
        """The number of tokens (or words) in ``text``."""
        if not text:
            return 0
        if self._tok is None:
            return len(text.split())
        return len(self._tok(text, add_special_tokens=False, verbose=False)["input_ids"])


@dataclasses.dataclass(frozen=True)
class Fitted:
    """The posts kept under a budget and their rendering."""

    items: tuple[ProfileItem, ...]
    text: str
    n_tokens: int
    n_cut: int


def fit_budget(
    items: Sequence[ProfileItem],
    counter: TokenCounter,
    max_tokens: int | None,
    fmt: str = POST_FORMAT,
) -> Fitted:
    """Keep the longest prefix of ``items`` whose rendering fits in ``max_tokens``.

    Posts are never split: the first post that does not fit ends the profile (a later, shorter
    post is not pulled forward, so the kept posts keep their order). ``None`` means no budget.
    """
    items = tuple(items)
    if max_tokens is None:
        text = render_posts(items, fmt)
        return Fitted(items, text, counter.count(text), 0)
    kept = 0
    total = 0
    sep = counter.count("\n\n")
    for i, item in enumerate(items):
        cost = counter.count(
            fmt.format(index=i + 1, category=item.category, text=item.text, id=item.id)
        )
        extra = cost + (sep if kept else 0)
        if total + extra > max_tokens:
            break
        total += extra
        kept += 1
    # Token counts are not exactly additive for every tokenizer: check the real rendering.
    while True:
        text = render_posts(items[:kept], fmt)
        n_tokens = counter.count(text)
        if n_tokens <= max_tokens or kept == 0:
            break
        kept -= 1
    return Fitted(items[:kept], text, n_tokens, len(items) - kept)


def top_k(scores: Sequence[float], k: int) -> list[int]:
    """Indices of the ``k`` highest scores, best first; equal scores keep the post order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]


def ranked_view(
    record: Record,
    scores: Sequence[float],
    *,
    k: int,
    counter: TokenCounter,
    max_tokens: int | None,
    fmt: str,
    builder: str,
    extra: dict[str, Any] | None = None,
) -> ProfileView:
    """The view of the top-``k`` posts of a record by ``scores``, in rank order, under a budget.

    Raises:
        RuntimeError: a score is not a finite number (names the record and the post).
    """
    for i, s in enumerate(scores):
        if not math.isfinite(s):
            raise RuntimeError(
                f"record {record.id!r} ({record.source or 'no source'}): retrieval score of post "
                f"{record.profile[i].id!r} is {s}"
            )
    order = top_k(scores, k)
    fitted = fit_budget([record.profile[i] for i in order], counter, max_tokens, fmt)
    kept = order[: len(fitted.items)]
    return ProfileView(
        text=fitted.text,
        items=fitted.items,
        n_tokens=fitted.n_tokens,
        builder=builder,
        extra={
            "scores": [float(scores[i]) for i in kept],
            "post_ids": [record.profile[i].id for i in kept],
            "n_posts": len(record.profile),
            "n_cut": fitted.n_cut,
            "token_unit": counter.name,
            "format": fmt,
            **(extra or {}),
        },
    )
