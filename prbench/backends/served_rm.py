"""``served-rm``: a reward model served by a running vLLM or SGLang server.

The chat is rendered here, exactly as ``hf-classifier`` renders it (the same
:class:`~prbench.backends.chat_inputs.ChatEncoder`: chat template, profile placement,
profile-first truncation, exactly one BOS), with the served model's tokenizer, and the server
receives **token ids**, so it neither re-renders nor adds a second BOS. Requests go through the
OpenAI-compatible HTTP backend's transport (:class:`prbench.backends.http.OpenAIBackend`):
``max_concurrency`` requests in flight, retries with backoff on 408/409/429/5xx, timeouts,
dropped connections and malformed replies; a fatal error (401/403, 404, nothing listening) stops
the run with one line. Each request carries up to ``batch_size`` inputs.

Endpoints and what is read (request and response schemas as published):

- **vLLM** ``POST /pooling`` (``endpoint=pooling``; the default for vLLM), for models served with
  ``--runner pooling`` (older releases: ``--task reward`` or ``--task classify``). Request
  ``{"model", "input": [[ids], ...], "use_activation", "task"?}``; response
  ``{"data": [{"index", "object": "pooling", "data": ...}, ...]}``. ``data`` is either one value
  per label (a sequence classifier; pooling task ``classify``) or one row of values per token
  (``token_classify``, the ``reward`` task of older releases, e.g. InternLM2 / Qwen2.5-Math
  reward models): prbench takes the **last token's row**, the position a sequence classifier
  pools, then ``[label_index]``. Source: vLLM docs, "Pooling Models" (``--runner pooling``,
  ``--convert``) and ``vllm/entrypoints/pooling/pooling/protocol.py`` (``PoolingCompletionRequest``,
  ``PoolingResponseData.data: list[list[float]] | list[float]``).
- **vLLM** ``POST /classify`` (``endpoint=classify``), for ``*ForSequenceClassification`` models
  (``--convert classify``). Same request; response ``{"data": [{"index", "label", "probs",
  "num_classes"}, ...]}``; prbench reads ``probs[label_index]``. Source: vLLM docs,
  "Classification Usages" (Classification API) and ``vllm/entrypoints/pooling/base/protocol.py``
  (``use_activation``; ``softmax``/``activation`` are its deprecated names).
- **SGLang** ``POST /classify`` (native API, "reward model"; ``endpoint=classify``, the default for
  SGLang), for reward models launched with ``--is-embedding``. Request ``{"model", "input_ids":
  [[ids], ...]}`` (``EmbeddingReqInput``); response: a JSON list, in request order, of
  ``{"embedding": [reward, ...], "meta_info": {...}}``; prbench reads ``embedding[label_index]``.
  Source: SGLang docs, "Native APIs" (``/classify`` (reward model)) and "Reward Models".

**Which token is read.** vLLM and SGLang pool a sequence classifier at the **last token they
receive** (``LAST`` pooling). The model's own forward in transformers (the generic
``*ForSequenceClassification`` head of Llama, Qwen2/3, Mistral, Gemma, ...) reads the last token
that is **not its pad token** (``config.pad_token_id``); the two differ exactly when the rendered
chat ends with the pad token (ChatML templates with pad ``<|im_end|>``, SmolLM2-style ones). With
``pooling=model`` (the default) prbench reads the served model's ``config.json`` (from
``tokenizer=``, else the served model name) and drops the pad ids that end an input before
sending it, so the server's last token is the model's: in a causal decoder the tokens after it do
not change its state, and the reward equals ``hf-classifier``'s (``pooling=model``). An encoder
(BERT-style; its server pooler is its own) gets its ids whole. Where the rule cannot be known (no
``config.json``, an architecture transformers does not list as a decoder) an input that ends with
the tokenizer's pad token is refused with one error naming the fix, never scored at another
position. ``pooling=last_token`` sends every id, pads included: the server's own choice. The
manifest's ``resolved.pooling`` says which position was read; ``stats`` counts the inputs whose
trailing pads were dropped (``pad_dropped``).

``use_activation`` (vLLM only) is sent as given; the default ``false`` asks for the raw head
output -- the logit ``hf-classifier`` reports. A vLLM release that predates the field ignores it
and applies its activation (sigmoid/softmax), which keeps the ranking of a one-label reward
model but not its values; ``use_activation=true`` records that choice in the fingerprint.

An input whose request failed for good (5xx or timeouts on every attempt, a malformed reply on
every attempt, a reply with the wrong number of results) scores ``nan``; the reason is counted
and listed in :meth:`ServedRMScorer.stats` under ``failures``; so does an input whose value is not
a finite number (a ``NaN`` or infinite reward, reason ``non-finite``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import numbers
from collections.abc import Sequence
from typing import Any, Literal

from prbench.backends.base import BackendSpec, GenerationFailure
from prbench.backends.chat_inputs import (
    encode_requests,
    encoder_from_options,
    load_tokenizer,
    rendering_description,
)
from prbench.backends.chat_options import ChatRenderOptions, check_max_length
from prbench.backends.http import OpenAIBackend
from prbench.backends.served_pooling import pooling_rule
from prbench.backends.urls import check_server_url
from prbench.options import OptionsError
from prbench.scoring.base import ScoreRequest, UnscoredInputs, check_scores
from prbench.scoring.cache import fingerprint_of, model_identity

logger = logging.getLogger(__name__)

#: Bump when a change alters scores for the same options (invalidates cached scores).
SCORER_VERSION = 2  # 2: trailing pad ids dropped (pooling=model)

#: The endpoint each engine is asked at with ``endpoint=auto``.
DEFAULT_ENDPOINT = {"vllm": "pooling", "sglang": "classify"}
#: Where each engine's endpoint lives, under the server's root URL.
ROUTES = {("vllm", "pooling"): "pooling", ("vllm", "classify"): "classify",
          ("sglang", "classify"): "classify"}
#: The model-card fields that identify the served weights (timestamps and permissions left out).
CARD_FIELDS = ("id", "root", "parent", "max_model_len")


def _opt(default: Any, help_text: str, **bounds: float) -> Any:
    return dataclasses.field(default=default, metadata={"help": help_text, **bounds})


@dataclasses.dataclass(frozen=True)
class ServedRMOptions(ChatRenderOptions):
    """Options of the ``served-rm`` scorer.

    The chat-rendering options are ``hf-classifier``'s
    (:class:`~prbench.backends.chat_options.ChatRenderOptions`).
    """

    base_url: str = _opt("", "the server's root URL, e.g. http://127.0.0.1:8000 (a /v1 is dropped)")
    engine: Literal["vllm", "sglang"] = _opt("vllm", "the serving engine: vllm or sglang")
    model: str = _opt("", "served model name; empty = the one model the server lists")
    endpoint: Literal["auto", "pooling", "classify"] = _opt(
        "auto", "auto (vllm: /pooling, sglang: /classify), pooling (vllm) or classify"
    )
    pooling_task: Literal["auto", "classify", "token_classify"] = _opt(
        "auto", "vLLM /pooling task field; auto = not sent (the server's default task)"
    )
    use_activation: bool = _opt(
        False, "vLLM: let the server apply sigmoid/softmax (default: raw logits, as hf-classifier)"
    )
    label_index: int = _opt(0, "which value (logit) per input is the reward", ge=0,
                            le=1_048_576)
    pooling: Literal["model", "last_token"] = _opt(
        "model", "model (the token the model's own forward reads: the last that is not its pad "
        "token; trailing pad ids are not sent) or last_token (every id sent; the server's last)"
    )
    tokenizer: str = _opt("", "hub id or local folder of the served model's tokenizer "
                              "(empty = the served model name)")
    revision: str = _opt("main", "hub revision of the tokenizer; ignored for folders")
    trust_remote_code: bool = _opt(False, "run code shipped with the tokenizer (only if trusted)")
    max_length: int = _opt(
        8192, "most tokens per input (at most the server's max_model_len); profile cut first",
        le=1_048_576)
    batch_size: int = _opt(32, "inputs per HTTP request", ge=1, le=1_048_576)
    max_concurrency: int = _opt(4, "HTTP requests in flight at once", ge=1, le=1024)
    timeout: float = _opt(120.0, "seconds for one whole HTTP exchange", gt=0, le=86_400)
    max_retries: int = _opt(5, "retries on 5xx/429/timeouts/malformed replies (backoff)", ge=0,
                            le=100)
    api_key_env: str = _opt("", "environment variable holding the server's API key")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_max_length(self.max_length)
        if not self.base_url:
            raise ValueError(
                "served-rm needs base_url, the server's root URL, e.g. base_url=http://127.0.0.1:8000"
            )
        # a URL with a password or a token is refused here, before the tokenizer is loaded
        check_server_url(self.base_url, "base_url", key_hint=(
            "an environment variable, and name it with api_key_env"
            + (f" (now {self.api_key_env})" if self.api_key_env else "")))
        endpoint = resolved_endpoint(self.engine, self.endpoint)
        if (self.engine, endpoint) not in ROUTES:
            raise ValueError(
                f"engine={self.engine} has no endpoint={self.endpoint}; use endpoint=classify "
                "(SGLang's reward API is /classify)"
            )
        if self.engine == "sglang" and (self.use_activation or self.pooling_task != "auto"):
            raise ValueError("use_activation and pooling_task are vLLM request fields; "
                             "SGLang's /classify returns the raw reward")
        if endpoint == "classify" and self.pooling_task != "auto":
            raise ValueError("pooling_task is a field of vLLM's /pooling; use endpoint=pooling")
        if self.label_index < 0:
            raise ValueError(f"label_index must be >= 0, got {self.label_index}")
        if self.batch_size < 1 or self.max_concurrency < 1:
            raise ValueError("batch_size and max_concurrency must be at least 1")


def resolved_endpoint(engine: str, endpoint: str) -> str:
    """The endpoint ``endpoint=auto`` stands for with ``engine``."""
    return DEFAULT_ENDPOINT.get(engine, "") if endpoint == "auto" else endpoint


def server_root(base_url: str) -> str:
    """``base_url`` without a trailing ``/`` or ``/v1`` (the pooling routes live at the root)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _values_problem(values: Any, where: str, *, rows: bool) -> str:
    """Why ``values`` is not a list of numbers (or, with ``rows``, of rows of numbers)."""
    if not isinstance(values, list) or not values:
        return f"{where} is not a non-empty list"
    if rows and all(isinstance(v, list) for v in values):
        return next((_values_problem(v, where + " row", rows=False) for v in values
                     if _values_problem(v, where + " row", rows=False)), "")
    for k, v in enumerate(values):
        if not _is_number(v):
            return f"{where}[{k}] is {str(v)[:40]!r} ({type(v).__name__}), not a number"
    return ""


