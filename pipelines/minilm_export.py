"""MiniLM as the graph ONNX Runtime's BERT optimizer knows (for ``onnx-int8``).

``pipelines.onnx_minilm`` exports the model once per machine and lets ONNX
Runtime fuse it (``Attention``, ``SkipLayerNormalization``, ``BiasGelu``,
``EmbedLayerNormalization``) before int8 quantization. The fusions match the
operator pattern of BERT's classic eager implementation: separate query, key
and value projections, ``softmax(q k^T / sqrt(d) + mask)`` with an additive
mask ``(1 - mask) * min``, three embedding lookups. ``pipelines.minilm_module``
computes the same function with one fused QKV product and
``scaled_dot_product_attention``, which the optimizer does not recognise, so
the export goes through this module, built from the same loaded weights:
the export needs torch and the model folder only, not transformers.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from ctxledger.pipelines.minilm_module import Layer, MiniLMModule


def _linear(weight: torch.Tensor, bias: torch.Tensor) -> nn.Linear:
    layer = nn.Linear(weight.shape[1], weight.shape[0], device="meta")
    layer.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
    layer.bias = nn.Parameter(bias.detach().clone(), requires_grad=False)
    return layer


class EagerLayer(nn.Module):
    """``minilm_module.Layer`` with BERT's eager attention operators."""

    def __init__(self, layer: Layer):
        super().__init__()
        self.heads = layer.heads
        weights = layer.qkv.weight.chunk(3)
        biases = layer.qkv.bias.chunk(3)
        self.query, self.key, self.value = (
            _linear(w, b) for w, b in zip(weights, biases, strict=True)
        )
        self.attention_out = layer.attention_out
        self.attention_norm = layer.attention_norm
        self.inner = layer.inner
        self.out = layer.out
        self.out_norm = layer.out_norm

    def forward(self, x: torch.Tensor, additive: torch.Tensor) -> torch.Tensor:
        batch, length, hidden = x.shape
        size = hidden // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, -1, self.heads, size).transpose(1, 2)

        query = split(self.query(x))
        key = split(self.key(x))
        value = split(self.value(x))
        scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(size)
        probs = torch.softmax(scores + additive, dim=-1)
        context = torch.matmul(probs, value).transpose(1, 2).reshape(batch, -1, hidden)
        x = self.attention_norm(x + self.attention_out(context))
        return self.out_norm(x + self.out(F.gelu(self.inner(x))))


class EagerBert(nn.Module):
    """The last hidden state of ``MiniLMModule`` (no pooling: the ONNX model's
    output is BERT's, pooled by ``OnnxSentenceModel``), inputs as BERT takes
    them: ``input_ids``, ``attention_mask``, ``token_type_ids``."""

    def __init__(self, module: MiniLMModule):
        super().__init__()
        self.word = module.word
        self.position = module.position
        self.token_type = module.token_type
        self.norm = module.norm
        self.layers = nn.ModuleList(EagerLayer(layer) for layer in module.layers)
        positions = torch.arange(module.position.shape[0]).unsqueeze(0)
        self.register_buffer("position_ids", positions, persistent=False)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor,
    ) -> torch.Tensor:
        positions = self.position_ids[:, : input_ids.shape[1]]
        x = F.embedding(input_ids, self.word)
        x = x + F.embedding(token_type_ids, self.token_type)
        x = self.norm(x + F.embedding(positions, self.position))
        mask = attention_mask[:, None, None, :].to(x.dtype)
        additive = (1.0 - mask) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, additive)
        return x
