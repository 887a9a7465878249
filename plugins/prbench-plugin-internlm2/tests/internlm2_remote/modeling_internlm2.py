"""Test fixture: the API surface of the InternLM2-Reward checkpoints' remote modeling code.

Written for prbench's tests, not copied: a tiny decoder with the real module names
(``model.tok_embeddings``, ``layers[i].attention.wqkv/wo``, ``feed_forward.w1/w2/w3``,
``attention_norm``, ``ffn_norm``, ``norm``, ``v_head``) and the real scoring behaviour, including
the parts that transformers 5 breaks:

- ``forward`` reads the reward at the last attended position of each row (the reward token);
  positions are ``0..n-1`` of the padded row, so right padding before the reward token shifts it;
- with ``use_cache`` on (the config's default) the decoder converts legacy caches with
  ``DynamicCache.from_legacy_cache``, removed in transformers 5;
- ``get_score`` renders the chat template, encodes without special tokens, appends the reward
  token and scores one chat;
- ``get_scores`` pads a batch with ``tokenizer.batch_encode_plus`` (removed in transformers 5)
  and appends the reward token after the padding;
- ``_tied_weights_keys`` is a list, the transformers 4 form.
"""

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_outputs import BaseModelOutputWithPast, SequenceClassifierOutputWithPast

from .configuration_internlm2 import InternLM2Config


class InternLM2RMSNorm(nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (self.weight * (x.float() * torch.rsqrt(var + self.eps))).to(x.dtype)


def _rotate(x, positions, theta):
    half = x.shape[-1] // 2
    freqs = 1.0 / (theta ** (torch.arange(half, device=x.device, dtype=torch.float32) / half))
    angles = positions[:, None, :, None].float() * freqs  # batch, 1, seq, half
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class InternLM2Attention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.heads = config.num_attention_heads
        self.dim = config.hidden_size // self.heads
        self.theta = config.rope_theta
        self.layer_idx = layer_idx
        self.wqkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.bias)
        self.wo = nn.Linear(config.hidden_size, config.hidden_size, bias=config.bias)

    def forward(self, hidden, mask, positions, cache):
        b, n, _ = hidden.shape
        q, k, v = self.wqkv(hidden).view(b, n, 3, self.heads, self.dim).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        q, k = _rotate(q, positions, self.theta), _rotate(k, positions, self.theta)
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)
        out = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.wo(out.transpose(1, 2).reshape(b, n, -1))


class InternLM2MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.w1 = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.w3 = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.w2 = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class InternLM2DecoderLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.attention = InternLM2Attention(config, layer_idx)
        self.feed_forward = InternLM2MLP(config)
        self.attention_norm = InternLM2RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.ffn_norm = InternLM2RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, hidden, mask, positions, cache):
        hidden = hidden + self.attention(self.attention_norm(hidden), mask, positions, cache)
        return hidden + self.feed_forward(self.ffn_norm(hidden))


class InternLM2PreTrainedModel(PreTrainedModel):
    config_class = InternLM2Config
    base_model_prefix = "model"
    _no_split_modules = ["InternLM2DecoderLayer"]

    def _init_weights(self, module):
        if isinstance(module, nn.Linear | nn.Embedding):
            module.weight.data.normal_(0.0, 0.02)


class InternLM2Model(InternLM2PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            InternLM2DecoderLayer(config, i) for i in range(config.num_hidden_layers)
        )
        self.norm = InternLM2RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None,
                past_key_values=None, inputs_embeds=None, use_cache=None,
                output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        if use_cache and not isinstance(past_key_values, Cache):
            # what the checkpoints' code does to accept tuple caches; gone in transformers 5
            past_key_values = DynamicCache.from_legacy_cache(past_key_values)
        b, n = input_ids.shape
        if position_ids is None:
            position_ids = torch.arange(n, device=input_ids.device)[None].expand(b, n)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids, dtype=torch.bool)
        causal = torch.ones(n, n, dtype=torch.bool, device=input_ids.device).tril()
        mask = (causal[None] & attention_mask.bool()[:, None, :])[:, None]
        hidden = self.tok_embeddings(input_ids)
        for layer in self.layers:
            hidden = layer(hidden, mask, position_ids, past_key_values if use_cache else None)
        hidden = self.norm(hidden)
        if not return_dict:
            return (hidden, past_key_values if use_cache else None)
        return BaseModelOutputWithPast(
            last_hidden_state=hidden, past_key_values=past_key_values if use_cache else None
        )


class InternLM2ForRewardModel(InternLM2PreTrainedModel):
    _tied_weights_keys = ["v_head.weight"]

    def __init__(self, config):
        super().__init__(config)
        self.model = InternLM2Model(config)
        self.vocab_size = config.vocab_size
        self.v_head = nn.Linear(config.hidden_size, 1, bias=False)
        self.reward_token_id = config.reward_token_id
        self.post_init()

    def get_input_embeddings(self):
        return self.model.tok_embeddings

    def forward(self, input_ids=None, attention_mask=None, position_ids=None,
                past_key_values=None, inputs_embeds=None, labels=None, use_cache=None,
                output_attentions=None, output_hidden_states=None, return_dict=None):
        return_dict = return_dict if return_dict is not None else self.config.use_return_dict
        last = attention_mask.long().fliplr().argmax(dim=1, keepdim=True)
        ends = attention_mask.size(1) - 1 - last
        if not torch.all(input_ids.gather(1, ends).squeeze(1) == self.reward_token_id).item():
            raise AssertionError("the last attended token of every row must be the reward token")
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             position_ids=position_ids, past_key_values=past_key_values,
                             use_cache=use_cache, return_dict=False)
        values = self.v_head(outputs[0]).squeeze(-1)
        rewards = values.gather(1, ends).squeeze(1)
        if not return_dict:
            return (rewards, *outputs[1:])
        return SequenceClassifierOutputWithPast(logits=rewards, past_key_values=outputs[1])

    @torch.no_grad()
    def get_score(self, tokenizer, conversation, **kwargs):
        text = tokenizer.apply_chat_template(conversation, tokenize=False,
                                             add_generation_prompt=False)
        ids = tokenizer.encode(text, return_tensors="pt", add_special_tokens=False)
        ids = torch.cat([ids, torch.tensor([[self.reward_token_id]])], dim=1).to(self.device)
        mask = torch.ones_like(ids, dtype=torch.bool)
        return self.forward(input_ids=ids, attention_mask=mask, **kwargs)[0].cpu().item()

    @torch.no_grad()
    def get_scores(self, tokenizer, conversations, **kwargs):
        texts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=False)
                 for c in conversations]
        enc = tokenizer.batch_encode_plus(texts, return_tensors="pt", padding=True,
                                          add_special_tokens=False)
        rows = enc["input_ids"].shape[0]
        ids = torch.cat([enc["input_ids"],
                         torch.full((rows, 1), self.reward_token_id, dtype=torch.long)], dim=1)
        mask = torch.cat([enc["attention_mask"].bool(), torch.ones(rows, 1, dtype=torch.bool)], 1)
        out = self.forward(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                           **kwargs)
        return out[0].cpu().tolist()