def reply_problem(engine: str, endpoint: str, reply: Any) -> str:
    """Why a decoded 200 reply does not follow the endpoint's published schema (``""``: it does)."""
    if engine == "sglang":
        if not isinstance(reply, list):
            return f"expected a JSON list of results, got {type(reply).__name__}"
        for i, item in enumerate(reply):
            if not isinstance(item, dict) or "embedding" not in item:
                return f"result {i} has no 'embedding'"
            problem = _values_problem(item["embedding"], f"result {i} 'embedding'", rows=False)
            if problem:
                return problem
        return ""
    if not isinstance(reply, dict) or not isinstance(reply.get("data"), list):
        return "no 'data' list in the reply"
    field = "probs" if endpoint == "classify" else "data"
    for i, item in enumerate(reply["data"]):
        if not isinstance(item, dict) or field not in item or type(item.get("index")) is not int:
            return f"data[{i}] has no '{field}' or no integer 'index'"
        problem = _values_problem(item[field], f"data[{i}].{field}", rows=field == "data")
        if problem:
            return problem
    return ""


def reply_values(engine: str, endpoint: str, reply: Any, inputs: int
                 ) -> tuple[list[list[float]], str]:
    """Each input's values, in input order, from a reply :func:`reply_problem` passed.

    A per-token result (rows) gives its last row: the last token's values. A vLLM reply places
    each result by its ``index``, so the indexes must be 0 .. ``inputs`` - 1, each exactly once:
    with a duplicate, a missing or an out-of-range index no one can tell which score belongs to
    which input, and the reply is refused (never sorted and used).

    Args:
        engine: ``vllm`` or ``sglang``.
        endpoint: ``pooling`` or ``classify``.
        reply: the decoded reply.
        inputs: how many inputs the request sent.

    Returns:
        The values per input and ``""``, or ``[]`` and why the reply does not fit the request.
    """
    items = reply if engine == "sglang" else reply["data"]
    if len(items) != inputs:
        return [], f"{len(items)} results for {inputs} inputs"
    if engine == "sglang":  # results in input order (the native route carries no index)
        return [[float(v) for v in item["embedding"]] for item in items], ""
    indexes = [item["index"] for item in items]
    if sorted(indexes) != list(range(inputs)):
        seen: dict[int, int] = {}
        for i in indexes:
            seen[i] = seen.get(i, 0) + 1
        parts = [f"{what} {sorted(found)}" for what, found in (
            ("duplicated", [i for i, n in seen.items() if n > 1]),
            ("missing", [i for i in range(inputs) if i not in seen]),
            ("out of range", [i for i in seen if not 0 <= i < inputs]),
        ) if found]
        return [], (f"result indexes must be 0..{inputs - 1}, each once: "
                    f"{'; '.join(parts)} (which score belongs to which input is unknown)")
    field = "probs" if endpoint == "classify" else "data"
    out = []
    for item in sorted(items, key=lambda d: d["index"]):
        values = item[field]
        if isinstance(values[0], list):
            values = values[-1]
        out.append([float(v) for v in values])
    return out, ""


