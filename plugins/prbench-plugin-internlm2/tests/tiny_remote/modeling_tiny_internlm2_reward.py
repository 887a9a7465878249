"""Remote code of the test's tiny reward model: the InternLM2-Reward scoring interface.

Like the real checkpoints: a chat is rendered with the tokenizer's chat template, encoded without
special tokens, the reward token is appended, and a value head is read at that token;
``get_score`` scores one chat, ``get_scores`` a right-padded batch.
"""

import torch
from torch import nn
from transformers import PreTrainedModel

from .configuration_tiny_internlm2_reward import TinyInternLM2RewardConfig


class TinyInternLM2RewardModel(PreTrainedModel):
    """Embedding + causal transformer encoder + value head."""

    config_class = TinyInternLM2RewardConfig
    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.pos = nn.Embedding(4096, config.hidden_size)
        layer = nn.TransformerEncoderLayer(
            config.hidden_size, config.num_attention_heads, 2 * config.hidden_size,
            dropout=0.0, batch_first=True,
        )
        self.layers = nn.TransformerEncoder(layer, config.num_hidden_layers)
        self.v_head = nn.Linear(config.hidden_size, 1, bias=False)
        self.reward_token_id = config.reward_token_id
        self.post_init()

    def forward(self, input_ids, attention_mask=None, **kwargs):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids, dtype=torch.bool)
        n = input_ids.shape[1]
        positions = torch.arange(n, device=input_ids.device)
        hidden = self.embed(input_ids) + self.pos(positions)[None]
        causal = torch.triu(torch.ones(n, n, dtype=torch.bool, device=input_ids.device), 1)
        hidden = self.layers(hidden, mask=causal, src_key_padding_mask=~attention_mask.bool())
        ends = attention_mask.long().sum(dim=1) - 1  # the reward token (right padding)
        rows = torch.arange(input_ids.shape[0], device=input_ids.device)
        return (self.v_head(hidden[rows, ends]).squeeze(-1),)

    def _encode(self, tokenizer, conversation):
        text = tokenizer.apply_chat_template(conversation, tokenize=False)
        ids = tokenizer.encode(text, add_special_tokens=False)
        return torch.tensor([*ids, self.reward_token_id], dtype=torch.long)

    @torch.no_grad()
    def get_score(self, tokenizer, conversation, **kwargs):
        ids = self._encode(tokenizer, conversation)[None].to(self.device)
        return self.forward(ids, torch.ones_like(ids, dtype=torch.bool))[0].item()

    @torch.no_grad()
    def get_scores(self, tokenizer, conversations, **kwargs):
        seqs = [self._encode(tokenizer, c) for c in conversations]
        pad = tokenizer.pad_token_id
        ids = nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=pad)
        mask = nn.utils.rnn.pad_sequence(
            [torch.ones(len(s), dtype=torch.bool) for s in seqs], batch_first=True,
            padding_value=False,
        )
        return self.forward(ids.to(self.device), mask.to(self.device))[0].float().cpu().tolist()
