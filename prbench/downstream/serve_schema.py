"""What the reward server accepts: native records and OpenRLHF's remote reward-model payload.

Two request shapes become :class:`~prbench.scoring.base.ScoreRequest` lists:

- **native** (``POST /score``): ``{"items": [{"question": ..., "response": ..., "profile": ...,
  "record_id": ..., "category": ..., "domain": ...}, ...]}``. ``profile`` is what the reward model
  sees of the user: a rendered text, or a list of posts ``{"id", "category", "text"}`` that the
  server renders as ``Post i (Category: c): text`` (the benchmark's format). A diagnostic scorer
  also gets ``narrative`` and ``rubric_aspects`` when an item carries them.
- **OpenRLHF** (``POST /get_reward``, what ``--reward.remote_url`` posts; ``--remote_rm_url``
  before 0.10.2): ``{"query": [prompt + response, ...], "prompts": [prompt, ...], "labels": [label,
  ...]}``. The response is the text of each query after its prompt; ``prompts`` is required (a
  client that sends only ``query``, as old OpenRLHF versions did, gets a 400 naming it rather than
  a score of the whole chat). Per-item user context comes from optional extra lists of the same
  length (``questions``, ``profiles``, ``record_ids``, ``categories``, ``domains``) or from a label
  that is a JSON object with those keys in the singular (``{"question": ..., "profile": ...}``);
  without a question the prompt itself is the question. OpenRLHF cuts a prompt that leaves no room
  for the answer from the left (it keeps the last tokens) but still sends the whole prompt: a query
  that starts with the end of its prompt is accepted, and :class:`OpenRLHFBatch` says which were.

Every problem is reported as a :class:`PayloadError` naming the field and item index; a body that
is not UTF-8 JSON, or that nests deeper than :data:`MAX_DEPTH`, is one too (:func:`decode_body`).

The native body is a pydantic model (:class:`ScoreBody`: strict types, an unknown key in the body
or an item is an error with close matches, a post's own extra keys are ignored since records
carry more than ``{id, category, text}``); the server publishes it as ``/score``'s OpenAPI request
body. The server still reads the raw body itself instead of letting FastAPI parse it: FastAPI's
JSON reading neither bounds the nesting depth nor answers in prbench's 400 ``{"error": ...}``
form that the clients read. The OpenRLHF body stays checked by hand: its shape is OpenRLHF's
protocol, whose clients add keys between versions (unknown keys must pass), and its rules are
relations between fields (lists as long as ``query``, a query that starts with its prompt, a
label that may be JSON text) rather than types; its profiles go through the same model.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
)

from prbench.errors import PrbenchUserError
from prbench.options import suggest
from prbench.profiles.base import ProfileView, render_posts
from prbench.records import ProfileItem
from prbench.scoring.base import EMPTY_PROFILE, ScoreRequest
from prbench.typed_input import EXPECTED, STRICT, first_error, place

#: per-item context keys: native item key -> OpenRLHF extra list key
CONTEXT_LISTS = {
    "question": "questions",
    "profile": "profiles",
    "record_id": "record_ids",
    "category": "categories",
    "domain": "domains",
}


#: The deepest nesting of arrays and objects a request may have (a real one needs about 6).
MAX_DEPTH = 64


class PayloadError(PrbenchUserError, ValueError):
    """A request body that cannot be scored; the message names the field and the item."""


def _depth_error(value: Any, where: str) -> str:
    """Why ``value`` nests too deeply (``""`` if not): :func:`prbench.nesting.too_deep`."""
    from prbench.nesting import too_deep

    return "" if too_deep(value, MAX_DEPTH) is None else (
        f"{where}: nested more than {MAX_DEPTH} levels deep")


def _loads(text: str | bytes, where: str, bad: str = "not JSON") -> Any:
    """Decode JSON text, reporting every failure (deep nesting included) as a PayloadError."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise PayloadError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # JSONDecodeError, and UnicodeDecodeError for bytes
        raise PayloadError(f"{where}: {bad} ({exc})") from None
    problem = _depth_error(value, where)
    if problem:
        raise PayloadError(problem)
    return value


def decode_body(raw: bytes) -> Any:
    """The JSON value of a request body.

    Raises:
        PayloadError: an empty body, one that is not UTF-8 JSON, or one nested more than
            :data:`MAX_DEPTH` levels deep.
    """
    if not raw.strip():
        raise PayloadError("body: empty; send a JSON object")
    return _loads(raw, "body")


def _string(value: Any, where: str, *, default: str | None = None) -> str:
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise PayloadError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _shape(value: Any) -> str | None:
    """Which arm of a text-or-structure union ``value`` is (the tags are not part of a place)."""
    return ("(text)" if isinstance(value, str) else "(posts)" if isinstance(value, list)
            else "(post)" if isinstance(value, dict) else None)


