"""Test fixture: a config with the field names of the InternLM2-Reward checkpoints' remote config.

Written for prbench's tests (not the authors' file): ``model_type`` ``internlm2`` and the fields
the real ``InternLM2Config`` carries, including ``reward_token_id`` and ``use_cache`` (true by
default, which is what sends the real forward into ``DynamicCache.from_legacy_cache``).
"""

from transformers import PretrainedConfig


class InternLM2Config(PretrainedConfig):
    """Hyper-parameters of a (tiny) InternLM2 reward model."""

    model_type = "internlm2"
    _auto_class = "AutoConfig"

    def __init__(
        self,
        vocab_size=400,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        hidden_act="silu",
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        use_cache=True,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        reward_token_id=6,
        bias=False,
        rope_theta=10000.0,
        rope_scaling=None,
        attn_implementation="eager",
        tie_word_embeddings=False,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.hidden_act = hidden_act
        self.max_position_embeddings = max_position_embeddings
        self.rms_norm_eps = rms_norm_eps
        self.use_cache = use_cache
        self.reward_token_id = reward_token_id
        self.bias = bias
        self.rope_theta = rope_theta
        self.rope_scaling = rope_scaling
        self.attn_implementation = attn_implementation
        super().__init__(
            pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id,
            tie_word_embeddings=tie_word_embeddings, **kwargs,
        )
