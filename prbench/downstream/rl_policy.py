"""The policy an RL run trains: checked before any work, loaded trainable, copied for evaluation.

A policy is a Hugging Face causal LM folder or hub id, or a GGUF file inside one (de-quantized to
float32 when loaded, then unmarked as quantized so the Trainer fine-tunes it). Code shipped with a
policy runs only with ``trust_remote_code``; ``train_layers`` leaves only the top blocks trainable.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prbench.downstream.rl_config import RLConfig


def check_policy(config: RLConfig) -> None:
    """Fail early, in one line, when the policy's config or tokenizer cannot load as set.

    Both are loaded with ``trust_remote_code`` passed explicitly (transformers would otherwise
    ask on standard input, and a "y" would run the folder's code). A GGUF policy is not checked
    here (the file holds no code; it loads with the model).

    Raises:
        OptionsError: the policy needs code shipped with it and ``trust_remote_code`` is off, or
            it cannot be loaded at all (the folder and the reason named).
    """
    from transformers import AutoConfig, AutoTokenizer

    from prbench.model_ref import remote_code_error
    from prbench.options import OptionsError

    if config.gguf_file:
        return  # a GGUF file carries no code, and reading it twice would cost seconds
    try:
        AutoConfig.from_pretrained(config.policy, trust_remote_code=config.trust_remote_code)
        AutoTokenizer.from_pretrained(config.policy, trust_remote_code=config.trust_remote_code)
    except (OSError, ValueError) as exc:
        if remote_code_error(config.policy, exc) is not None:
            raise OptionsError(
                f"policy {config.policy}: this model needs code shipped with it (an auto_map in "
                "its config) to load; prbench runs such code only with --trust_remote_code "
                "(option trust_remote_code=true of online-rl); pass it only if you have read "
                "and trust that code"
            ) from None
        detail = " ".join(str(exc).split())
        raise OptionsError(f"policy {config.policy}: cannot load it: {detail}") from None


def load_policy(config: RLConfig) -> tuple[Any, Any]:
    """The policy and its tokenizer, ready to train (float32; GGUF unmarked; lower blocks frozen).

    A tokenizer without a pad token pads with its end-of-text token.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    extra = {"gguf_file": config.gguf_file} if config.gguf_file else {}
    trust = config.trust_remote_code
    tokenizer = AutoTokenizer.from_pretrained(config.policy, trust_remote_code=trust, **extra)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(config.policy, dtype=torch.float32,
                                                 trust_remote_code=trust, **extra)
    if config.gguf_file:
        unmark_gguf(model)
    if config.train_layers:
        freeze_below(model, config.train_layers)
    return model, tokenizer


def freeze_below(model: Any, n: int) -> int:
    """Leave only the top ``n`` decoder blocks and the final norm trainable.

    Returns:
        The number of trainable parameters.

    Raises:
        OptionsError: the model has no list of decoder blocks where transformers keeps them
            (``model.get_decoder().layers``), or fewer than ``n``.
    """
    from prbench.options import OptionsError

    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    blocks = getattr(decoder, "layers", None)
    if blocks is None:
        raise OptionsError(f"train_layers: cannot find the decoder blocks of {type(model).__name__}"
                         "; use train_layers=0 (train every weight)")
    if n > len(blocks):
        raise OptionsError(f"train_layers={n}, but the policy has only {len(blocks)} blocks")
    for param in model.parameters():
        param.requires_grad_(False)
    trainable = [*blocks[len(blocks) - n:]]
    norm = getattr(decoder, "norm", None)
    if norm is not None:
        trainable.append(norm)
    for module in trainable:
        for param in module.parameters():
            param.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@contextlib.contextmanager
def plain_copy(config: RLConfig, model: Any, tokenizer: Any, out_dir: Path) -> Iterator[str]:
    """The policy as a folder the evaluation can load quickly.

    A GGUF policy is de-quantized once (:func:`load_policy`, tens of seconds on a CPU); the
    evaluation before training loads a plain float copy of it from a temporary folder inside
    ``out_dir`` (removed afterwards) instead of de-quantizing the file a second time. Any other
    policy is evaluated from where it is.
    """
    if not config.gguf_file:
        yield config.policy
        return
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".initial-policy-") as folder:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        yield folder


def unmark_gguf(model: Any) -> None:
    """Make a model loaded from a GGUF file trainable and savable as a plain checkpoint.

    transformers de-quantizes GGUF weights into ordinary float tensors when it loads them, but
    leaves the model flagged as quantized, and the Trainer refuses to fine-tune a quantized model.
    The weights really are float32 here, so full fine-tuning is sound: drop the flag, the
    quantizer and the ``quantization_config`` (the final policy is then saved as safetensors).
    """
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None and type(quantizer).__name__ != "GgufHfQuantizer":
        raise ValueError(f"the policy is quantized with {type(quantizer).__name__}; only GGUF "
                         "weights (de-quantized on load) can be fully fine-tuned here")
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
