"""``rm-r1``: RM-R1 as a pairwise judge; ``rm-r1-scalar``: its win rate against a reference.

Each pair is judged in both orders by default (``orders=one``: one order, chosen by a seeded hash
of the seed and the pair, independent of batching). An order whose reply is unreadable (see
:mod:`prbench_plugin_rm_r1.parsing`) or that the backend could not produce is invalid: it gives no
verdict. P(first ≻ second) is the share of readable orders that preferred the first answer (1,
0.5 or 0); a pair with no readable order is ``nan`` — counted as ``invalid`` by the metrics, never
guessed.

``stats()`` reports ``first_shown_win_rate`` (how often the answer shown as A won, among
readable verdicts; 0.5 is no preference; the task metric ``position_bias`` is the released
script's ``|acc_chosen_first - acc_chosen_second|``), ``n_order_flips`` (pairs, both orders
read, whose preferred answer changed when the two were swapped — the judge followed the
position), ``order_agreement``, and the invalid counts by reason; ``details()`` keeps every
order's verdict.
A reply cut at ``max_new_tokens`` is invalid (``truncated``) under ``parse=strict``; under
``parse=original`` it is read as the authors read it, and counted (``n_cut_replies_read``).

The token budget of a served model (``backend=openai``) is fitted per request:
``min(max_new_tokens, max_model_len - prompt tokens)``, ``max_model_len`` read from the model's
``/v1/models`` card and the prompt counted by the server (vLLM's ``/tokenize``), so no request is
refused for its length; a prompt that alone fills the context is invalid (``prompt-too-long``),
never sent. ``stats()`` and ``describe()`` also record what ran: the style and where it was read,
the token budget and how it was fitted, the parse rule and the prompt (``"builtin"``, or the
template files with their SHA-256).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prbench.api import (
    Chat,
    GenerationBackend,
    GenerationFailure,
    LLMJudgeBase,
    OrderTally,
    PairRequest,
    Reply,
    ScoreRequest,
    fingerprint_of,
    generate_in_batches,
    is_truncated,
    seeded_unit,
    truncation_failure,
)
from prbench_plugin_rm_r1 import prompts
from prbench_plugin_rm_r1.parsing import parser
from prbench_plugin_rm_r1.plugin import RMR1Options, RMR1ScalarOptions

#: (record id, question, profile text, first answer, second answer)
Item = tuple[str, str, str, str, str]


class _Budgeted:
    """A served backend whose every chat is sent with its own fitted ``max_tokens``.

    Args:
        backend: an OpenAI-compatible backend (its ``generate`` takes ``budgets``).
        budget_of: each chat's budget, by the chat object's ``id``.
    """

    def __init__(self, backend: Any, budget_of: dict[int, int]) -> None:
        self.backend = backend
        self.fingerprint = backend.fingerprint
        self.budget_of = budget_of

    def generate(self, chats: Sequence[Chat], config: Any) -> list[Reply]:
        """The backend's replies, each chat within its budget, in one call."""
        return list(self.backend.generate(chats, config,
                                          budgets=[self.budget_of[id(c)] for c in chats]))

    def logprobs(self, chats: Sequence[Chat], continuations: Sequence[str]) -> list[float]:
        """Not used by the judge."""
        raise NotImplementedError("a budgeted view of a backend only generates")


