"""``hf-classifier``: any Hugging Face ``AutoModelForSequenceClassification`` reward model.

The reward is ``logits[label_index]`` at the token the model's own forward reads (``pooling=model``:
the last token that is not the pad token; ``pooling=last_token``: the last token), for the chat
``[user: question, assistant: answer]`` (plus the profile where ``profile_position`` puts it)
rendered by the tokenizer's chat template (see :mod:`prbench.backends.chat_inputs` for the BOS and
truncation rules). Scoring goes through the shared batching engine
(:mod:`prbench.scoring.engine`) and shares prompts between answers where the model allows it
(:mod:`prbench.scoring.prefix`). Dedup, the persistent score cache (keyed by
:meth:`HFClassifierScorer.fingerprint`) and chunked scoring come from the scorer runtime every
scorer gets (:mod:`prbench.scoring.runtime`). The model is loaded on first need: a fully cached
run never loads the weights.

Decoder reward models with a ``score`` head (Llama, Qwen2/3, Mistral, Gemma, ... — the
``*ForSequenceClassification`` classes built on transformers' generic head) run through prbench's
own forward: real-token position ids and pooling at the last real token by attention mask, which
makes scores independent of batch size and padding, and immune to a pad token that also
appears in the text (pad = eos is common). With ``pooling=model`` the pad tokens that end an
input are not run (the token read is the one before them, as in the model's own forward; in a
causal decoder later tokens do not change it), so prefix sharing groups the sequences as scored.
Other models (BERT-style encoders, custom heads) run their own ``forward`` with right padding.
With ``packing`` (on by default on a GPU), such decoders run the sequences of a forward pass end
to end in rows instead of padded batches, prefix sharing included (:mod:`prbench.scoring.packing`).

``input_format=released`` instead reproduces the paper's released pointwise script exactly: the
chat ``[user: question, assistant: answer]`` rendered to text, tokenised with the tokenizer's
default special tokens (a tokenizer that adds a BOS on top of the template's gives two), cut to
``max_length`` tokens from the end, padded on the tokenizer's ``padding_side``, pooled by the
model's own forward (the last token that is not the pad token),
and the reward is the logit for one label or ``softmax(logits)[-1]`` for more. That script shows no
profile, so a request with one is an error unless ``profile_position=none``.
``input_format=released_bon`` is the same encoding and reward rule with the profile the released
Best-of-N scorer (``BoN/score.py``, discriminative) and PPO reward server show: the user turn is
the question immediately followed by the posts (``input_format=released_profile`` is that user
turn alone, with prbench's one BOS and ``logits[label_index]``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from prbench.backends.chat_inputs import (
    EncodedInput,
    check_request_texts,
    encode_requests,
    encoder_from_options,
    load_tokenizer,
    profile_texts,
    rendering_description,
    template_sha256,
)
from prbench.backends.hf_classifier_options import (
    RELEASED_SCRIPT_FORMATS,
    HFClassifierOptions,
    check_released_options,
)
from prbench.backends.model_files import check_model_files, loading
from prbench.devices import resolve_dtype, torch_device
from prbench.scoring.base import ScoreRequest, UnscoredInputs, check_scores
from prbench.scoring.cache import fingerprint_of, model_identity

logger = logging.getLogger(__name__)

#: Bump when a change alters scores for the same options (invalidates cached scores).
SCORER_VERSION = 1

#: Requests per runtime chunk on a CUDA device when ``chunk_size`` is left at 0 (auto). Measured
#: on one H200 (docs/scale.md, llama-3.1-8b shape, bf16, 1,024 question-only pairs): 84.9 pairs/s
#: at 2048 against 76.4 at 256 and 78.6 at 512.
CUDA_CHUNK_SIZE = 2048


class RunStats(dict[str, int]):
    """The scorer's running counts: a ``dict`` of ints that can also be called.

    ``stats["computed"]`` reads one count (as before); ``stats()`` returns a JSON-ready summary
    with every count plus derived values (the protocol the lm-eval adapter and reports use).
    """

    def __init__(self, keys: Sequence[str], summary: Any) -> None:
        super().__init__(dict.fromkeys(keys, 0))
        self._summary = summary

    def __call__(self) -> dict[str, Any]:
        """Every count plus ``padded_fraction`` and the prefix-sharing state."""
        return self._summary()


def released_rewards(logits: Any) -> list[float]:
    """The released script's reward per row: the logit for one label, else softmax's last entry."""
    import torch

    if logits.shape[-1] == 1:
        return logits[:, 0].float().cpu().tolist()
    return torch.softmax(logits, dim=-1)[:, -1].float().cpu().tolist()


class HFClassifierScorer(UnscoredInputs):
    """A reward model from a ``*ForSequenceClassification`` checkpoint (see module docstring).

    Attributes:
        description: what :meth:`fingerprint` hashes.
        stats: running counts (a :class:`RunStats` dict): ``requests``,
            ``computed`` (sequences run through the model), ``batches`` (batches planned by the
            engine), ``forward_passes``, ``shared_groups``, ``shared_tokens_saved``,
            ``truncated_profile``, ``truncated_question``, ``padded_tokens`` (token slots run,
            padding included), ``real_tokens`` (real tokens run), ``oom_retries``,
            ``wasted_tokens`` (real tokens of attempts that ran out of memory and were redone; a
            failed attempt counts nowhere else). Calling it,
            ``stats()``, returns those counts plus ``padded_fraction``,
            ``prefix_sharing`` (on/off and why) and ``token_budget``.
    """

    component = "hf-classifier"

    def __init__(self, options: HFClassifierOptions) -> None:
        if options.label_index < 0:
            raise ValueError(f"label_index must be >= 0, got {options.label_index}")
        if options.batch_tokens < 0 or options.max_batch_size < 0:
            raise ValueError("batch_tokens and max_batch_size must be >= 0")
        self.released = options.input_format in RELEASED_SCRIPT_FORMATS
        if self.released:
            check_released_options(options)
        self.options = options
        self.device = torch_device(options.device)
        self.dtype_name = resolve_dtype(options.dtype, self.device)
        check_model_files(options.pretrained, options.revision,
                          what=f"{self.component} pretrained")
        with loading(options.pretrained):
            self.tokenizer = load_tokenizer(
                options.pretrained, revision=options.revision,
                trust_remote_code=options.trust_remote_code,
            )
        self.encoder = encoder_from_options(self.tokenizer, options)
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0
        self.pad_id = int(pad)
        self.description = {
            "scorer": self.component,
            "version": SCORER_VERSION,
            "model": model_identity(options.pretrained, options.revision),
            "dtype": self.dtype_name,
            "attn_implementation": options.attn_implementation,
            **rendering_description(self.encoder),
            "label_index": options.label_index,
            "input_format": options.input_format,
            "pooling": options.pooling,
            "trust_remote_code": options.trust_remote_code,
        }
        self.stats = RunStats(
            ("requests", "computed", "batches", "forward_passes", "shared_groups",
             "shared_tokens_saved", "truncated_profile", "truncated_question", "truncated_left",
             "truncated_end", "invalid_too_long", "padded_tokens", "real_tokens", "oom_retries",
             "wasted_tokens"),
            self._stats_summary,
        )
        self._start_unscored()
        self._last_encoded: dict[int, EncodedInput] = {}  # the last score call's, by request
        self._pool_pad: int | None = None  # the pad id the model's own pooling skips
        self.model: Any = None
        self._parts: tuple[Any, Any] | None = None
        self._pooling = "not loaded"
        self._sharing: bool | None = None  # None: not decided yet
        self._sharing_note = ""
        self._sharing_checked = False  # decided by the check (here or by an earlier run)
        self._adopted: bool | None = None  # the check's outcome stored with the score cache
        self._budget: Any = None  # an AdaptiveLimit once loaded: what back-offs learn stays
        self._packing = False  # plain forwards packed (decided on load)
        self._shared_packing = False  # prefix sharing's forwards packed too
        self._packing_note = "not loaded"

    # -- loading ---------------------------------------------------------------------------------

    @property
    def token_budget(self) -> int:
        """Padded tokens per batch in force (learned by out-of-memory back-offs once loaded)."""
        return self._budget.current if self._budget is not None else self.options.batch_tokens

    @property
    def model_loaded(self) -> bool:
        """Whether the weights have been loaded (a fully cached run never loads them)."""
        return self.model is not None

    def _load(self) -> Any:
        if self.model is not None:
            return self.model
        import torch
        from transformers import AutoModelForSequenceClassification

        from prbench.oom import AdaptiveLimit
        from prbench.scoring.engine import auto_token_budget
        from prbench.scoring.prefix import prefix_sharing_support

        opts = self.options
        kwargs: dict[str, Any] = {
            "revision": opts.revision,
            "dtype": getattr(torch, self.dtype_name),
            "trust_remote_code": opts.trust_remote_code,
        }
        if opts.attn_implementation != "auto":
            kwargs["attn_implementation"] = opts.attn_implementation
        if self.device.type != "cpu":  # load straight onto the accelerator
            kwargs["device_map"] = str(self.device)
        with loading(opts.pretrained):
            model = AutoModelForSequenceClassification.from_pretrained(opts.pretrained, **kwargs)
        model.to(self.device).eval()
        num_labels = int(getattr(model.config, "num_labels", 1))
        if opts.label_index >= num_labels:
            raise ValueError(
                f"label_index={opts.label_index} but the model has {num_labels} logits"
            )
        own_pad = getattr(model.config, "pad_token_id", None)
        if own_pad is None:
            model.config.pad_token_id = self.pad_id
        self.model = model
        self._parts = None if self.released else self._decoder_parts(model)
        if opts.pooling == "last_token" and not self._parts:
            raise ValueError(
                f"pooling=last_token needs a decoder with a linear score head; "
                f"{type(model).__name__} pools in its own forward (use pooling=model)"
            )
        self._pool_pad = own_pad if isinstance(own_pad, int) else None
        self._pooling = self._pooling_note()
        if self.released:
            self._sharing, self._sharing_note = False, f"off (input_format={opts.input_format})"
        elif opts.prefix_sharing == "off":
            self._sharing, self._sharing_note = False, "off (option)"
        else:
            ok, why = prefix_sharing_support(model) if self._parts else (False, "no decoder head")
            if not ok and opts.prefix_sharing == "on":
                raise ValueError(f"prefix_sharing='on' but this model cannot share prefixes: {why}")
            self._sharing = ok if opts.prefix_sharing == "on" else (None if ok else False)
            self._sharing_note = "on (option)" if opts.prefix_sharing == "on" else why
            if ok and self._adopted is not None:
                self._adopt_sharing(self._adopted)
        self._budget = AdaptiveLimit(opts.batch_tokens or auto_token_budget(
            model, self.device, kv_cache=self._sharing is not False, max_length=opts.max_length
        ))
        self._decide_packing(model)
        return model

    def _decide_packing(self, model: Any) -> None:
        """Pack forwards or not (``packing``), and say why in ``resolved.packing``.

        ``auto`` packs on an accelerator where the model supports it and a packed probe scores
        as a padded one; on a CPU padded batches measured faster (docs/scale.md), so ``auto``
        keeps them there. ``on`` packs wherever the model can, else it is an error.

        Raises:
            OptionsError: ``packing=on`` and the model cannot pack (the reason named).
        """
        from prbench.scoring.packing import one_row_only, packing_support, shared_packing_support

        opts = self.options
        if self.released:
            self._packing_note = f"off (input_format={opts.input_format})"
            return
        if opts.packing == "off":
            self._packing_note = "off (option)"
            return
        ok, why = packing_support(model, self._parts[0]) if self._parts else (
            False, "the model pools in its own forward (no decoder with a linear score head)")
        if ok and opts.packing == "auto" and self.device.type == "cpu":
            self._packing_note = ("off (auto: padded batches are faster on a CPU; packing=on "
                                  "packs)")
            return
        if ok:
            ok, why = self._packing_probe()
        if not ok:
            if opts.packing == "on":
                from prbench.options import OptionsError

                raise OptionsError(f"{self.component}: packing='on' but this model cannot pack "
                                   f"sequences: {why}; use packing=auto or packing=off")
            self._packing_note = f"off: {why}"
            return
        self._packing = True
        shared, reason = shared_packing_support(model)
        self._shared_packing = shared
        one = ", one per forward pass (flash attention)" if one_row_only(model) else ""
        self._packing_note = (
            f"on ({'option' if opts.packing == 'on' else 'auto'}; rows of up to "
            f"{self._row_tokens()} tokens{one}; shared prompts "
            + ("packed too)" if shared else f"padded: {reason})"))

    def _row_tokens(self) -> int:
        """The most tokens of a packed row: the module's row size, within the token budget.

        A kernel that reads packed boundaries only in one row (flash attention) gets rows as
        long as the token budget, one per forward pass.
        """
        from prbench.scoring.packing import PACK_ROW_TOKENS, one_row_only

        if one_row_only(self.model):
            return max(1, self._budget.current)
        return max(1, min(PACK_ROW_TOKENS, self._budget.current))

    def _packing_probe(self) -> tuple[bool, str]:
        """Score three probe inputs packed (as runs pack them) and padded; they must agree.

        A model whose code ignores the packed boundaries (e.g. a mask of its own that transformers'
        packed path does not reach) gives other scores packed: it then keeps padded batches.
        """
        from prbench.scoring.packing import one_row_only

        short = self.encoder.encode(["Is this right?"], ["Yes."], [""])[0].ids
        long = self.encoder.encode(["Which one, and why?"], ["The second one, clearly."],
                                   [""])[0].ids
        seqs = [long, short, short]  # packed as the runs pack: several rows, or one
        rows = [seqs] if one_row_only(self.model) else [seqs[:2], seqs[2:]]
        padded = self._forward_plain(seqs, count=False)
        packed = self._forward_packed(rows, count=False)
        tol = 1e-3 if self.dtype_name == "float32" else 5e-2
        worst = max(abs(a - b) / (1.0 + abs(a)) for a, b in zip(padded, packed, strict=True))
        if not worst <= tol:
            return False, (f"packed and padded probe scores differ by {worst:.1e} (> {tol:.0e}): "
                           "the model does not honour packed sequence boundaries")
        return True, ""

    def _pooling_note(self) -> str:
        """Which token is read, in words (the manifest's ``resolved.pooling``)."""
        if not self._parts:
            side = f", {self.tokenizer.padding_side} padding" if self.released else ""
            return f"the model's own forward{side}"
        if self.options.pooling == "last_token":
            return "last token, pad tokens included (pooling=last_token)"
        if self._pool_pad is None:
            return "last token (the model's config has no pad token; pooling=model)"
        return (
            f"last token that is not the pad token {self._pool_pad} "
            "(the model's rule; pooling=model)"
        )

    def _pooled(self, ids: list[int]) -> list[int]:
        """``ids`` up to the token the reward is read at.

        With ``pooling=model`` on a decoder, the pad tokens that end an input are dropped: the
        model's own forward reads the last token that is not the pad token, and in a causal
        decoder the tokens after it do not change its state. Prefix sharing then groups the
        sequences as scored, so both paths read the same token.
        """
        pad = self._pool_pad
        if not self._parts or self.options.pooling != "model" or pad is None:
            return ids
        end = len(ids)
        while end > 1 and ids[end - 1] == pad:
            end -= 1
        return ids[:end]

    def _decoder_parts(self, model: Any) -> tuple[Any, Any] | None:
        """The (decoder, head) pair when prbench can pool the model itself, else ``None``.

        That is a decoder with a linear ``score`` head whose own forward applies the head at the
        last token: transformers' generic classifier head, or any other head that agrees with
        the model's own forward on a probe input.
        """
        import torch

        head = getattr(model, "score", None)
        base = getattr(model, getattr(model, "base_model_prefix", "model"), None)
        if not isinstance(head, torch.nn.Linear) or base is None:
            return None
        from transformers.modeling_layers import GenericForSequenceClassification

        if isinstance(model, GenericForSequenceClassification):
            return base, head
        probe = self.encoder.encode(["Is this right?"], ["Yes."], [""])[0].ids
        ids = torch.as_tensor([probe], device=self.device)
        with torch.inference_mode():
            theirs = model(input_ids=ids).logits[0].float()
            hidden = base(input_ids=ids).last_hidden_state[0, -1]
            ours = head(hidden).float()
        if torch.allclose(theirs, ours, rtol=1e-3, atol=1e-3):
            return base, head
        logger.info("%s: custom head; using the model's own forward", type(model).__name__)
        return None

    # -- forward ---------------------------------------------------------------------------------

    def _forward_plain(self, seqs: Sequence[Sequence[int]], count: bool = True) -> list[float]:
        import torch

        from prbench.scoring.engine import last_token_index, pad_batch

        side = self.tokenizer.padding_side if self.released else "right"
        ids, mask, pos = pad_batch(seqs, pad_id=self.pad_id, side=side, device=self.device)
        with torch.inference_mode():
            if self._parts:
                base, head = self._parts
                hidden = base(
                    input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False
                ).last_hidden_state
                rows = torch.arange(len(seqs), device=hidden.device)
                logits = head(hidden[rows, last_token_index(mask)])
            else:
                logits = self.model(input_ids=ids, attention_mask=mask).logits
        if count:
            self.stats["forward_passes"] += 1
            self.stats["padded_tokens"] += int(mask.numel())
            self.stats["real_tokens"] += int(mask.sum())
        if self.released:
            return released_rewards(logits)
        return logits[:, self.options.label_index].float().cpu().tolist()

    def _forward_packed(
        self, rows: Sequence[Sequence[Sequence[int]]], count: bool = True
    ) -> list[float]:
        """Score sequences packed end to end in rows (transformers' packed path).

        Position ids restart at 0 for each sequence and no attention mask is passed: the model's
        mask builder then keeps the sequences apart (:mod:`prbench.scoring.packing`).

        Returns:
            One score per sequence, row by row.
        """
        import torch

        from prbench.scoring.packing import packed_row_inputs

        base, head = self._parts  # type: ignore[misc]
        ids, pos, last = packed_row_inputs(rows, pad_id=self.pad_id, device=self.device)
        with torch.inference_mode():
            hidden = base(input_ids=ids, position_ids=pos, use_cache=False).last_hidden_state
            r_idx = torch.as_tensor([r for r, ends in enumerate(last) for _ in ends],
                                    device=hidden.device)
            c_idx = torch.as_tensor([c for ends in last for c in ends], device=hidden.device)
            logits = head(hidden[r_idx, c_idx])
        if count:
            self.stats["forward_passes"] += 1
            self.stats["padded_tokens"] += int(ids.numel())
            self.stats["real_tokens"] += sum(len(s) for row in rows for s in row)
        return logits[:, self.options.label_index].float().cpu().tolist()

    def _forward_shared(self, groups: Sequence[Any]) -> list[list[float]]:
        import torch

        from prbench.scoring.engine import batch_overhead_tokens, pad_free_threshold
        from prbench.scoring.prefix import shared_prefix_hidden

        base, head = self._parts  # type: ignore[misc]
        with torch.inference_mode():
            if self._shared_packing:
                from prbench.scoring.packing import attention_kind, packed_shared_hidden

                hidden = packed_shared_hidden(
                    base, groups, pad_id=self.pad_id, device=self.device, counter=self.stats,
                    row_tokens=self._row_tokens(),
                    additive=attention_kind(self.model) == "eager",
                    batch_overhead=batch_overhead_tokens(self.device),
                    max_batch_size=self.options.max_batch_size or None,
                    token_budget=self._budget.current,
                )
            else:
                hidden = shared_prefix_hidden(
                    base, groups, pad_id=self.pad_id, device=self.device, counter=self.stats,
                    pad_free_from=pad_free_threshold(self.device),
                    batch_overhead=batch_overhead_tokens(self.device),
                    max_batch_size=self.options.max_batch_size or None,
                    token_budget=self._budget.current,
                )
            logits = head(torch.stack(hidden))[:, self.options.label_index].float().cpu().tolist()
        out, k = [], 0
        for g in groups:
            out.append(logits[k : k + len(g.members)])
            k += len(g.members)
        return out

    def _verify_sharing(self, group: Any, stats: Any) -> None:
        """Score a few members of one group plainly and shared; share only if they agree.

        The check runs on at most :data:`~prbench.scoring.prefix.CHECK_MEMBERS` members, through
        the same token budget and out-of-memory back-off as any batch (``stats`` gets its
        batches). Both results are thrown away: the group is then scored like every other
        group, so a stored score never depends on which group a run happened to verify on (a
        resumed run verifies on a different one) and resumed runs give the uninterrupted run's
        scores.
        """
        from prbench.scoring.prefix import check_sample

        sample = check_sample(group)
        seqs = [list(sample.prefix) + list(s) for s in sample.suffixes]
        plain = self._run_plain(seqs, stats)
        shared = self._run_shared([sample], stats)[0]
        tol = 1e-3 if self.dtype_name == "float32" else 5e-2
        worst = max(abs(a - b) / (1.0 + abs(a)) for a, b in zip(plain, shared, strict=True))
        self._sharing, self._sharing_checked = worst <= tol, True
        self._sharing_note = (
            f"verified (max relative difference {worst:.1e})" if self._sharing
            else f"disabled: shared and plain scores differ by {worst:.1e} (> {tol:.0e})"
        )
        if not self._sharing:
            logger.warning("prefix sharing %s", self._sharing_note)

    def _adopt_sharing(self, value: bool) -> None:
        self._sharing, self._sharing_checked = value, True
        self._sharing_note = f"{'verified' if value else 'disabled'} (check stored with the cache)"

    def decisions(self) -> dict[str, Any]:
        """The sharing check's outcome once made (``prefix_sharing=auto``), for the score cache.

        The check runs on the first group a process meets: a resumed process would check another.
        """
        checked = self.options.prefix_sharing == "auto" and self._sharing_checked
        return {"prefix_sharing": bool(self._sharing)} if checked else {}

    def adopt_decisions(self, decisions: Mapping[str, Any]) -> None:
        """Take the sharing check's outcome from an earlier run under this fingerprint."""
        value = decisions.get("prefix_sharing")
        if self.options.prefix_sharing == "auto" and not self.released and isinstance(value, bool):
            self._adopted = value
            if self.model is not None and (self._sharing is not False or self._sharing_checked):
                self._adopt_sharing(value)

    def _run_plain(
        self, seqs: Sequence[Sequence[int]], stats: Any, on_batch: Any = None
    ) -> list[float]:
        """Score whole sequences in token-budgeted batches (the engine backs off on OOM).

        With packing, the sequences are first packed into rows and the rows are the engine's
        items (a batch of rows is one forward pass).
        """
        from prbench.scoring.engine import batch_overhead_tokens, pad_free_threshold, run_batches

        if self._packing:
            return self._run_packed(seqs, stats, on_batch)
        return run_batches(
            [len(s) for s in seqs], lambda batch: self._forward_plain([seqs[i] for i in batch]),
            token_budget=self._budget, max_batch_size=self.options.max_batch_size or None,
            pad_free_from=pad_free_threshold(self.device),
            batch_overhead=batch_overhead_tokens(self.device), on_batch=on_batch, stats=stats,
        )

    def _run_packed(
        self, seqs: Sequence[Sequence[int]], stats: Any, on_batch: Any = None
    ) -> list[float]:
        """:meth:`_run_plain` with the sequences packed into rows (``packing`` on)."""
        from prbench.scoring.engine import batch_overhead_tokens, run_batches
        from prbench.scoring.packing import one_row_only, plan_rows, row_width

        lengths = [len(s) for s in seqs]
        cap = self.options.max_batch_size or None  # sequences per forward: a row, run alone
        rows = plan_rows(lengths, row_width(lengths, self._row_tokens()), cap)

        def forward(batch: list[int]) -> list[list[float]]:
            flat = self._forward_packed([[seqs[i] for i in rows[r]] for r in batch])
            out, k = [], 0
            for r in batch:
                out.append(flat[k : k + len(rows[r])])
                k += len(rows[r])
            return out

        def done(batch: list[int], out: list[list[float]]) -> None:
            if on_batch is not None:
                on_batch([i for r in batch for i in rows[r]], [s for o in out for s in o])

        one_row = one_row_only(self.model) or cap is not None
        per_row = run_batches(
            [sum(lengths[i] for i in row) for row in rows], forward, token_budget=self._budget,
            max_batch_size=1 if one_row else None,
            batch_overhead=batch_overhead_tokens(self.device), on_batch=done, stats=stats,
            weights=[len(row) for row in rows],
        )
        scores = [math.nan] * len(seqs)
        for row, values in zip(rows, per_row, strict=True):
            for i, value in zip(row, values, strict=True):
                scores[i] = value
        return scores

    def _run_shared(self, groups: Sequence[Any], stats: Any, on_batch: Any = None) -> list[Any]:
        """Score prefix groups in token-budgeted batches; a group alone may back off inside."""
        from prbench.scoring.engine import run_batches

        return run_batches(
            [g.real_tokens for g in groups],
            lambda batch: self._forward_shared([groups[g] for g in batch]),
            token_budget=self._budget, max_batch_size=self.options.max_batch_size or None,
            on_batch=on_batch, weights=[len(g.members) for g in groups], stats=stats,
            floors=[len(g.prefix) + max(len(x) for x in g.suffixes) for g in groups],
        )

    def _compute(self, seqs: list[list[int]], keys: list[Hashable]) -> list[float]:
        """Scores for ``seqs``; ``keys`` group the sequences that may share a prompt."""
        from prbench.scoring.engine import BatchStats
        from prbench.scoring.prefix import group_shared_prefixes

        self._load()
        results: list[float] = [math.nan] * len(seqs)
        stats = BatchStats()

        def store(indices: Sequence[int], scores: Sequence[float]) -> None:
            for i, s in zip(indices, scores, strict=True):
                results[i] = s

        try:
            singles = list(range(len(seqs)))
            if self._sharing is not False:
                groups, singles = group_shared_prefixes(
                    seqs, keys, min_prefix_tokens=self.options.prefix_min_tokens
                )
                if groups and self._sharing is None:
                    self._verify_sharing(min(groups, key=lambda g: g.real_tokens), stats)
                    if not self._sharing:
                        singles += [m for g in groups for m in g.members]
                        groups = []
                if groups:
                    self.stats["shared_groups"] += len(groups)
                    self.stats["shared_tokens_saved"] += sum(g.saved_tokens for g in groups)

                    def on_groups(batch: list[int], out: list[list[float]]) -> None:
                        for g_idx, scores in zip(batch, out, strict=True):
                            store(groups[g_idx].members, scores)

                    self._run_shared(groups, stats, on_groups)
            if singles:
                self._run_plain(
                    [seqs[i] for i in singles], stats,
                    lambda batch, out: store([singles[j] for j in batch], out),
                )
        finally:
            self.stats["batches"] += stats.batches
            self.stats["oom_retries"] += stats.oom_retries
            self.stats["wasted_tokens"] += stats.wasted_tokens
        self.stats["computed"] += len(seqs)
        return results

    # -- public API ------------------------------------------------------------------------------

    def encode(self, requests: Sequence[ScoreRequest]) -> list[list[int]]:
        """The token ids rendered for each request (``[]`` for an input too long to score).

        These are the model's input; with ``pooling=model`` a decoder reads them up to their
        last token that is not the pad token.

        Raises:
            TypeError: a request whose question or response is not a string (named by index and
                record id).
        """
        return [e.ids for e in self._encode_inputs(requests)]

    def _encode_inputs(self, requests: Sequence[ScoreRequest], *, count: bool = True
                       ) -> list[EncodedInput]:
        if self.released:
            check_request_texts(requests)
            return self._encode_released(requests, count=count)
        encoded = encode_requests(self.encoder, requests)
        for e in encoded:
            if e.truncated and count:
                self.stats[f"truncated_{e.truncated}"] += 1
        return encoded

    def request_inputs(self, requests: Sequence[ScoreRequest], *, sent: bool
                       ) -> list[dict[str, Any] | None]:
        """The input as scored of each request (:mod:`prbench.backends.input_record`).

        Args:
            requests: the requests of the last :meth:`score` call (``sent=True``: what it
                tokenised, nothing encoded again), or score-cache hits (``sent=False``: encoded
                now, nothing run through the model, no counts changed).
            sent: which of the two.
        """
        from prbench.backends.input_record import encoded_records, kept_inputs, shown_profiles

        requests = list(requests)
        if sent:
            encoded = kept_inputs(self._last_encoded, requests)
            if encoded is None:
                return [None] * len(requests)
        else:
            encoded = self._encode_inputs(requests, count=False)
        shows = self.options.input_format != "released"
        return list(encoded_records(self.encoder, encoded,  # type: ignore[arg-type]
                                    shown_profiles(self.encoder, requests, shows=shows)))

    def _encode_released(self, requests: Sequence[ScoreRequest], *, count: bool = True
                         ) -> list[EncodedInput]:
        """The released script's inputs.

        ``released`` (``pointwise.py``) shows no profile: one is an error. ``released_bon``
        (``BoN/score.py``) shows the question followed by the released posts.
        """
        if self.options.input_format == "released_bon":
            encoded = self.encoder.encode_released(
                [r.question for r in requests], [r.response for r in requests],
                profile_texts(self.encoder, requests),
            )
            self.stats["truncated_end"] += sum(1 for e in encoded if e.truncated) * count
            return encoded
        if self.options.profile_position != "none":
            for i, r in enumerate(requests):
                if r.profile.text:
                    raise ValueError(
                        f"request {i} (record {r.record_id!r}) has a profile, but "
                        "input_format=released reproduces the released pointwise script, which "
                        "shows the reward model no profile; use a _noprofile task, or "
                        "profile_position=none to drop the profile"
                    )
        encoded = self.encoder.encode_released(
            [r.question for r in requests], [r.response for r in requests]
        )
        self.stats["truncated_end"] += sum(1 for e in encoded if e.truncated) * count
        return encoded

    def default_chunk_size(self) -> int:
        """Requests per runtime chunk when ``chunk_size`` is 0 (auto): per device, measured.

        :data:`CUDA_CHUNK_SIZE` on a CUDA device, the runtime's default (256) elsewhere
        (docs/scale.md has both tables).
        """
        from prbench.scoring.runtime_options import DEFAULT_CHUNK_SIZE

        return CUDA_CHUNK_SIZE if self.device.type == "cuda" else DEFAULT_CHUNK_SIZE

    def fingerprint(self) -> str:
        """A hex id of everything that changes the scores (the score-cache key prefix).

        It covers the model files or hub commit, dtype, template, profile placement, lengths,
        truncation rule, BOS policy, pooling rule, label index and input format; not batch size,
        device or prefix sharing (scores do not depend on them). The scorer runtime keys the
        persistent score cache with it.
        """
        return fingerprint_of(self.description)

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """One reward per request, in order (the runtime dedups and caches; this computes)."""
        from prbench.oom import uncounted_if_out_of_memory

        requests = list(requests)
        if not requests:
            return []
        scores = [math.nan] * len(requests)
        with uncounted_if_out_of_memory(self.stats):  # the runtime redoes a chunk out of memory
            self.stats["requests"] += len(requests)
            encoded = self._encode_inputs(requests)
            # kept for request_inputs (the input as scored), the runtime asks right after
            self._last_encoded = {id(r): e for r, e in zip(requests, encoded, strict=True)}
            valid = [i for i, e in enumerate(encoded) if not e.invalid]
            if valid:
                self._load()
                seqs = [self._pooled(encoded[i].ids) for i in valid]
                keys = [(requests[i].question, requests[i].profile.text) for i in valid]
                for i, score in zip(valid, self._compute(seqs, keys), strict=True):
                    scores[i] = score
            self.stats["invalid_too_long"] += len(requests) - len(valid)
        self._record_invalid(requests, encoded)
        return check_scores(scores, len(requests), self.component)

    def _record_invalid(
        self, requests: Sequence[ScoreRequest], encoded: Sequence[EncodedInput]
    ) -> None:
        """Keep the reason of every input left unscored, and say so once per call."""
        bad = [(r, e.invalid) for r, e in zip(requests, encoded, strict=True) if e.invalid]
        self._last_invalid = {id(r): why for r, why in bad}
        if not bad:
            return
        for r, why in bad:
            self._failures.append(
                {"item": r.record_id, "stage": "encode", "reason": "too-long", "detail": why}
            )
        logger.warning(
            "%s: %d input(s) not scored (their pairs count as invalid): %s", self.component,
            len(bad), bad[0][1] + (f"; and {len(bad) - 1} more" if len(bad) > 1 else ""),
        )

    def _sharing_state(self) -> str:
        return self._sharing_note or ("pending" if self._sharing is None else "")

    def _stats_summary(self) -> dict[str, Any]:
        counts = dict(self.stats)
        slots, real = counts["padded_tokens"], counts["real_tokens"]
        return {
            **counts,
            "padded_fraction": 1.0 - real / slots if slots else 0.0,
            "prefix_sharing": self._sharing_state() if self.model_loaded else "not loaded",
            "packing": self._packing_note,
            "token_budget": self.token_budget,
        }

    def describe(self) -> dict[str, Any]:
        """Settings and counts for results manifests (fingerprint, resolved options, stats)."""
        from prbench.options import options_to_dict

        return {
            "component": self.component,
            "fingerprint": self.fingerprint(),
            "options": options_to_dict(self.options),
            "resolved": {
                "device": str(self.device),
                "dtype": self.dtype_name,
                "bos": dataclasses.asdict(self.encoder.bos),
                "chat_template_sha256": template_sha256(self.encoder.template),
                "pooling": self._pooling,
                "prefix_sharing": self._sharing_state(),
                "packing": self._packing_note,
                "token_budget": self.token_budget,
            },
            "stats": dict(self.stats),
        }

    def close(self) -> None:
        """Release the model weights (and accelerator memory); a later score() reloads them."""
        from prbench.oom import free_accelerator_memory

        loaded = self.model is not None
        self.model = None
        self._parts = None
        if loaded:
            free_accelerator_memory()
