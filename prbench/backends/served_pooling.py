"""Which token a served reward model is read at, and the ids that make the server read it there.

vLLM and SGLang pool a sequence classifier at the last token of the ids they receive. The model's
own forward in transformers (the generic ``*ForSequenceClassification`` head of the decoders:
Llama, Qwen2/3, Mistral, Gemma, ...) reads the last token that is not ``config.pad_token_id``.
The two differ when a rendered chat ends with the pad token (ChatML with pad ``<|im_end|>``,
SmolLM2-style templates): the server would score the pad. In a causal decoder the tokens after a
position do not change its state, so dropping the pad ids that end an input makes the server's
last token the model's, with the same value.

:func:`pooling_rule` reads the served model's ``config.json`` (a local folder, or the hub id
through the Hugging Face cache) and returns the :class:`PoolingRule`: which pad id to drop, or,
where the model's rule cannot be known, which ending to refuse. ``served-rm`` applies it
(:mod:`prbench.backends.served_rm`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prbench.errors import PrbenchUserError


class ServedPoolingError(PrbenchUserError, ValueError):
    """An input whose scored position cannot be made the model's own."""


@dataclasses.dataclass(frozen=True)
class PoolingRule:
    """What ``served-rm`` does to an input's ids so the server reads the model's token.

    Attributes:
        drop_pad: the pad id dropped from the end of every input (``None``: nothing dropped).
        refuse_pad: where the model's rule is unknown, the tokenizer's pad id: an input ending
            with it is refused (:meth:`ids` raises) rather than scored at the pad.
        note: which position is read, in words (the manifest's ``resolved.pooling``).
        unknown: why the model's rule is unknown (``""`` where it is known).
    """

    drop_pad: int | None
    refuse_pad: int | None
    note: str
    unknown: str = ""

    def ids(self, ids: Sequence[int], record_id: str, tokenizer: Any) -> list[int]:
        """``ids`` as sent: without the pad ids that end them (at least one id is kept).

        Raises:
            ServedPoolingError: the model's rule is unknown and ``ids`` end with the pad token.
        """
        out = list(ids)
        if self.refuse_pad is not None and out and out[-1] == self.refuse_pad:
            token = tokenizer.convert_ids_to_tokens(self.refuse_pad)
            raise ServedPoolingError(
                f"served-rm: the input of record {record_id!r} ends with the pad token "
                f"{self.refuse_pad} ({token!r}); the server would read that pad, the model's own "
                f"forward an earlier token, and the model's pooling rule is unknown "
                f"({self.unknown}). Pass tokenizer=<the served model's folder or hub id, with its "
                "config.json>, or pooling=last_token to score the last token as the server pools it"
            )
        if self.drop_pad is not None:
            end = len(out)
            while end > 1 and out[end - 1] == self.drop_pad:
                end -= 1
            out = out[:end]
        return out


def read_config(source: str, revision: str) -> tuple[dict[str, Any] | None, str]:
    """The model's ``config.json`` from a local folder or the hub (cache), and why not if not."""
    local = Path(source).expanduser()
    if local.is_dir():
        path = local / "config.json"
        if not path.is_file():
            return None, f"the folder {source} has no config.json"
    else:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import HfHubHTTPError

        try:
            path = Path(hf_hub_download(source, "config.json", revision=revision))
        except (OSError, ValueError, HfHubHTTPError) as exc:
            first_line = str(exc).split("\n")[0][:160]
            return None, f"config.json of {source!r} could not be read: {first_line}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"{path} could not be read as JSON: {exc}"
    if not isinstance(data, dict):
        return None, f"{path} is not a JSON object"
    return data, ""


def model_kind(config: dict[str, Any]) -> str:
    """``decoder`` (pools at its last non-pad token), ``encoder`` (its own pooler) or ``unknown``.

    A decoder is a model type transformers lists among causal LMs and not among masked LMs,
    without code of its own (``auto_map``) and not an encoder-decoder.
    """
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    model_type = config.get("model_type")
    if not isinstance(model_type, str) or config.get("auto_map"):
        return "unknown"
    if model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES or config.get("is_encoder_decoder"):
        return "encoder"
    return "decoder" if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES else "unknown"


def pooling_rule(source: str, *, revision: str, pooling: str, tokenizer: Any) -> PoolingRule:
    """The rule for the model whose files are at ``source`` (see the module docstring).

    Args:
        source: the served model's local folder or hub id (``served-rm``'s ``tokenizer=``, else
            the served model name).
        revision: the hub revision.
        pooling: ``model`` (read the model's own token) or ``last_token`` (the server's).
        tokenizer: the served model's tokenizer (its pad id where the config is unknown).
    """
    if pooling == "last_token":
        return PoolingRule(None, None, "last token sent, pad tokens included (pooling=last_token: "
                                       "the server's own pooling)")
    config, why = read_config(source, revision)
    kind = model_kind(config) if config is not None else "unknown"
    if config is not None and kind == "encoder":
        return PoolingRule(None, None, f"the server's pooler for the {config.get('model_type')} "
                                       "encoder, ids sent whole (the model's own; pooling=model)")
    if config is None or kind == "unknown":
        if config is not None:
            why = (f"model_type {config.get('model_type')!r} is not a decoder transformers lists"
                   + (" (it has code of its own)" if config.get("auto_map") else ""))
        tok_pad = getattr(tokenizer, "pad_token_id", None)
        refuse = tok_pad if isinstance(tok_pad, int) and not isinstance(tok_pad, bool) else None
        return PoolingRule(None, refuse, "last token sent (the model's pooling rule is unknown: "
                                         f"{why}; an input ending with the pad token is refused)",
                           unknown=why)
    pad = config.get("pad_token_id")
    if not isinstance(pad, int) or isinstance(pad, bool):
        return PoolingRule(None, None, "last token (the model's config has no pad token; "
                                       "pooling=model)")
    return PoolingRule(pad, None, f"last token that is not the pad token {pad} (the model's rule; "
                                  "trailing pad ids not sent; pooling=model)")


__all__ = ["PoolingRule", "ServedPoolingError", "model_kind", "pooling_rule", "read_config"]
