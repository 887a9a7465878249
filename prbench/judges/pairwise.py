"""``llm-judge``: an LLM compares two answers for one user, in both orders.

For each pair the judge is shown the user's profile view, the question and the two answers as
"Answer A" and "Answer B". By default every pair is judged twice, once in each order, and
P(first ≻ second) is the mean over the orders whose reply could be read: 1.0 or 0.0 when the two
readable orders agree (or only one was readable), 0.5 when they disagree. A pair whose every order
failed (the backend gave no reply, or the reply did not parse) gets ``nan``, an ``invalid`` item:
an unreadable or missing reply is never turned into a verdict. The task's strict ``acc`` is read
from the orders, not from this probability: a pair counts only when every order judged picked the
chosen answer (:mod:`prbench.judges.order_metrics`).

``orders="one"`` judges a single order per pair; which answer is shown first is a seeded choice
that depends only on the seed and the pair (not on the batch, nor on the other pairs of the data:
``coin="pair"``, the default), as in the released evaluation, which shuffles positions with a fixed
seed. ``coin="script"`` draws it as the released script does instead: the seed's sequential
``random.random()`` stream, restarted for each domain, one draw per pair in the data's order
(:func:`prbench.judges.released.script_coin`).

``protocol="released"`` is the released evaluation as one switch (:mod:`prbench.judges.released`):
the authors' prompt files (``system_prompt_file``, ``user_prompt_file``; prbench ships no copy),
one order per pair from a coin seeded with 42, greedy decoding, 512 new tokens, the released
parse with its fallback to "A" counted in ``n_unreadable`` and reported through the
``released_*`` metrics only, and no profile unless the user prompt file asks for one
(``{profile}``) and the task gives one. It fixes ``orders``, ``seed``, ``temperature``,
``top_p`` and ``max_new_tokens``; giving another value for one of them is an error.

:meth:`LLMPairwiseJudge.stats` reports the generation and parse failures (by reason, and listed
per item), how often the answer shown first won among readable verdicts
(``first_shown_win_rate``; 0.5 is no preference) and the agreement between the two orders of a
pair; :meth:`LLMPairwiseJudge.details` keeps every reply's verdict. Each pair's per-order
verdicts reach the harness through ``request_extras`` (see
:class:`~prbench.judges.common.LLMJudgeBase`), from which the tasks report the judge metrics
(:mod:`prbench.judges.order_metrics`). A reply cut at ``max_new_tokens`` is an invalid order
(``truncated``), except under ``protocol=released``, which reads a cut reply as the released
script does.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from typing import Any, Literal

from prbench.backends.base import Chat
from prbench.hashing import seeded_unit
from prbench.judges import prompts, released
from prbench.judges.common import (
    BackendOptions,
    LLMJudgeBase,
    asked_order,
    generate_in_batches,
)
from prbench.judges.order_tally import OrderTally
from prbench.judges.parsing import parse_pairwise
from prbench.options import OptionsError, check_option_file
from prbench.scoring.base import PairRequest

logger = logging.getLogger(__name__)

#: What ``protocol=released`` fixes: option -> (prbench's default, the released value).
RELEASED_SETTINGS: dict[str, tuple[Any, Any]] = {
    "orders": ("both", "one"),
    "seed": (0, released.SEED),
    "temperature": (0.0, 0.0),
    "top_p": (1.0, 1.0),
    "max_new_tokens": (512, released.MAX_NEW_TOKENS),
}


@dataclasses.dataclass(frozen=True)
class LLMJudgeOptions(BackendOptions):
    """Options of ``llm-judge`` (backend and decoding options, see :class:`BackendOptions`)."""

    orders: Literal["both", "one"] = dataclasses.field(
        default="both",
        metadata={"help": "'both' judges each pair in both orders; 'one' a seeded single order"},
    )
    coin: Literal["pair", "script"] = dataclasses.field(
        default="pair",
        metadata={"help": "orders=one: which answer is shown first; 'pair' (a seeded coin per "
                          "pair, whatever else the data holds) or 'script' (the released "
                          "pairwise.py's draws: the seed's random() stream restarted per "
                          "domain, one draw per pair in the data's order)"},
    )
    protocol: Literal["prbench", "released"] = dataclasses.field(
        default="prbench",
        metadata={"help": "'prbench' (both orders, strict parse, prbench's prompt) or "
                          "'released' (the released pairwise.py: your prompt files, one "
                          "order from seed 42, greedy, 512 tokens, fallback 'A' counted)"},
    )
    system_prompt_file: str = dataclasses.field(
        default="",
        metadata={"help": "protocol=released: the system prompt file (the released "
                          "prompts/pairwise_system.txt)"},
    )
    user_prompt_file: str = dataclasses.field(
        default="",
        metadata={"help": "protocol=released: the user prompt file with {question}, "
                          "{Response_A}, {Response_B} (optional {profile}); the released "
                          "prompts/pairwise_user.txt"},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.coin != "pair" and self.orders != "one" and self.protocol != "released":
            raise ValueError(f"coin={self.coin} chooses the one order of orders=one (or "
                             "protocol=released); with orders=both every pair gets both orders")
        if self.protocol != "released":
            for name in ("system_prompt_file", "user_prompt_file"):
                if getattr(self, name):
                    raise ValueError(f"{name} is read only with protocol=released")
            return
        for name, (default, value) in RELEASED_SETTINGS.items():
            given = getattr(self, name)
            if given not in (default, value):
                raise ValueError(
                    f"protocol=released sets {name}={value}; drop {name}={given} (or use "
                    "protocol=prbench)"
                )
            object.__setattr__(self, name, value)
        for name in ("system_prompt_file", "user_prompt_file"):
            # a FIFO, a device or a folder is refused here, before any set-up; a missing file
            # when it is read (a sweep's dry run plans with files of another machine)
            path = getattr(self, name)
            if path and os.path.lexists(os.path.expanduser(path)):
                check_option_file(path, f"llm-judge: {name}", limit=released.MAX_PROMPT_BYTES)

    def check_given(self, given: dict[str, Any]) -> None:
        """Refuse, under ``protocol=released``, a fixed option written with another value.

        :meth:`__post_init__` cannot tell ``orders=both`` written by the user from the default;
        the released script judges one order, so writing ``orders=both`` (or any value the
        protocol does not use) is an error, not a setting silently replaced.
        """
        if self.protocol != "released":
            return
        for name, (_default, value) in RELEASED_SETTINGS.items():
            if name in given and given[name] != value:
                raise ValueError(
                    f"protocol=released sets {name}={value}; drop {name}={given[name]} (or use "
                    "protocol=prbench)"
                )


class LLMPairwiseJudge(LLMJudgeBase):
    """A generative pairwise judge; implements :class:`prbench.scoring.base.PairwiseJudge`.

    Args:
        options: the judge's options.
        backend: a ready backend (tests, sharing one model); built from ``options`` otherwise.
    """

    name = "llm-judge"
    options: LLMJudgeOptions

    def __init__(self, options: LLMJudgeOptions, backend: Any = None) -> None:
        """Read the prompt files of ``protocol=released`` first (a bad file stops here)."""
        self._released = (
            released.load_prompts(options.system_prompt_file, options.user_prompt_file)
            if options.protocol == "released" else None
        )
        #: (record, field) pairs whose placeholder text was filled, each warned about once
        self._filled_warned: set[tuple[str, str]] = set()
        #: the orders asked of each pair of the last compare call (request_inputs)
        self._last_asked: dict[int, list[dict[str, Any]]] = {}
        super().__init__(options, backend)

    def reset_stats(self) -> None:
        """Forget the counts and details gathered so far."""
        super().reset_stats()
        self._tally = OrderTally(released.FALLBACK if self._released is not None else None)

    def _chat(self, pair: PairRequest, answer_a: str, answer_b: str) -> Chat:
        if self._released is None:
            return prompts.pairwise_chat(pair.question, pair.profile.text, answer_a, answer_b)
        profile = pair.profile.text if self._released.reads_profile else ""
        self._warn_filled(pair, answer_a, answer_b)
        return self._released.chat(pair.question, profile, answer_a, answer_b)

    def _warn_filled(self, pair: PairRequest, answer_a: str, answer_b: str) -> None:
        """Warn once per record and field whose own text the released fill changes.

        The released script fills ``{Response_A}`` and ``{Response_B}`` wherever they stand,
        the record's question and answer A included; prbench does the same under
        ``protocol=released`` (the numbers are the script's) and says so. The tasks give the
        chosen answer as ``first``, the rejected one as ``second``.
        """
        for field, placeholder in released.ReleasedPrompts.filled_in_record(
                pair.question, answer_a, answer_b):
            if field == "response_a":
                field = "chosen" if answer_a == pair.first else "rejected"
            key = (pair.record_id, field)
            if key in self._filled_warned:
                continue
            self._filled_warned.add(key)
            logger.warning(
                "llm-judge protocol=released: record %r, field %s holds the text %s; it is "
                "filled with that answer, as the released script's str.replace fills it (the "
                "default protocol never changes a record's text)", pair.record_id, field,
                placeholder)

    def _orders(self, pair: PairRequest) -> list[str]:
        if self.options.orders == "both":
            return ["first", "second"]
        if self.options.coin == "script":
            if pair.domain_position is None:
                raise OptionsError(
                    f"llm-judge: coin=script draws each pair's order from its place among its "
                    f"domain's records, and pair {pair.record_id!r} has none (the prbench tasks "
                    "give it; a pair built by hand needs PairRequest.domain_position), or use "
                    "coin=pair"
                )
            in_a = released.script_coin(self.options.seed, pair.domain_position)
            return ["first" if in_a else "second"]
        u = seeded_unit("order", self.options.seed, pair.record_id, pair.first, pair.second)
        return ["first" if u < 0.5 else "second"]

    def _asked(self, pairs: Sequence[PairRequest]) -> tuple[list[Chat], list[tuple[int, str]]]:
        """The chat of every order asked, and (pair index, shown first) of each, in order."""
        chats = []
        plan: list[tuple[int, str]] = []
        for i, pair in enumerate(pairs):
            for shown_first in self._orders(pair):
                a, b = (pair.first, pair.second) if shown_first == "first" else (
                    pair.second, pair.first
                )
                chats.append(self._chat(pair, a, b))
                plan.append((i, shown_first))
        return chats, plan

    def request_inputs(self, requests: Sequence[PairRequest], *, sent: bool
                       ) -> list[dict[str, Any]]:
        """The input as scored of each pair (:mod:`prbench.scoring.inputs`): per order asked,
        the messages sent, the reply and the prompt tokens the server counted (if it said).

        Args:
            requests: the pairs of the last :meth:`compare` call (``sent=True``), or pairs whose
                verdict came from the score cache (``sent=False``: the messages rebuilt, nothing
                asked; the harness reads the replies back from the cached outcome).
            sent: which of the two.
        """  # noqa: D205
        requests = list(requests)
        if sent and all(id(p) in self._last_asked for p in requests):
            return [{"orders": self._last_asked[id(p)]} for p in requests]
        chats, plan = self._asked(requests)
        out: list[dict[str, Any]] = [{"orders": []} for _ in requests]
        for chat, (i, shown_first) in zip(chats, plan, strict=True):
            out[i]["orders"].append({"shown_first": shown_first, "messages": chat,
                                     "tokens": None, "reply": None})
        return out

    def compare(self, pairs: Sequence[PairRequest]) -> list[float]:
        """P(first ≻ second) per pair, ``nan`` where no order could be read."""
        chats, plan = self._asked(pairs)
        if self._released is None:
            replies = self._generate(chats, unit="verdict")
            parse = parse_pairwise
        else:  # the released script reads whatever came back, a cut reply too
            o = self.options
            replies = generate_in_batches(
                self.backend, chats, o.generation_config(), o.batch_size, desc=self.name,
                unit="verdict", keep_failures=True, truncated_is_failure=False,
            )
            parse = released.parse_released
        per_pair: list[list[dict[str, Any]]] = [[] for _ in pairs]
        self._last_asked = {id(p): [] for p in pairs}  # for request_inputs, asked right after
        for (i, shown_first), reply, chat in zip(plan, replies, chats, strict=True):
            parsed = self._read(reply, parse, pairs[i].record_id, shown_first=shown_first)
            per_pair[i].append(self._tally.order(shown_first, parsed, reply))
            self._last_asked[id(pairs[i])].append(asked_order(shown_first, chat, reply))
        return [
            self._tally.pair(pair.record_id, orders)
            for pair, orders in zip(pairs, per_pair, strict=True)
        ]

    def _stats_head(self) -> dict[str, Any]:
        head = super()._stats_head()
        if self._released is not None:
            head["prompt_version"] = self._released.version()
        return head

    def stats(self) -> dict[str, Any]:
        """Counts since the last :meth:`reset_stats`, JSON-ready (for results files)."""
        out = {
            **self._stats_head(),
            "protocol": self.options.protocol,
            "orders": self.options.orders,
            "coin": self.options.coin,
            "seed": self.options.seed,
            **self._tally.stats(),
            **self._stats_tail(),
        }
        if self._released is not None:
            out["prompt_files"] = self._released.describe()
            out["diagnostics"] = self._released_lines()
        return out

    def _released_lines(self) -> list[str]:
        """What ``protocol=released`` did, for the summary's header."""
        assert self._released is not None
        files = ", ".join(
            f"{f.option}={f.path} (sha256 {f.sha256[:12]})"
            for f in (self._released.system, self._released.user)
        )
        profile = (
            "the user prompt shows the task's profile ({profile})" if self._released.reads_profile
            else "no profile shown (the user prompt has no {profile})"
        )
        unreadable = self._tally.orders - self._tally.verdicts
        coin = (
            "coin=script: the script's draws, restarted per domain, in the data's order"
            if self.options.coin == "script" else
            "coin=pair: drawn per pair, not the script's sequence"
        )
        return [
            f"protocol=released: {files}; one order per pair from a coin seeded with "
            f"{released.SEED} ({coin}), greedy, max_new_tokens {released.MAX_NEW_TOKENS}; "
            f"{profile}",
            "protocol=released: an unreadable reply is the fallback 'A' only in the released_* "
            f"metrics; every other metric counts it unreadable ({unreadable} so far, "
            "n_unreadable)",
        ]

    def describe(self) -> dict[str, Any]:
        """Settings and counts for the results manifest, with the prompt files' sha256."""
        out = super().describe()
        if self._released is not None:
            out["prompt_version"] = self._released.version()
            out["prompt_files"] = self._released.describe()
        return out

    def details(self) -> list[dict[str, Any]]:
        """One entry per judged pair: the verdict of every order, or why it failed."""
        return list(self._tally.details)