class Post(BaseModel):
    """One post of a profile.

    Keys besides these are ignored: the benchmark's records carry more (a title, a date), and a
    client may send its records' posts as they are.
    """

    model_config = ConfigDict(strict=True, extra="ignore")

    text: str = Field(description="the post's text (title and body)")
    id: str | None = Field(None, description="the post's id (default: its index)")
    category: str | None = Field(None, description="the post's category (default: none)")


PostInput = Annotated[
    Annotated[str, Tag("(text)")] | Annotated[Post, Tag("(post)")],
    Discriminator(_shape, custom_error_type="post_shape", custom_error_message="a post"),
]
ProfileInput = Annotated[
    Annotated[str, Tag("(text)")] | Annotated[list[PostInput], Tag("(posts)")],
    Discriminator(_shape, custom_error_type="profile_shape", custom_error_message="a profile"),
] | None


class ScoreItem(BaseModel):
    """One response to score, with what the reward model sees of its user."""

    model_config = ConfigDict(**STRICT)  # type: ignore[typeddict-item]

    record_id: str | None = Field(None, description="the record's id (default: none)")
    id: str | None = Field(None, description="the record's id, when record_id is not given")
    question: str = Field(description="the user's question")
    response: str = Field(description="the response to score")
    profile: ProfileInput = Field(None, description="what the reward model sees of the user: "
                                  "a rendered text, or a list of posts {id, category, text} "
                                  "rendered as `Post i (Category: c): text`")
    category: str | None = Field(None, description="the record's category")
    domain: str | None = Field(None, description="the record's domain")
    narrative: str | None = Field(None, description="hidden: read by a diagnostic scorer only")
    rubric_aspects: list[Any] = Field(default_factory=list, description="hidden: read by a "
                                      "diagnostic scorer only")


class ScoreBody(BaseModel):
    """The body of ``POST /score``."""

    model_config = ConfigDict(**STRICT)  # type: ignore[typeddict-item]

    items: list[ScoreItem] = Field(description="the items to score; the answer's scores are in "
                                   "the same order")


_PROFILE = TypeAdapter(ProfileInput)