class RMR1Judge(LLMJudgeBase):
    """RM-R1 on any generation backend; implements the pairwise-judge protocol.

    Args:
        options: the validated options.
        backend: a ready backend (tests, sharing a model); built from ``options`` otherwise.
    """

    name = "rm-r1"
    options: RMR1Options

    def __init__(self, options: RMR1Options, backend: GenerationBackend | None = None) -> None:
        super().__init__(options, backend)
        self.style, self.style_source = options.resolved_style()
        self.templates = prompts.load_templates(
            options.system_prompt_file, options.user_prompt_file
        )
        self._parse = parser(options.parse)

    def reset_stats(self) -> None:
        """Forget the counts and details gathered so far."""
        super().reset_stats()
        self._tally = OrderTally()
        self._cut_read = 0
        self._budget: dict[str, Any] = {"source": "option", "n_fitted": 0, "n_no_room": 0,
                                        "smallest": None}

    def _generate(self, chats: Sequence[Chat], unit: str) -> list[Reply]:
        """Generate one reply per chat, each within its budget (see the module docstring)."""
        o = self.options
        fit = getattr(self.backend, "fit_budgets", None)
        budgets, info = fit(chats, o.max_new_tokens) if callable(fit) and chats else (
            [o.max_new_tokens] * len(chats), {"source": "option"})
        self._budget["source"] = info.get("source", "option")
        self._budget["max_model_len"] = info.get("max_model_len")
        if isinstance(info.get("max_model_len"), int):
            self._context = info["max_model_len"]
        self._budget["n_fitted"] += info.get("n_fitted", 0)
        self._budget["n_no_room"] += info.get("n_no_room", 0)
        send = [i for i, b in enumerate(budgets) if b >= 1]
        if send:
            low = min(budgets[i] for i in send)
            old = self._budget["smallest"]
            self._budget["smallest"] = low if old is None else min(old, low)
        backend: Any = self.backend
        if any(budgets[i] != o.max_new_tokens for i in send):
            backend = _Budgeted(self.backend, {id(chats[i]): budgets[i] for i in send})
        replies = generate_in_batches(
            backend, [chats[i] for i in send], o.generation_config(), o.batch_size,
            desc=self.name, unit=unit, keep_failures=True, truncated_is_failure=False)
        out: list[Reply] = [GenerationFailure(
            reason="prompt-too-long",
            detail=f"the prompt fills the served context ({info.get('max_model_len')} tokens): "
                   "no room for a reply; not sent")] * len(chats)
        for i, reply in zip(send, replies, strict=True):
            if is_truncated(reply):
                if o.parse == "strict":
                    reply = truncation_failure(reply, budgets[i])
                else:
                    self._cut_read += 1
            out[i] = reply
        return out

    def _orders(self, item: Item) -> list[bool]:
        """``True`` = the first answer is shown as A."""
        if self.options.orders == "both":
            return [True, False]
        return [seeded_unit("rm-r1-order", self.options.seed, *item[0:1], *item[3:]) < 0.5]

    def _judge(self, items: Sequence[Item]) -> list[float]:
        chats, plan = [], []
        for i, item in enumerate(items):
            _, question, profile, first, second = item
            for first_is_a in self._orders(item):
                a, b = (first, second) if first_is_a else (second, first)
                chats.append(
                    prompts.judge_chat(self.style, question, profile, a, b, self.templates)
                )
                plan.append((i, first_is_a))
        replies = self._generate(chats, unit="verdict")
        per_item: list[list[dict[str, Any]]] = [[] for _ in items]
        for (i, first_is_a), reply in zip(plan, replies, strict=True):
            shown_first = "first" if first_is_a else "second"
            verdict = self._read(reply, self._parse, items[i][0], shown_first=shown_first)
            per_item[i].append(self._tally.order(shown_first, verdict, reply))
        return [
            self._tally.pair(item[0], orders) for item, orders in zip(items, per_item, strict=True)
        ]

    def compare(self, pairs: Sequence[PairRequest]) -> list[float]:
        """P(first ≻ second) per pair; ``nan`` where no order gave a readable verdict."""
        return self._judge(
            [(p.record_id, p.question, p.profile.text, p.first, p.second) for p in pairs]
        )

    def fingerprint(self) -> str:
        """Hash of what changes verdicts: backend/model, prompt version and style, decoding."""
        o = self.options
        return fingerprint_of({
            "component": self.name, "backend": self.backend.fingerprint,
            "model": o.model, "revision": o.revision, "gguf_file": o.gguf_file,
            "prompt_version": prompts.PROMPT_VERSION, "style": self.style, "orders": o.orders,
            "decoding": [o.max_new_tokens, o.temperature, o.top_p, o.seed],
            "parse": o.parse, "prompt": self.templates.describe(),
            "served_context": self._served_context(),
        })

    def _served_context(self) -> int | None:
        """The served model's ``max_model_len`` (it bounds the budgets, so it is part of the
        fingerprint); ``None`` for an in-process model or a card without it.
        """  # noqa: D205
        if not hasattr(self, "_context"):
            card_of = getattr(self.backend, "model_card", None)
            card = card_of() if callable(card_of) else None
            limit = card.get("max_model_len") if isinstance(card, dict) else None
            self._context = limit if isinstance(limit, int) else None
        return self._context

    def _protocol(self) -> dict[str, Any]:
        """What ran: style (and its source), token budget and its fitting, parse rule, prompt."""
        return {
            "prompt_style": self.style,
            "style_source": self.style_source,
            "max_new_tokens": self.options.max_new_tokens,
            "budget": dict(self._budget),
            "n_cut_replies_read": self._cut_read,
            "parse": self.options.parse,
            "prompt": self.templates.describe(),
        }

    def stats(self) -> dict[str, Any]:
        """Counts since the last reset: pairs, invalid orders/pairs, position bias."""
        return {
            "judge": self.name,
            "backend": self.backend.fingerprint,
            "prompt_version": prompts.PROMPT_VERSION,
            **self._protocol(),
            "orders": self.options.orders,
            "seed": self.options.seed,
            **self._tally.stats(),
            **self._stats_tail(),
        }

    def details(self) -> list[dict[str, Any]]:
        """One entry per judged pair: every order's verdict (or failure reason)."""
        return list(self._tally.details)

    def describe(self) -> dict[str, Any]:
        """Settings, fingerprint and counts for the results manifest."""
        out = super().describe()
        out.update(
            component=self.name, prompt_version=prompts.PROMPT_VERSION,
            fingerprint=self.fingerprint(), **self._protocol(),
        )
        return out


