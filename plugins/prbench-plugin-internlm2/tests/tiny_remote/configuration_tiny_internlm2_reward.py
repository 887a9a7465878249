"""Remote-code config of the test's tiny InternLM2-style reward model (loaded by transformers)."""

from transformers import PretrainedConfig


class TinyInternLM2RewardConfig(PretrainedConfig):
    """A tiny decoder with a value head read at a reward token."""

    model_type = "tiny_internlm2_reward"

    def __init__(
        self,
        vocab_size: int = 400,
        hidden_size: int = 32,
        num_hidden_layers: int = 2,
        num_attention_heads: int = 4,
        reward_token_id: int = 0,
        pad_token_id: int = 0,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.reward_token_id = reward_token_id
        super().__init__(pad_token_id=pad_token_id, **kwargs)