class ServedClient(OpenAIBackend):
    """The HTTP transport of :class:`OpenAIBackend`, posting to a pooling/classify route.

    Replies are checked against the route's schema (:func:`reply_problem`); a malformed one is
    retried like a 5xx. No response cache: the scorer runtime caches the scores.
    """

    def __init__(self, spec: BackendSpec, *, engine: str, endpoint: str) -> None:
        self.route = ROUTES[(engine, endpoint)]
        self.engine = engine
        self.endpoint_name = endpoint
        super().__init__(spec)
        self.fingerprint = f"{engine}:{spec.model}@{self.base_url}"

    def _reply_problem(self, response: Any) -> str:
        return reply_problem(self.engine, self.endpoint_name, response)

    def post_all(self, bodies: list[dict[str, Any]]) -> list[Any]:
        """The reply (or :class:`GenerationFailure`) for each body, sent concurrently."""
        return self._fetch_all(bodies)


class ServedRMScorer(UnscoredInputs):
    """A reward model behind a vLLM or SGLang server (see the module docstring).

    Args:
        options: the scorer's options.

    Raises:
        OptionsError: the tokenizer cannot be loaded, or the server does not serve ``model``.
        prbench.backends.http.BackendRequestError: the server cannot be reached or refuses
            the key.
    """

    component = "served-rm"

    def __init__(self, options: ServedRMOptions) -> None:
        self.options = options
        self.engine = options.engine
        self.endpoint = resolved_endpoint(options.engine, options.endpoint)
        root = server_root(options.base_url)
        spec = BackendSpec(
            backend="openai", model=options.model or "?", base_url=root,
            api_key_env=options.api_key_env, max_concurrency=options.max_concurrency,
            timeout=options.timeout, max_retries=options.max_retries, cache_dir="",
        )
        self.client = ServedClient(spec, engine=self.engine, endpoint=self.endpoint)
        self._last_encoded: dict[int, Any] = {}  # the last score call's inputs, by request
        self._last_sent: dict[int, int] = {}  # the ids each of them sent
        self.model_card = self._model_card()
        self.model = options.model or self._only_served_model()
        if self.model != spec.model:
            spec = dataclasses.replace(spec, model=self.model)
            self.client.close()
            self.client = ServedClient(spec, engine=self.engine, endpoint=self.endpoint)
        self.card = self._card_for(self.model)
        tokenizer_id = options.tokenizer or self.model
        try:
            self.tokenizer = load_tokenizer(
                tokenizer_id, revision=options.revision,
                trust_remote_code=options.trust_remote_code,
            )
        except (OSError, ValueError) as exc:
            raise OptionsError(
                f"served-rm could not load the tokenizer {tokenizer_id!r}: "
                f"{' '.join(str(exc).split())[:300]}; pass tokenizer=<local folder or hub id> "
                "of the served model"
            ) from None
        served_len = self.card.get("max_model_len") if self.card else None
        max_length = options.max_length
        if isinstance(served_len, int) and 2 <= served_len < max_length:
            max_length = served_len
        self.encoder = encoder_from_options(self.tokenizer, options, max_length=max_length)
        self.pooling = pooling_rule(tokenizer_id, revision=options.revision,
                                    pooling=options.pooling, tokenizer=self.tokenizer)
        self.description = {
            "scorer": self.component,
            "version": SCORER_VERSION,
            "engine": self.engine,
            "endpoint": self.endpoint,
            "pooling_task": options.pooling_task,
            "use_activation": options.use_activation,
            "model": self.model,
            "model_card": self.card,
            "tokenizer": model_identity(tokenizer_id, options.revision),
            "trust_remote_code": options.trust_remote_code,
            **rendering_description(self.encoder),
            "label_index": options.label_index,
            "pooling": self.pooling.note,
        }
        self.counts = dict.fromkeys(
            ("requests", "inputs_sent", "prompt_tokens", "failed", "truncated_profile",
             "truncated_question", "truncated_left", "pad_dropped"), 0)
        self._start_unscored()

    # -- the server's model list -----------------------------------------------------------------

    def _model_card(self) -> list[dict[str, Any]] | None:
        """The server's ``GET /v1/models`` list, or ``None`` where it has none (404).

        Any other answer stops the run: the card is part of the fingerprint, so a server that is
        still starting (5xx) must not give the scores another cache key.

        Raises:
            BackendRequestError: not a 200 with a model list, nor a 404.
        """
        from prbench.backends.http import BackendRequestError

        status, reply = self.client.get_json("/v1/models")
        if status == 200 and isinstance(reply, dict) and isinstance(reply.get("data"), list):
            return [m for m in reply["data"] if isinstance(m, dict)]
        if status == 404:
            logger.info("%s/v1/models answered 404: no model card", self.client.base_url)
            return None
        raise BackendRequestError(
            f"{self.client.base_url}/v1/models answered HTTP {status} without a model list; "
            "wait until the server is ready (or check `base_url`), then re-run"
        )

    def _only_served_model(self) -> str:
        ids = [str(m.get("id")) for m in self.model_card or []]
        if len(ids) == 1:
            return ids[0]
        listed = f"it serves {ids}" if ids else "it lists no models at /v1/models"
        raise OptionsError(f"served-rm needs model=<served model name>: {listed}")

    def _card_for(self, model: str) -> dict[str, Any] | None:
        if self.model_card is None:
            return None
        for card in self.model_card:
            if card.get("id") == model:
                return {k: card[k] for k in CARD_FIELDS if k in card}
        ids = [str(m.get("id")) for m in self.model_card]
        raise OptionsError(
            f"the server at {self.client.base_url} does not serve model {model!r}; it serves "
            f"{ids} (set model= to one of them)"
        )

    # -- scoring ---------------------------------------------------------------------------------

    def request_body(self, ids: Sequence[Sequence[int]]) -> dict[str, Any]:
        """The JSON body for one batch of token-id inputs."""
        batch = [list(map(int, x)) for x in ids]
        if self.engine == "sglang":
            return {"model": self.model, "input_ids": batch}
        body: dict[str, Any] = {"model": self.model, "input": batch,
                                "use_activation": self.options.use_activation}
        if self.endpoint == "pooling":
            body["encoding_format"] = "float"
            if self.options.pooling_task != "auto":
                body["task"] = self.options.pooling_task
        return body

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """One reward per request, in order; ``nan`` where the server gave none (see stats).

        Raises:
            ValueError: ``label_index`` is past the values the server returns per input.
            prbench.backends.http.BackendRequestError: a fatal HTTP failure (key, route,
                model, no server).
        """
        requests = list(requests)
        if not requests:
            return []
        self.counts["requests"] += len(requests)
        encoded = encode_requests(self.encoder, requests)
        for e in encoded:
            if e.truncated:
                self.counts[f"truncated_{e.truncated}"] += 1
        self._last_invalid = {}
        valid = [i for i, e in enumerate(encoded) if not e.invalid]
        for r, e in zip(requests, encoded, strict=True):
            if e.invalid:  # the answer alone is longer than max_length: not sent
                self._last_invalid[id(r)] = e.invalid
                self._fail([r], "too-long", e.invalid, stage="encode")
        scores = [math.nan] * len(requests)
        sent = [requests[i] for i in valid]
        # the ids as sent: the server reads their last token, made the model's own (pooling)
        ids = [self.pooling.ids(encoded[i].ids, requests[i].record_id, self.tokenizer)
               for i in valid]
        self.counts["pad_dropped"] += sum(
            len(x) < len(encoded[i].ids) for x, i in zip(ids, valid, strict=True))
        # kept for request_inputs (the input as scored), the runtime asks right after
        self._last_encoded = {id(r): e for r, e in zip(requests, encoded, strict=True)}
        self._last_sent = {id(requests[i]): len(x) for x, i in zip(ids, valid, strict=True)}
        size = self.options.batch_size
        starts = list(range(0, len(sent), size))
        bodies = [self.request_body(ids[s : s + size]) for s in starts]
        self.counts["inputs_sent"] += len(sent)
        self.counts["prompt_tokens"] += sum(len(x) for x in ids)
        replies = self.client.post_all(bodies)
        for start, reply in zip(starts, replies, strict=True):
            batch = sent[start : start + size]
            if isinstance(reply, GenerationFailure):
                self._fail(batch, reply.reason, reply.detail)
                continue
            values, problem = reply_values(self.engine, self.endpoint, reply, len(batch))
            if problem:
                self._fail(batch, "bad-response", f"{problem} from {self.client.endpoint}")
                continue
            for i, v in zip(valid[start : start + size], values, strict=True):
                value = self._pick(v)
                if math.isfinite(value):
                    scores[i] = value
                else:  # the model's own output: retrying would give it again
                    self._fail([requests[i]], "non-finite",
                               f"{self.client.endpoint} returned {value} as value "
                               f"{self.options.label_index} (label_index)")
        return check_scores(scores, len(requests), self.component)

    def request_inputs(self, requests: Sequence[ScoreRequest], *, sent: bool
                       ) -> list[dict[str, Any] | None]:
        """The input as scored of each request (:mod:`prbench.backends.input_record`).

        ``text`` is the chat rendered here, whose token ids the server received; ``tokens``
        counts the ids in the request body (after a ``pooling=model`` drop of trailing pads).

        Args:
            requests: the requests of the last :meth:`score` call (``sent=True``), or
                score-cache hits (``sent=False``: rendered and tokenised now, nothing sent).
            sent: which of the two.
        """
        from prbench.backends.input_record import encoded_records, kept_inputs, shown_profiles

        requests = list(requests)
        if sent:
            found = kept_inputs(self._last_encoded, requests)
            if found is None:
                return [None] * len(requests)
            encoded = found
            counts = [self._last_sent.get(id(r), 0) for r in requests]
        else:
            encoded = encode_requests(self.encoder, requests)
            counts = []
            for r, e in zip(requests, encoded, strict=True):
                try:
                    counts.append(len(self.pooling.ids(e.ids, r.record_id, self.tokenizer))
                                  if not e.invalid else 0)
                except ValueError:
                    counts.append(len(e.ids))
        records = encoded_records(self.encoder, encoded, shown_profiles(self.encoder, requests))
        for record, count in zip(records, counts, strict=True):
            record["tokens"] = count
        return list(records)

    def _pick(self, values: list[float]) -> float:
        i = self.options.label_index
        if i >= len(values):
            raise ValueError(
                f"label_index={i} but {self.client.endpoint} returns {len(values)} value"
                f"{'s' if len(values) != 1 else ''} per input"
            )
        return values[i]

    def _fail(
        self, batch: Sequence[ScoreRequest], reason: str, detail: str, stage: str = "request"
    ) -> None:
        self.counts["failed"] += len(batch)
        for r in batch:
            self._last_invalid.setdefault(id(r), f"{reason}: {detail}")  # the samples' reason
            self._failures.append(
                {"item": r.record_id, "stage": stage, "reason": reason, "detail": detail}
            )

    # -- reporting -------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counts (requests, inputs, HTTP attempts and retries, failures by reason) and failures."""
        reasons: dict[str, int] = {}
        for f in self._failures:
            reasons[f["reason"]] = reasons.get(f["reason"], 0) + 1
        return {
            **self.counts,
            "http_requests": self.client.requests_sent,
            "http_retries": self.client.retries,
            "failure_reasons": dict(sorted(reasons.items())),
            "failures": self.failures(),
        }

    def fingerprint(self) -> str:
        """A hex id of what changes the scores: engine, endpoint, request fields, the served
        model (name and its ``/v1/models`` card: root, parent, max_model_len), the tokenizer's
        identity and the rendering (template, profile placement, lengths, BOS), label index.

        Not the URL, batch size, concurrency or retries (the same served model on another port
        gives the same scores).
        """  # noqa: D205
        return fingerprint_of(self.description)

    def describe(self) -> dict[str, Any]:
        """Settings and counts for results manifests."""
        from prbench.options import options_to_dict

        return {
            "component": self.component,
            "fingerprint": self.fingerprint(),
            "options": options_to_dict(self.options),
            "resolved": {
                "endpoint_url": self.client.endpoint,
                "model": self.model,
                "model_card": self.card,
                "max_length": self.encoder.max_length,
                "bos": dataclasses.asdict(self.encoder.bos),
                "pooling": self.pooling.note,
            },
            "stats": self.stats(),
        }

    def close(self) -> None:
        """Close the connections kept open to the server."""
        self.client.close()
