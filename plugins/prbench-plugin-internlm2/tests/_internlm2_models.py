"""A tiny local checkpoint whose remote code (internlm2_remote/) has InternLM2-Reward's API."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

REMOTE = Path(__file__).parent / "internlm2_remote"
REWARD_TOKEN = "[UNUSED_TOKEN_130]"  # the reward token's name in the real InternLM2 vocabulary
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>", REWARD_TOKEN]
_WORDS_TEXT = (
    "the a of to in and with for on my your i you we it is are was be have do can should "
    "music film book song guitar piano garden cooking travel sleep habit running budget "
    "career family friend culture history language school practice play write read listen "
    "walk plan photography lens camera night light art paint dance theatre poem story "
    "meditation morning "
)
WORDS = tuple(_WORDS_TEXT.split())
#: InternLM2's chat format: the template writes the BOS; roles between im_start / im_end.
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_reward_folder(path: Path, seed: int = 0) -> Path:
    """Write tokenizer, remote code, config (with ``auto_map``) and random weights to ``path``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoConfig, AutoModel, PreTrainedTokenizerFast

    rng = random.Random(seed)
    corpus = [" ".join(rng.choice(WORDS) for _ in range(30)) for _ in range(200)]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainer=trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    ))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
        unk_token="<unk>", additional_special_tokens=SPECIALS[4:],
    )
    fast.chat_template = TEMPLATE
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(path)
    for src in REMOTE.glob("*.py"):
        shutil.copy(src, path / src.name)
    config = {
        "model_type": "internlm2",
        "architectures": ["InternLM2ForRewardModel"],
        "auto_map": {  # as in the released checkpoints' config.json
            "AutoConfig": "configuration_internlm2.InternLM2Config",
            "AutoModel": "modeling_internlm2.InternLM2ForRewardModel",
        },
        "vocab_size": len(fast),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "use_cache": True,
        "bos_token_id": fast.bos_token_id,
        "eos_token_id": fast.eos_token_id,
        "reward_token_id": fast.convert_tokens_to_ids(REWARD_TOKEN),
        "pad_token_id": fast.pad_token_id,
    }
    (path / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    torch.manual_seed(seed)
    model = AutoModel.from_config(AutoConfig.from_pretrained(path, trust_remote_code=True),
                                  trust_remote_code=True)
    with torch.no_grad():  # spread the random head so that scores differ well above float noise
        model.v_head.weight.normal_(0.0, 1.0)
    # save_pretrained trips over the list-form _tied_weights_keys under transformers 5 (as the real
    # checkpoints' class does); write the weights file directly, as a hub download would bring it
    from safetensors.torch import save_file

    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    return path
