"""MiniLM's BERT encoder as a torch module, loaded from ``model.safetensors``.

The torch half of ``pipelines.minilm`` (which imports this module only when a
model loads, so that importing it costs no torch). Written from the model's
``config.json`` (a 6-layer, 384-wide post-LayerNorm BERT) rather than taken
from transformers, whose import is what this replaces; the weight names map
one to one (``state_dict``), query, key and value stacked into one matrix
product per layer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812


class Layer(nn.Module):
    """One BERT encoder layer: self-attention, residual + LayerNorm, the
    erf GELU feed-forward, residual + LayerNorm."""

    def __init__(
        self, hidden: int, heads: int, inner: int, eps: float, device: str = "meta"
    ):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden, device=device)
        self.attention_out = nn.Linear(hidden, hidden, device=device)
        self.attention_norm = nn.LayerNorm(hidden, eps=eps, device=device)
        self.inner = nn.Linear(hidden, inner, device=device)
        self.out = nn.Linear(inner, hidden, device=device)
        self.out_norm = nn.LayerNorm(hidden, eps=eps, device=device)

    def forward(self, x: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``x``: (batch, tokens, hidden); ``keys``: (batch, 1, 1, tokens)
        bool, True where a token may be attended to (padding is not)."""
        batch, length, hidden = x.shape
        qkv = self.qkv(x).view(batch, length, 3, self.heads, hidden // self.heads)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        context = F.scaled_dot_product_attention(query, key, value, attn_mask=keys)
        context = context.transpose(1, 2).reshape(batch, length, hidden)
        x = self.attention_norm(x + self.attention_out(context))
        return self.out_norm(x + self.out(F.gelu(self.inner(x))))


class MiniLMModule(nn.Module):
    """BERT's encoder with sentence-transformers' head on top (mean over the
    attention mask, L2 normalisation): ``forward(input_ids, attention_mask)``
    gives unit sentence vectors. Single sentences only: every token is of
    token type 0, as sentence-transformers feeds them.

    Built on the ``meta`` device (no memory, no random init) for
    ``load_module`` to assign the real weights; the embedding tables are plain
    parameters because ``nn.Embedding``'s init on ``meta`` imports
    ``torch._dynamo`` (2.3 s here).
    """

    def __init__(self, config: dict[str, Any], device: str = "meta"):
        super().__init__()
        hidden = int(config["hidden_size"])
        eps = float(config.get("layer_norm_eps", 1e-12))

        def table(rows: str) -> nn.Parameter:
            return nn.Parameter(torch.empty(int(config[rows]), hidden, device=device))

        self.word = table("vocab_size")
        self.position = table("max_position_embeddings")
        self.token_type = table("type_vocab_size")
        self.norm = nn.LayerNorm(hidden, eps=eps, device=device)
        heads = int(config["num_attention_heads"])
        inner = int(config["intermediate_size"])
        self.layers = nn.ModuleList(
            Layer(hidden, heads, inner, eps, device)
            for _ in range(int(config["num_hidden_layers"]))
        )

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        """(batch, tokens) int64 ids and 0/1 mask -> (batch, hidden) fp32."""
        length = input_ids.shape[1]
        x = F.embedding(input_ids, self.word) + self.token_type[0]
        x = self.norm(x + self.position[:length])
        keys = attention_mask[:, None, None, :].bool()
        for layer in self.layers:
            x = layer(x, keys)
        # pooling in fp32 also under bf16 autocast
        weights = attention_mask[..., None].to(torch.float32)
        summed = (x.to(torch.float32) * weights).sum(dim=1)
        mean = summed / weights.sum(dim=1).clamp(min=1e-9)
        return F.normalize(mean, p=2.0, dim=1)


#: Our parameter names -> the HF ``BertModel`` names of ``model.safetensors``.
_LAYER_PARTS = {
    "attention_out": "attention.output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "inner": "intermediate.dense",
    "out": "output.dense",
    "out_norm": "output.LayerNorm",
}


def state_dict(weights: dict[str, torch.Tensor], layers: int) -> dict[str, Any]:
    """``MiniLMModule``'s state from HF ``BertModel`` weights (with or
    without a ``bert.`` prefix; the pooler head is not used)."""
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

    def get(name: str) -> torch.Tensor:
        return weights[prefix + name]

    state = {
        "word": get("embeddings.word_embeddings.weight"),
        "position": get("embeddings.position_embeddings.weight"),
        "token_type": get("embeddings.token_type_embeddings.weight"),
        "norm.weight": get("embeddings.LayerNorm.weight"),
        "norm.bias": get("embeddings.LayerNorm.bias"),
    }
    for index in range(layers):
        source = f"encoder.layer.{index}."
        for kind in ("weight", "bias"):
            qkv = [
                get(f"{source}attention.self.{n}.{kind}")
                for n in ("query", "key", "value")
            ]
            state[f"layers.{index}.qkv.{kind}"] = torch.cat(qkv)
            for ours, theirs in _LAYER_PARTS.items():
                state[f"layers.{index}.{ours}.{kind}"] = get(f"{source}{theirs}.{kind}")
    return state


def load_module(model_dir: str | Path) -> MiniLMModule:
    """``MiniLMModule`` with the folder's weights, in eval mode, no grads."""
    from safetensors.torch import load_file  # noqa: PLC0415

    folder = Path(model_dir)
    config = json.loads((folder / "config.json").read_text())
    if config.get("hidden_act", "gelu") != "gelu":  # the exact erf GELU
        raise ValueError(f"unsupported hidden_act {config['hidden_act']!r}")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError("only absolute position embeddings are supported")
    module = MiniLMModule(config)  # on ``meta``: no init of replaced weights
    weights = load_file(folder / "model.safetensors")
    module.load_state_dict(state_dict(weights, len(module.layers)), assign=True)
    return module.eval().requires_grad_(False)