def load_references(path: str) -> dict[str, str]:
    """Reference answers by record id from a JSON list or JSONL file of ``{id, reference}``.

    Raises:
        ValueError: unreadable JSON, a row without a string ``id``/``reference``, or a duplicate
            id (naming the file and line or row).
    """
    from prbench.api import read_option_file

    file = Path(path).expanduser()
    text = read_option_file(path, "reference_file")  # regular, size-capped, UTF-8
    rows: list[tuple[str, Any]] = []
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{file}: invalid JSON: {exc}") from exc
        rows = [(f"{file} row {i}", row) for i, row in enumerate(data)]
    else:
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append((f"{file}:{n}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{file}:{n}: invalid JSON: {exc}") from exc
    out: dict[str, str] = {}
    for where, row in rows:
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected an object with id and reference")
        rid, ref = row.get("id"), row.get("reference")
        if not isinstance(rid, str) or not isinstance(ref, str) or not ref.strip():
            raise ValueError(f"{where}: needs a string 'id' and a non-empty string 'reference'")
        if rid in out:
            raise ValueError(f"{where}: duplicate id {rid!r}")
        out[rid] = ref
    return out


class RMR1ScalarScorer(RMR1Judge):
    """RM-R1 as a pointwise scorer: each response's win rate against a fixed reference answer.

    The response and the reference are compared in both orders (by default); the score is the
    share of readable orders the response won (1, 0.5 or 0), ``nan`` when neither order was
    readable. Usable for Best-of-N: every candidate faces the same reference.
    """

    name = "rm-r1-scalar"
    options: RMR1ScalarOptions

    def __init__(
        self, options: RMR1ScalarOptions, backend: GenerationBackend | None = None
    ) -> None:
        super().__init__(options, backend)
        self.references = load_references(options.reference_file) if options.reference_file \
            else {}

    def _reference(self, request: ScoreRequest) -> str:
        if self.options.reference_text:
            return self.options.reference_text
        try:
            return self.references[request.record_id]
        except KeyError:
            raise ValueError(
                f"rm-r1-scalar: record {request.record_id!r} has no reference in "
                f"{self.options.reference_file}"
            ) from None

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """Win rate of each response against its reference, in request order."""
        items = [
            (r.record_id, r.question, r.profile.text, r.response, self._reference(r))
            for r in requests
        ]
        return self._judge(items)

    def fingerprint(self) -> str:
        """The judge's fingerprint plus the references."""
        refs = self.options.reference_text or sorted(self.references.items())
        return fingerprint_of({"judge": super().fingerprint(), "references": refs})