def openapi_body(model: type[BaseModel]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``model`` as an OpenAPI request body, and the component schemas it refers to.

    The body refers to ``#/components/schemas/<model>``; the server adds the schemas to its
    OpenAPI document (FastAPI adds only those of the bodies it parses itself).
    """
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas = {**schema.pop("$defs", {}), model.__name__: schema}
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"required": True, "content": {"application/json": {"schema": ref}}}, schemas


def _payload_error(error: Mapping[str, Any], where: str = "") -> PayloadError:
    """One pydantic error as prbench's line, at ``where`` + the error's place."""
    loc = [p for p in error["loc"] if p not in ("(text)", "(post)", "(posts)")]
    at = where + (place(loc) if not where or not loc or isinstance(loc[0], int)
                  else "." + place(loc))
    kind, value = error["type"], error.get("input")
    if kind == "extra_forbidden":  # in the body or an item (a post's own keys are ignored)
        key = str(error["loc"][-1])
        model = ScoreItem if len(error["loc"]) > 1 else ScoreBody
        return PayloadError(f"{place(error['loc'][:-1]) or 'body'}: unknown key {key!r}"
                            f"{suggest(key, model.model_fields)}; allowed: "
                            + ", ".join(model.model_fields))
    if kind == "missing":  # as an explicit null: the field has no text
        return PayloadError(f"{at}: expected a string, got NoneType")
    if kind == "string_type":
        return PayloadError(f"{at}: expected a string, got {type(value).__name__}")
    if kind == "profile_shape":
        return PayloadError(f"{at}: expected a string or a list of posts, got "
                            f"{type(value).__name__}")
    if kind == "post_shape":
        return PayloadError(f"{at}: expected a post {{id, category, text}}")
    if kind in ("model_type", "model_attributes_type"):
        return PayloadError(f"{at}: expected an object")
    if kind in EXPECTED:
        return PayloadError(f"{at}: expected {EXPECTED[kind]}")
    return PayloadError(f"{at}: {error['msg']}")


def _profile_view(value: str | list[str | Post] | None) -> ProfileView:
    """The profile of a checked item: its text, its posts rendered, or none."""
    if value is None or value == "":
        return EMPTY_PROFILE
    if isinstance(value, str):
        return ProfileView(text=value, n_tokens=len(value.split()), builder="given")
    items = []
    for k, post in enumerate(value):
        post = Post(text=post) if isinstance(post, str) else post
        items.append(ProfileItem(id=str(k) if post.id is None else post.id,
                                 category=post.category or "", text=post.text))
    text = render_posts(items)
    return ProfileView(
        text=text, items=tuple(items), n_tokens=len(text.split()), builder="given-posts"
    )


def parse_profile(value: Any, where: str) -> ProfileView:
    """A profile given as rendered text, a list of posts, or nothing.

    Raises:
        PayloadError: any other shape, or a post without a text.
    """
    try:
        return _profile_view(_PROFILE.validate_python(value))
    except ValidationError as exc:
        raise _payload_error(first_error(exc.errors()), where) from None


def native_requests(body: Any, *, diagnostic: bool = False) -> list[ScoreRequest]:
    """Score requests from a native ``{"items": [...]}`` body (checked by :class:`ScoreBody`).

    Args:
        body: the decoded JSON body.
        diagnostic: the served scorer reads hidden fields (``narrative``, ``rubric_aspects``).

    Raises:
        PayloadError: a missing, unknown or mistyped field, named with its item index.
    """
    try:
        checked = ScoreBody.model_validate(body)
    except ValidationError as exc:
        errors = exc.errors()
        if any(tuple(e["loc"]) in ((), ("items",)) and e["type"] != "extra_forbidden"
               for e in errors):
            raise PayloadError('body: expected {"items": [{"question": ..., "response": ...}, '
                               '...]}') from None
        raise _payload_error(first_error(errors)) from None
    return [
        ScoreRequest(
            record_id=(item.record_id if "record_id" in item.model_fields_set else item.id)
            or "",
            question=item.question,
            response=item.response,
            profile=_profile_view(item.profile),
            category=item.category or "",
            domain=item.domain or "",
            hidden={"narrative": item.narrative or "", "rubric_aspects": item.rubric_aspects}
            if diagnostic else None,
        )
        for item in checked.items
    ]


def _hidden(item: Mapping[str, Any], where: str, diagnostic: bool) -> dict[str, Any] | None:
    if not diagnostic:
        return None
    aspects = item.get("rubric_aspects", [])
    if not isinstance(aspects, list):
        raise PayloadError(f"{where}.rubric_aspects: expected a list")
    return {
        "narrative": _string(item.get("narrative"), f"{where}.narrative", default=""),
        "rubric_aspects": aspects,
    }


def _list_field(body: Mapping[str, Any], key: str, n: int) -> list[Any] | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, str) and n == 1:
        value = [value]
    if not isinstance(value, list) or len(value) != n:
        got = len(value) if isinstance(value, list) else type(value).__name__
        raise PayloadError(f"{key}: expected a list of {n} entries (one per query), got {got}")
    return value


def _label_context(label: Any, where: str) -> dict[str, Any]:
    if isinstance(label, Mapping):
        return dict(label)
    if isinstance(label, str) and label.lstrip().startswith("{"):
        parsed = _loads(label, where, bad="looks like JSON but does not parse")
        if isinstance(parsed, Mapping):
            return dict(parsed)
    return {}


#: The fewest characters of a prompt cut from the left that a query must start with (fewer could
#: match by chance, and a prompt cut that short left the policy almost nothing to answer).
MIN_KEPT_PROMPT_CHARS = 16

#: What a byte-level tokenizer decodes a multi-byte character cut in half to.
_REPLACEMENT = "\ufffd"


def _kept_suffix(query: str, prompt: str) -> int:
    """Where the response starts in a query that begins with the end of ``prompt``, else ``-1``.

    The longest suffix of ``prompt`` (at least :data:`MIN_KEPT_PROMPT_CHARS` characters) that the
    query starts with, after any replacement characters left by a cut inside a multi-byte
    character. Candidates are the places where the query's first characters occur in the prompt,
    tried from the left, so the first that fits is the longest.
    """
    lead = len(query) - len(query.lstrip(_REPLACEMENT))
    probe = query[lead : lead + MIN_KEPT_PROMPT_CHARS]
    if len(probe) < MIN_KEPT_PROMPT_CHARS:
        return -1
    start = prompt.find(probe, 1)
    while start >= 0:
        if query.startswith(prompt[start:], lead):
            return lead + len(prompt) - start
        start = prompt.find(probe, start + 1)
    return -1


@dataclasses.dataclass(frozen=True)
class QuerySplit:
    """The response part of a query, and whether the query carried only the end of its prompt.

    Attributes:
        response: the text after the prompt, trailing ``strip`` strings removed.
        prompt_cut_left: the query starts with a suffix of the prompt (the client cut the prompt
            from the left to fit its context window) instead of containing all of it.
    """

    response: str
    prompt_cut_left: bool = False


def split_query(query: str, prompt: str, strip: Sequence[str], where: str) -> QuerySplit:
    """The response part of ``prompt + response`` text, with trailing ``strip`` strings removed.

    The prompt is found anywhere in the query (a client may put a BOS or padding first); a query
    that does not contain it but starts with its last :data:`MIN_KEPT_PROMPT_CHARS` or more
    characters is a prompt cut from the left, and the response is what follows that suffix.

    Raises:
        PayloadError: the query neither contains the prompt nor starts with the end of it.
    """
    cut = False
    at = query.find(prompt) if prompt else 0
    if at >= 0:
        end = at + len(prompt)
    else:
        end = _kept_suffix(query, prompt)
        if end < 0:
            raise PayloadError(
                f"{where}: the query does not contain its prompt, nor start with the end of it "
                f"(at least {MIN_KEPT_PROMPT_CHARS} characters, as when a client cuts a long "
                "prompt from the left). From OpenRLHF: its prompt was cut to fewer than "
                f"{MIN_KEPT_PROMPT_CHARS} characters; raise OpenRLHF's --max_len (its prompt "
                "budget) or shorten the prompts. Other clients: send the prompt exactly as it "
                "appears in the query"
            )
        cut = True
    response = query[end:]
    changed = True
    while changed and strip:
        changed = False
        for s in strip:
            if s and response.endswith(s):
                response = response[: -len(s)]
                changed = True
    return QuerySplit(response, cut)


@dataclasses.dataclass(frozen=True)
class OpenRLHFBatch:
    """The score requests of one ``/get_reward`` body and what was noticed while reading it.

    Attributes:
        requests: one per query, in order.
        prompt_cut_left: per query, whether its prompt arrived cut from the left.
    """

    requests: list[ScoreRequest]
    prompt_cut_left: list[bool]

    def extra_logs(self) -> dict[str, list[float]]:
        """OpenRLHF's per-sample ``extra_logs``: ``prompt_cut_left`` is 1.0 for a cut prompt.

        OpenRLHF logs the mean of each key over a step's samples, so the logged value is the
        share of queries whose prompt was cut.
        """
        return {"prompt_cut_left": [float(c) for c in self.prompt_cut_left]}


def openrlhf_batch(
    body: Any, *, strip: Sequence[str] = (), diagnostic: bool = False
) -> OpenRLHFBatch:
    """Score requests from OpenRLHF's remote reward-model payload, with the cut prompts marked.

    Args:
        body: the decoded JSON body (``query`` and ``prompts`` required unless ``query`` is
            empty; ``labels`` and the context lists optional).
        strip: strings removed from the end of each response (e.g. the policy's EOS/pad tokens).
        diagnostic: the served scorer reads hidden fields.

    Raises:
        PayloadError: a missing or mistyped field, named with its item index.
    """
    if not isinstance(body, Mapping) or "query" not in body:
        raise PayloadError('body: expected {"query": [...], "prompts": [...], "labels": [...]}')
    queries = body["query"]
    if isinstance(queries, str):
        queries = [queries]
    if not isinstance(queries, list):
        raise PayloadError("query: expected a list of strings")
    n = len(queries)
    prompts = _list_field(body, "prompts", n)
    if prompts is None and n:
        raise PayloadError(
            "prompts: missing; each query is prompt + response and without its prompt the "
            "whole chat would be scored as the answer. Send 'prompts' (one per query, as "
            "current OpenRLHF clients do) or post native items to /score"
        )
    labels = _list_field(body, "labels", n)
    extra = {key: _list_field(body, plural, n) for key, plural in CONTEXT_LISTS.items()}
    out = []
    cuts = []
    for i, query in enumerate(queries):
        q = _string(query, f"query[{i}]")
        prompt = _string(prompts[i], f"prompts[{i}]", default="") if prompts else ""
        ctx = _label_context(labels[i], f"labels[{i}]") if labels else {}
        for key, values in extra.items():
            if values is not None and values[i] is not None:
                ctx[key] = values[i]
        where = f"item {i}"
        split = split_query(q, prompt, strip, f"query[{i}]")
        cuts.append(split.prompt_cut_left)
        out.append(
            ScoreRequest(
                record_id=_string(ctx.get("record_id", ctx.get("id")), f"{where}: record_id",
                                  default=""),
                question=_string(ctx.get("question"), f"{where}: question", default=prompt),
                response=split.response,
                profile=parse_profile(ctx.get("profile"), f"{where}: profile"),
                category=_string(ctx.get("category"), f"{where}: category", default=""),
                domain=_string(ctx.get("domain"), f"{where}: domain", default=""),
                hidden=_hidden(ctx, where, diagnostic),
            )
        )
    return OpenRLHFBatch(out, cuts)


def openrlhf_requests(
    body: Any, *, strip: Sequence[str] = (), diagnostic: bool = False
) -> list[ScoreRequest]:
    """The score requests of :func:`openrlhf_batch` alone (same arguments, same errors)."""
    return openrlhf_batch(body, strip=strip, diagnostic=diagnostic).requests


def approx_tokens(request: ScoreRequest) -> int:
    """A cheap size estimate for batching: characters / 4 of question, profile and response."""
    return (len(request.question) + len(request.profile.text) + len(request.response)) // 4 + 1
