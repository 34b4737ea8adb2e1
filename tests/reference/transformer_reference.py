#!/usr/bin/env python3
"""An independent PyTorch reference for rotor's encoder-decoder, decoder-only LM and BERT masked LM.

docs/design.md, Tests: "tests/reference: an independent PyTorch implementation of a
tiny model; logits, loss, every gradient and the weights after a few Adam steps
must match."

The models below are written from the math (Vaswani et al. 2017; RoFormer,
Su et al. 2021, eq. 34; T5's relative position bias, Raffel et al. 2020,
section 2.1; Transformer-XL's relative attention, Dai et al. 2019, eq. 4;
fairseq's label smoothing; PyTorch's AdamW; a GPT-style causal LM: Radford
et al. 2018/2019; BERT's masked LM, Devlin et al. 2019; TUPE's untied
positional correlation and untied [CLS], Ke, He & Liu 2021; DeBERTa's
disentangled attention, He et al. 2021, eq. 4 and section 3.1, with
DeBERTa-v2's shared relative embeddings, projections and log buckets), not from rotor's code:
they share nothing with rotor but the parameter names (Hugging Face
BART/Marian, BERT/RoFormer) and the batch. --model seq2seq (the default)
checks the encoder-decoder (label-smoothed loss over the target tokens),
--model lm the decoder-only causal language model (cross-entropy of every
next token), --model mlm BERT's masked LM (cross-entropy of the original ids
at the masked positions; --tupe-relative true with --position tupe: TUPE-R;
--position deberta: DeBERTa-v2's disentangled attention, with the dump's
position buckets and max relative position).
The script

  1. runs rotor's dump tool (tests/reference/dump_transformer.cpp), which
     writes a tiny model's initial weights, logits, loss sums, gradients and
     its weights after three AdamW steps to a safetensors file;
  2. loads the initial weights by name into the reference (float64);
  3. compares logits, loss, NLL and every gradient, then runs
     torch.optim.AdamW for three steps and compares every weight.

Tolerances (rotor computes in fp32, the reference in fp64):
  forward / gradients:  max|rotor - ref| <= 1e-5 * max(max|ref|, floor) per
                        tensor, floor = 1e-2 * the largest |gradient| of the
                        model for gradients (a tensor whose true gradient is
                        ~0 is judged on the model's scale) and 1 for logits.
  loss sums:            |rotor - ref| <= 1e-5 * |ref|.
  after 3 AdamW steps:  max|rotor - ref| <= 2e-6 absolute (weights are O(1);
                        one AdamW step moves a weight by ~lr = 1e-3, so this is
                        ~1e-3 of the update, and 10x tighter than the 3e-5*|w|
                        that weight decay contributes: a wrong decay group or
                        bias correction fails it). Elements whose true gradient
                        is zero (the key-projection bias without RoPE: softmax
                        is invariant to a per-query constant; TUPE's theta_1,
                        which fills the whole row of [CLS]'s positional
                        scores, for the same reason) are exempt from
                        it: Adam with eps 1e-9 turns fp32 round-off of ~1e-9
                        there into steps of up to ~lr. They are checked against
                        the bound of three Adam steps, 3 * 2 * lr, instead.
                        Elements with a small but nonzero true gradient g (the
                        key bias under RoPE; the columns of Transformer-XL's
                        r_proj.weight that meet the slowest cosines, ~1 at
                        every distance of a 7-token batch, so that softmax
                        all but cancels them) get 2e-6 + 3 lr dg/|g|, dg the
                        gradient tolerance above: Adam divides by |g|.

The masked LM needs no tolerance of its own: its logits, loss, gradients and
steps are held to the bounds above. Its logits are compared at the non-pad
positions only: the loss never reads a pad position's output, and an
attention core may leave pad queries' rows as it likes.

Exit status: 0 pass, 1 mismatch (the first mismatching tensor and its error
are named), 77 skip (python3 modules missing).
"""

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

# A tiny model: one thread each for the dump tool's OpenMP and torch (spinning
# OpenMP workers on a loaded CI machine cost seconds).
os.environ.setdefault("OMP_NUM_THREADS", "1")

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # ctest SKIP_RETURN_CODE 77
    print(f"SKIPPED: the PyTorch reference needs numpy and torch ({e})")
    sys.exit(77)

DT = torch.float64


# ---- safetensors ------------------------------------------------------------

_ST_DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64,
              "U8": np.uint8, "F16": np.float16}


def read_safetensors(path):
    """Returns ({name: np.ndarray}, metadata dict)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: truncated safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        arr = np.frombuffer(data[begin:end], dtype=_ST_DTYPES[e["dtype"]]).reshape(e["shape"])
        out[name] = arr.copy()
    return out, meta


# ---- the model, from the math -----------------------------------------------

def rope_rotate(x, base):
    """RoFormer eq. 34 on x [B, H, T, D], position m = 0..T-1, interleaved pairs:
    R x = x * [cos m t1, cos m t1, cos m t2, ...] + [-x2, x1, -x4, x3, ...] * [sin m t1, sin m t1, ...]
    with t_i = base^(-2(i-1)/D)."""
    T, D = x.shape[-2], x.shape[-1]
    i = torch.arange(D // 2, dtype=DT)
    theta = base ** (-2.0 * i / D)                              # [D/2]
    angle = torch.arange(T, dtype=DT)[:, None] * theta[None]     # [T, D/2]
    cos = torch.repeat_interleave(torch.cos(angle), 2, dim=-1)   # [T, D]
    sin = torch.repeat_interleave(torch.sin(angle), 2, dim=-1)
    pairs = x.reshape(*x.shape[:-1], D // 2, 2)
    swapped = torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).reshape(x.shape)
    return x * cos + swapped * sin


def t5_bucket(rel, bidirectional, num_buckets, max_distance):
    """T5's bucket (Raffel et al. 2020, section 2.1) of each relative position
    rel = memory (key) position - query position, an int64 tensor.

    A bidirectional stack (the encoder) splits the buckets: the lower half for
    keys at or before the query, the upper half for keys after it, each half
    indexed by the distance |rel|. A causal stack (decoder, LM) indexes all its
    buckets by the distance back, max(-rel, 0). Of the n buckets of a side,
    distances below n/2 have one each; from there to max_distance the rest are
    log-spaced, bucket n/2 + floor(log(dist / (n/2)) / log(max_distance / (n/2))
    * (n - n/2)), and every distance beyond falls into the side's last bucket.
    The log is taken in float32 and the product truncated, as T5 does, so a
    distance whose product lands on a whole number gets T5's bucket."""
    if bidirectional:
        num_buckets //= 2
        side = (rel > 0).long() * num_buckets
        dist = rel.abs()
    else:
        side = torch.zeros_like(rel)
        dist = torch.clamp(-rel, min=0)
    exact = num_buckets // 2
    far = torch.clamp(dist, min=exact)  # log's argument: only used where dist >= exact
    steps = torch.log(far.float() / exact) / math.log(max_distance / exact) * (num_buckets - exact)
    log_bucket = torch.clamp(exact + steps.long(), max=num_buckets - 1)
    return side + torch.where(dist < exact, dist, log_bucket)


def t5_bias(table, Tq, Tk, bidirectional, max_distance):
    """T5's bias of one self-attention, [H, Tq, Tk]: head h adds
    table[bucket(key - query), h] (table [buckets, H]) to the score of query i
    and key j."""
    rel = torch.arange(Tk)[None, :] - torch.arange(Tq)[:, None]  # [Tq, Tk]
    buckets = t5_bucket(rel, bidirectional, table.shape[0], max_distance)
    return F.embedding(buckets, table).permute(2, 0, 1)


def xl_sinusoids(dist, d):
    """The sinusoid embedding R of signed relative distances (Dai et al. 2019,
    section 3.3: the Vaswani et al. table, but of i - j instead of a position):
    dist an int64 tensor of any shape -> [*dist.shape, d], the first d/2
    columns sin(x w_c), the rest cos(x w_c), w_c = 10000^(-2c/d), c < d/2."""
    c = torch.arange(d // 2, dtype=DT)
    w = 10000.0 ** (-2.0 * c / d)                 # [d/2]
    a = dist.to(DT)[..., None] * w                # [..., d/2]
    return torch.cat([torch.sin(a), torch.cos(a)], dim=-1)


def rope_at(x, m, base=10000.0):
    """x [D] rotated to position m (for the self-check)."""
    T = m + 1
    xs = x.reshape(1, 1, 1, -1).expand(1, 1, T, x.numel())
    return rope_rotate(xs, base)[0, 0, m]


class Attention(nn.Module):
    """kv_heads (grouped-query attention, Ainslie et al. 2023): k_proj and
    v_proj give kv_heads heads, query head h reads kv head h // (heads //
    kv_heads); bias False: no projection has a bias."""

    def __init__(self, d, heads, rope, causal, base, xl=False, kv_heads=None, bias=True):
        super().__init__()
        self.h, self.rope, self.causal, self.base, self.xl = heads, rope, causal, base, xl
        self.kv = kv_heads or heads
        dkv = self.kv * (d // heads)
        self.q_proj = nn.Linear(d, d, bias=bias)
        self.k_proj = nn.Linear(d, dkv, bias=bias)
        self.v_proj = nn.Linear(d, dkv, bias=bias)
        self.out_proj = nn.Linear(d, d, bias=bias)
        if xl:  # Transformer-XL: W_R of this layer, and u, v per head
            self.r_proj = nn.Linear(d, d, bias=False)
            self.r_w_bias = nn.Parameter(torch.zeros(heads, d // heads))  # u
            self.r_r_bias = nn.Parameter(torch.zeros(heads, d // heads))  # v

    def xl_terms(self, q, k):
        """Terms (b), (c) and (d) of Dai et al. 2019, eq. 4, for the projected
        queries q [B, H, Tq, D] and keys k [B, H, Tk, D] (query i at position
        i, key j at j): head h adds
            q_i . r_ij + v_h . r_ij + u_h . k_j,   r_ij = (W_R R(i - j))_h,
        the h-th D-slice of the layer's projection of the distance's sinusoids,
        scaled by 1/sqrt(D) like term (a). -> [B, H, Tq, Tk]."""
        B, H, Tq, D = q.shape
        Tk = k.shape[2]
        dist = torch.arange(Tq)[:, None] - torch.arange(Tk)[None, :]         # [Tq, Tk], i - j
        r = self.r_proj(xl_sinusoids(dist, H * D)).view(Tq, Tk, H, D)       # W_R R(i - j)
        b = torch.einsum("bhid,ijhd->bhij", q, r)                           # (b)
        d_ = torch.einsum("hd,ijhd->hij", self.r_r_bias, r)[None]           # (d)
        c = torch.einsum("hd,bhjd->bhj", self.r_w_bias, k)[:, :, None, :]   # (c)
        return (b + c + d_) / math.sqrt(D)

    def forward(self, x, kv, key_pad, bias=None):
        """x [B, Tq, d] queries, kv [B, Tk, d] keys/values, key_pad bool [B, Tk] (True = pad) or None,
        bias [H, Tq, Tk] (T5's, added to the scaled scores) or None."""
        B, Tq, d = x.shape
        Tk = kv.shape[1]
        D = d // self.h
        q = self.q_proj(x).view(B, Tq, self.h, D).transpose(1, 2)   # [B, H, Tq, D]
        k = self.k_proj(kv).view(B, Tk, self.kv, D).transpose(1, 2)  # [B, Hkv, Tk, D]
        v = self.v_proj(kv).view(B, Tk, self.kv, D).transpose(1, 2)
        k = k.repeat_interleave(self.h // self.kv, dim=1)  # [B, H, Tk, D]
        v = v.repeat_interleave(self.h // self.kv, dim=1)
        if self.rope:  # queries and keys only, before the 1/sqrt(D) scaling
            q = rope_rotate(q, self.base)
            k = rope_rotate(k, self.base)
        scores = torch.matmul(q / math.sqrt(D), k.transpose(-1, -2))  # [B, H, Tq, Tk]
        if bias is not None:
            scores = scores + bias[None]
        if self.xl:
            scores = scores + self.xl_terms(q, k)
        masked = torch.zeros(B, 1, Tq, Tk, dtype=torch.bool)
        if self.causal:
            masked = masked | torch.triu(torch.ones(Tq, Tk, dtype=torch.bool), diagonal=1)
        if key_pad is not None:
            masked = masked | key_pad[:, None, None, :]
        scores = scores.masked_fill(masked, float("-inf"))
        o = torch.matmul(torch.softmax(scores, dim=-1), v)  # [B, H, Tq, D]
        return self.out_proj(o.transpose(1, 2).reshape(B, Tq, d))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def activate(x, name):
    """model.activation: relu, gelu (the tanh form) or silu (x sigmoid(x))."""
    if name == "gelu":
        return gelu_tanh(x)
    if name == "silu":
        return x * torch.sigmoid(x)
    return torch.relu(x)


class RMSNorm(nn.Module):
    """RMSNorm (Zhang & Sennrich 2019): x / sqrt(mean(x^2) + eps) * weight;
    no mean, no bias (model.norm_type rms_norm)."""

    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(d, cfg):
    """The model's norm: LayerNorm, or RMSNorm with cfg's norm_type rms_norm."""
    eps = cfg["layer_norm_eps"]
    return RMSNorm(d, eps) if cfg.get("norm_type") == "rms_norm" else nn.LayerNorm(d, eps=eps)


class Block(nn.Module):
    """One Transformer layer: self-attention, [cross-attention], feed-forward,
    each wrapped post-LN  y = LN(x + f(x))  or pre-LN  y = x + f(LN(x)).
    The self-attention is causal in a decoder (with cross-attention) and in
    a decoder-only LM's layer (causal=True, no cross-attention)."""

    def __init__(self, cfg, decoder, causal=None):
        super().__init__()
        d = cfg["d_model"]
        self.pre, self.decoder, self.act = cfg["norm"] == "pre", decoder, cfg["activation"]
        causal = decoder if causal is None else causal
        kv, bias = cfg["kv_heads"], cfg["bias"]
        self.self_attn = Attention(d, cfg["n_heads"], cfg["rope"], causal, cfg["rope_base"],
                                   cfg["xl"], kv, bias)
        self.self_attn_layer_norm = make_norm(d, cfg)
        if decoder:  # cross-attention never rotates (nor adds Transformer-XL's terms)
            self.encoder_attn = Attention(d, cfg["n_heads"], False, False, cfg["rope_base"],
                                          kv_heads=kv, bias=bias)
            self.encoder_attn_layer_norm = make_norm(d, cfg)
        self.gated = cfg["gated_ffn"]
        if self.gated:  # GLU: act(x W_gate) * (x W_1), then fc2 (Shazeer 2020)
            self.fc1_gate = nn.Linear(d, cfg["d_ff"], bias=bias)
        self.fc1 = nn.Linear(d, cfg["d_ff"], bias=bias)
        self.fc2 = nn.Linear(cfg["d_ff"], d, bias=bias)
        self.final_layer_norm = make_norm(d, cfg)

    def sub(self, x, norm, f):
        return x + f(norm(x)) if self.pre else norm(x + f(x))

    def ffn(self, x):
        if self.gated:
            return self.fc2(activate(self.fc1_gate(x), self.act) * self.fc1(x))
        return self.fc2(activate(self.fc1(x), self.act))

    def forward(self, x, self_pad, memory=None, memory_pad=None, bias=None):
        """bias: T5's [H, T, T] for the self-attention (cross-attention has none)."""
        x = self.sub(x, self.self_attn_layer_norm, lambda h: self.self_attn(h, h, self_pad, bias))
        if self.decoder:
            x = self.sub(x, self.encoder_attn_layer_norm,
                         lambda h: self.encoder_attn(h, memory, memory_pad))
        return self.sub(x, self.final_layer_norm, self.ffn)


class Stack(nn.Module):
    def __init__(self, cfg, n_layers, decoder):
        super().__init__()
        d = cfg["d_model"]
        if not cfg["share_embeddings"]:
            self.embed_tokens = nn.Embedding(cfg["vocab_size"], d)
        if cfg["position"] == "learned":
            self.embed_positions = nn.Embedding(cfg["max_positions"], d)
        if cfg["position"] == "t5":  # one table for all the stack's layers
            self.relative_attention_bias = nn.Embedding(cfg["t5_buckets"], cfg["n_heads"])
        self.layers = nn.ModuleList([Block(cfg, decoder) for _ in range(n_layers)])
        if cfg["norm"] == "pre":
            self.layer_norm = make_norm(d, cfg)


def sinusoidal_table(n, d):
    """[n, d]: row p = [sin(p f_0) .. sin(p f_{h-1}) | cos(p f_0) .. cos(p f_{h-1})],
    h = d/2, f_i = 10000^(-i/(h-1)) (tensor2tensor / fairseq)."""
    h = d // 2
    f = torch.exp(-math.log(10000.0) * torch.arange(h, dtype=DT) / (h - 1))
    a = torch.arange(n, dtype=DT)[:, None] * f[None]
    return torch.cat([torch.sin(a), torch.cos(a)], dim=1)


class Inner(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg["share_embeddings"]:
            self.shared = nn.Embedding(cfg["vocab_size"], cfg["d_model"])
        self.encoder = Stack(cfg, cfg["encoder_layers"], False)
        self.decoder = Stack(cfg, cfg["decoder_layers"], True)


class Seq2Seq(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Inner(cfg)

    def embed(self, ids, stack):
        cfg = self.cfg
        E = self.model.shared.weight if cfg["share_embeddings"] else stack.embed_tokens.weight
        # Token embedding x sqrt(d); the pad row receives no gradient from the lookup.
        x = F.embedding(ids, E, padding_idx=cfg["pad_id"]) * math.sqrt(cfg["d_model"])
        T = ids.shape[1]
        if cfg["position"] == "sinusoidal":
            x = x + sinusoidal_table(T, cfg["d_model"])[None]
        elif cfg["position"] == "learned":
            x = x + stack.embed_positions.weight[:T][None]
        return x  # rope, t5, transformer_xl: inside attention; none: nothing

    def self_bias(self, stack, T, bidirectional):
        """T5's bias of the stack's self-attention ([H, T, T], the same in every
        layer), or None under the other position encodings."""
        if self.cfg["position"] != "t5":
            return None
        return t5_bias(stack.relative_attention_bias.weight, T, T, bidirectional,
                       self.cfg["t5_max_distance"])

    def forward(self, src, src_lengths, tgt_in):
        m = self.model
        S = src.shape[1]
        src_pad = torch.arange(S)[None, :] >= src_lengths[:, None]  # [B, S]
        x = self.embed(src, m.encoder)
        bias = self.self_bias(m.encoder, S, True)  # the encoder sees keys on both sides
        for layer in m.encoder.layers:
            x = layer(x, src_pad, bias=bias)
        if self.cfg["norm"] == "pre":
            x = m.encoder.layer_norm(x)
        y = self.embed(tgt_in, m.decoder)
        bias = self.self_bias(m.decoder, tgt_in.shape[1], False)
        for layer in m.decoder.layers:  # causal mask only: right padding is never seen by real tokens
            y = layer(y, None, x, src_pad, bias)
        if self.cfg["norm"] == "pre":
            y = m.decoder.layer_norm(y)
        B, T, d = y.shape
        # The output projection is tied to the decoder's input embedding.
        out = m.shared.weight if self.cfg["share_embeddings"] else m.decoder.embed_tokens.weight
        return y.reshape(B * T, d) @ out.t()  # [B*T, V]


class LmInner(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], d)
        if cfg["position"] == "learned":
            self.embed_positions = nn.Embedding(cfg["max_positions"], d)
        if cfg["position"] == "t5":
            self.relative_attention_bias = nn.Embedding(cfg["t5_buckets"], cfg["n_heads"])
        self.layers = nn.ModuleList([Block(cfg, False, causal=True) for _ in range(cfg["layers"])])
        if cfg["norm"] == "pre":
            self.layer_norm = make_norm(d, cfg)


class CausalLM(nn.Module):
    """A decoder-only language model: h_0 = sqrt(d) E[x_t] (+ the position's
    row for learned or sinusoidal positions; RoPE rotates q and k inside
    attention; T5's causal bias is added to every layer's scores, and so are
    each layer's own Transformer-XL terms), L layers of causal self-attention
    and feed-forward, a final LayerNorm when pre-LN, logits_t = h_t W^T with
    W = E (tied) or its own matrix, no bias. Position t's logits predict
    x_{t+1}."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = LmInner(cfg)
        if not cfg["share_embeddings"]:
            self.lm_head = nn.Linear(cfg["d_model"], cfg["vocab_size"], bias=False)

    def forward(self, ids):
        cfg, m = self.cfg, self.model
        B, T = ids.shape
        x = F.embedding(ids, m.embed_tokens.weight, padding_idx=cfg["pad_id"]) * math.sqrt(cfg["d_model"])
        if cfg["position"] == "sinusoidal":
            x = x + sinusoidal_table(T, cfg["d_model"])[None]
        elif cfg["position"] == "learned":
            x = x + m.embed_positions.weight[:T][None]
        bias = None
        if cfg["position"] == "t5":
            bias = t5_bias(m.relative_attention_bias.weight, T, T, False, cfg["t5_max_distance"])
        for layer in m.layers:  # right padding: the causal mask hides pads from real tokens
            x = layer(x, None, bias=bias)
        if cfg["norm"] == "pre":
            x = m.layer_norm(x)
        out = m.embed_tokens.weight if cfg["share_embeddings"] else self.lm_head.weight
        return x.reshape(B * T, -1) @ out.t()  # [B*T, V]


def tupe_correlation(table, q_proj, k_proj, theta, T, heads):
    """TUPE's untied positional correlation (Ke, He & Liu 2021) of positions
    0..T-1, [H, T, T]: with p_i the i-th row of the learned table and U^Q,
    U^K the d x d projections (Linear, no bias), head h scores query i and
    key j by
        (p_i U^Q)_h . (p_j U^K)_h / sqrt(2 D),
    its D-wide slices of the projected positions, the same in every layer.
    [CLS] (i = 0 or j = 0) is untied from the positions: reset_theta replaces
    the whole row of [CLS] (what it attends to) by theta_1[h] and the column
    below it (what attends to [CLS]) by theta_2[h], theta [2, H]."""
    p = table[:T]                                              # [T, d]
    D = p.shape[1] // heads
    pq = q_proj(p).view(T, heads, D).transpose(0, 1)           # [H, T, D]
    pk = k_proj(p).view(T, heads, D).transpose(0, 1)
    v = pq @ pk.transpose(1, 2) / math.sqrt(2 * D)             # [H, T, T]
    i = torch.arange(T)[:, None].expand(T, T)
    j = torch.arange(T)[None, :].expand(T, T)
    v = torch.where((i >= 1) & (j == 0), theta[1][:, None, None], v)
    return torch.where(i == 0, theta[0][:, None, None], v)


def deberta_bucket(rel, buckets, max_relative):
    """DeBERTa-v2's log bucket of each relative position rel (an int64 tensor
    of query - key positions): with mid = buckets / 2, a distance |rel| up to
    mid keeps its own bucket, rel; a longer one gets
        sign(rel) * (mid + ceil(log(|rel| / mid) / log((max_relative - 1) / mid) * (mid - 1))),
    log-spaced so that |rel| = max_relative - 1 lands in bucket buckets - 1
    (beyond, the buckets go on growing and the table's rows clamp them). The
    quotient, its logs and the product are float32 tensors, as DeBERTa-v2
    computes them, so a distance whose product lands on a whole number (5 of
    buckets 4, max_relative 6: log 2.5 / log 2.5 = 1) gets DeBERTa-v2's bucket.
    buckets = 0: no buckets, rel itself."""
    if buckets <= 0:
        return rel
    mid = buckets // 2
    dist = rel.abs()
    far = torch.clamp(dist, min=mid)  # log's argument: only used where dist > mid
    ratio = far.to(torch.float32) / mid
    reach = torch.log(torch.tensor((max_relative - 1) / mid, dtype=torch.float32))
    steps = torch.ceil(torch.log(ratio) / reach * (mid - 1))  # float32
    logged = (steps + mid).to(torch.int64) * torch.sign(rel)
    return torch.where(dist <= mid, rel, logged)


def deberta_indices(T, buckets, max_relative):
    """The rows of DeBERTa-v2's relative table [2 span, d] (span = buckets, or
    max_relative without buckets) that its two terms read for T positions:
      c2p [T, T]: query i's row for key j, span + bucket(i - j);
      p2c [T, T]: key j's row for query i, span - bucket(j - i), indexed
                  [j, i] (the key's relative position to the query, negated:
                  He et al. 2021, eq. 4 reads P_{delta(j, i)} for the key);
    each clamped to 0 .. 2 span - 1."""
    span = buckets if buckets > 0 else max_relative
    pos = torch.arange(T)
    rel = pos[:, None] - pos[None, :]                              # [a, b] = a - b
    bucket = deberta_bucket(rel, buckets, max_relative)
    c2p = torch.clamp(span + bucket, 0, 2 * span - 1)             # [i, j]
    p2c = torch.clamp(span - bucket, 0, 2 * span - 1)             # [j, i]: span - bucket(j - i)
    return c2p, p2c


def deberta_terms(q, k, rel_rows, query, key, c2p_index, p2c_index, scale):
    """DeBERTa's content-to-position and position-to-content terms of one
    layer, [B, H, T, T] (He et al. 2021, eq. 4, terms 2 and 3, with
    DeBERTa-v2's share_att_key): the shared, normalized relative rows
    rel_rows [2 span, d] are projected by the layer's own query and key
    projections, biases included, Q_r = query(rel_rows), K_r =
    key(rel_rows), and head h adds
        (q_i . K_r[c2p[i, j]]_h + k_j . Q_r[p2c[j, i]]_h) * scale
    to the score of query i and key j (q, k [B, H, T, D] the layer's
    projected queries and keys, unscaled)."""
    B, H, T, D = q.shape
    S = rel_rows.shape[0]
    kr = key(rel_rows).view(S, H, D).transpose(0, 1)               # [H, S, D]
    qr = query(rel_rows).view(S, H, D).transpose(0, 1)
    c2p = torch.einsum("bhid,hsd->bhis", q, kr)                    # [B, H, T(query), S]
    c2p = torch.gather(c2p, -1, c2p_index[None, None].expand(B, H, T, T))
    p2c = torch.einsum("bhjd,hsd->bhjs", k, qr)                    # [B, H, T(key), S]
    p2c = torch.gather(p2c, -1, p2c_index[None, None].expand(B, H, T, T)).transpose(-1, -2)
    return (c2p + p2c) * scale


def _module(**children):
    """An nn.Module holding the given submodules and parameters (names only)."""
    m = nn.Module()
    for name, child in children.items():
        setattr(m, name, child)
    return m


class BertLayer(nn.Module):
    """One BERT layer (Devlin et al. 2019; Vaswani et al.'s post-LN encoder
    layer): a = LN(x + O(MHA(x))), y = LN(a + W_2 act(W_1 a)). MHA scores
    query i and key j of head h by q_i.k_j * scale plus the bias (TUPE's
    correlation and/or T5's bias, the same for every layer), pad keys masked.
    RoFormer (rope) rotates q and k before the product. DeBERTa (rel, the
    normalized shared relative rows and the indices of deberta_indices) adds
    this layer's disentangled terms of deberta_terms, scaled like q.k."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.h, self.act = cfg["n_heads"], cfg["activation"]
        self.rope, self.base = cfg["rope"], cfg["rope_base"]
        self.attention = _module(
            self=_module(query=nn.Linear(d, d), key=nn.Linear(d, d), value=nn.Linear(d, d)),
            output=_module(dense=nn.Linear(d, d), LayerNorm=make_norm(d, cfg)))
        self.intermediate = _module(dense=nn.Linear(d, cfg["d_ff"]))
        self.output = _module(dense=nn.Linear(cfg["d_ff"], d), LayerNorm=make_norm(d, cfg))

    def forward(self, x, key_pad, scale, bias, rel=None):
        B, T, d = x.shape
        D = d // self.h
        a = getattr(self.attention, "self")
        q = a.query(x).view(B, T, self.h, D).transpose(1, 2)  # [B, H, T, D]
        k = a.key(x).view(B, T, self.h, D).transpose(1, 2)
        v = a.value(x).view(B, T, self.h, D).transpose(1, 2)
        if self.rope:
            q, k = rope_rotate(q, self.base), rope_rotate(k, self.base)
        s = (q @ k.transpose(-1, -2)) * scale                 # [B, H, T, T]
        if bias is not None:
            s = s + bias[None]
        if rel is not None:
            rows, c2p_index, p2c_index = rel
            s = s + deberta_terms(q, k, rows, a.query, a.key, c2p_index, p2c_index, scale)
        s = s.masked_fill(key_pad[:, None, None, :], float("-inf"))
        o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, d)
        x = self.attention.output.LayerNorm(x + self.attention.output.dense(o))
        h = self.intermediate.dense(x)
        h = activate(h, self.act)
        return self.output.LayerNorm(x + self.output.dense(h))


class BertMLM(nn.Module):
    """BERT's masked LM (Devlin et al. 2019, with Hugging Face
    BertForMaskedLM's names under `bert.`, `roformer.` for RoPE):
      embeddings  E_word[x] (not scaled) + E_type[segment] (+ the position's
                  row: learned or sinusoidal) -> LayerNorm
      encoder     L post-LN layers; TUPE (position tupe) adds the untied
                  correlation of tupe_correlation to every layer's scores and
                  scales the content term q.k by 1/sqrt(2 D) like it;
                  TUPE-R adds T5's bidirectional bias b_{j-i} besides
                  (one table for the encoder); t5 alone adds that bias to the
                  1/sqrt(D)-scaled scores; deberta adds each layer's
                  disentangled terms (deberta_terms) of one relative table
                  PREFIX.encoder.rel_embeddings [2 span, d], normalized by
                  PREFIX.encoder.LayerNorm, and scales all three terms,
                  q.k included, by 1/sqrt(3 D)
      MLM head    t = LN(act(W_t h + b_t)); logits = t E_word^T + b, the
                  decoder tied to the word embedding, its bias its own
      loss        cross-entropy of the original ids at the masked positions,
                  summed.
    The activation (feed-forward and head transform) is GELU's tanh form."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, V, H = cfg["d_model"], cfg["vocab_size"], cfg["n_heads"]
        pos = cfg["position"]
        emb = _module(word_embeddings=nn.Embedding(V, d))
        if pos == "learned":
            emb.position_embeddings = nn.Embedding(cfg["max_positions"], d)
        if cfg["type_vocab_size"] > 0:
            emb.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], d)
        emb.LayerNorm = make_norm(d, cfg)
        enc = _module(layer=nn.ModuleList([BertLayer(cfg) for _ in range(cfg["layers"])]))
        if pos == "tupe":
            enc.tupe = _module(position_embeddings=nn.Embedding(cfg["max_positions"], d),
                               q_proj=nn.Linear(d, d, bias=False), k_proj=nn.Linear(d, d, bias=False),
                               cls=nn.Parameter(torch.zeros(2, H)))
        if pos == "t5" or (pos == "tupe" and cfg["tupe_relative"]):
            enc.relative_attention_bias = nn.Embedding(cfg["t5_buckets"], H)
        if pos == "deberta":  # one table for the encoder, and its LayerNorm
            span = cfg["deberta_buckets"] if cfg["deberta_buckets"] > 0 else cfg["deberta_max_relative"]
            enc.rel_embeddings = nn.Embedding(2 * span, d)
            enc.LayerNorm = nn.LayerNorm(d, eps=cfg["layer_norm_eps"])
        setattr(self, cfg["prefix"], _module(embeddings=emb, encoder=enc))
        self.cls = _module(predictions=_module(
            transform=_module(dense=nn.Linear(d, d), LayerNorm=make_norm(d, cfg)),
            bias=nn.Parameter(torch.zeros(V))))

    def forward(self, ids, types, lengths):
        """ids, types [B, T], lengths [B] -> logits of every position [B*T, V]."""
        cfg = self.cfg
        m = getattr(self, cfg["prefix"])
        e, enc = m.embeddings, m.encoder
        B, T = ids.shape
        x = F.embedding(ids, e.word_embeddings.weight, padding_idx=cfg["pad_id"])
        if cfg["type_vocab_size"] > 0:
            x = x + e.token_type_embeddings(types)
        if cfg["position"] == "learned":
            x = x + e.position_embeddings.weight[:T][None]
        elif cfg["position"] == "sinusoidal":
            x = x + sinusoidal_table(T, cfg["d_model"])[None]
        x = e.LayerNorm(x)
        H = cfg["n_heads"]
        D = cfg["d_model"] // H
        scale, bias = 1.0 / math.sqrt(D), None
        if cfg["position"] == "tupe":
            t = enc.tupe
            bias = tupe_correlation(t.position_embeddings.weight, t.q_proj, t.k_proj, t.cls, T, H)
            scale = 1.0 / math.sqrt(2 * D)
        if hasattr(enc, "relative_attention_bias"):
            rel = t5_bias(enc.relative_attention_bias.weight, T, T, True, cfg["t5_max_distance"])
            bias = rel if bias is None else bias + rel
        rel = None
        if cfg["position"] == "deberta":
            rows = enc.LayerNorm(enc.rel_embeddings.weight)  # [2 span, d], once for all layers
            rel = (rows,) + deberta_indices(T, cfg["deberta_buckets"], cfg["deberta_max_relative"])
            scale = 1.0 / math.sqrt(3 * D)
        key_pad = torch.arange(T)[None, :] >= lengths[:, None]  # [B, T]
        for layer in enc.layer:
            x = layer(x, key_pad, scale, bias, rel)
        p = self.cls.predictions
        h = p.transform.dense(x)
        h = activate(h, cfg["activation"])
        h = p.transform.LayerNorm(h)
        return h.reshape(B * T, -1) @ e.word_embeddings.weight.t() + p.bias  # [B*T, V]


def label_smoothed_loss(logits, target, eps, pad):
    """fairseq's label_smoothed_nll_loss, summed over non-pad rows:
    loss = (1 - eps - eps/(V-1)) * nll + eps/(V-1) * sum_j -log p_j."""
    lprobs = torch.log_softmax(logits, dim=-1)
    keep = target != pad
    lp, t = lprobs[keep], target[keep]
    nll = -lp.gather(1, t[:, None]).squeeze(1)
    smooth = -lp.sum(dim=1)
    eps_i = eps / (logits.shape[1] - 1)
    loss = (1.0 - eps - eps_i) * nll + eps_i * smooth
    return loss.sum(), nll.sum()


# ---- comparison --------------------------------------------------------------

class Mismatch(Exception):
    pass


def max_err(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0


def check(report, name, rotor, ref, tol):
    err = max_err(rotor, ref)
    report.append((name, err, tol))
    if not err <= tol:  # also catches NaN
        raise Mismatch(f"{name}: max |rotor - reference| = {err:.3e} exceeds {tol:.3e} "
                       f"(max |reference| = {float(np.max(np.abs(ref), initial=0.0)):.3e})")
    return err


def self_check():
    """The reference's RoPE against REFERENCE.md's test vectors."""
    q = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], dtype=DT)
    k = torch.tensor([1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3], dtype=DT)
    vectors = {
        0: q.tolist(),
        1: [-0.114263966, 0.192207560, 0.258567883, 0.427951691, 0.493975100, 0.604969917,
            0.699199650, 0.800699600],
        5: [0.220151073, -0.039159990, 0.071504553, 0.494860686, 0.469387629, 0.624239741,
            0.695991267, 0.803489985],
        100: [0.187505015, 0.121827210, -0.034113014, -0.498834945, -0.234731438, 0.744916876,
              0.616636182, 0.865886724],
    }
    for m, want in vectors.items():
        got = rope_at(q, m)
        if float((got - torch.tensor(want, dtype=DT)).abs().max()) > 1e-8:
            raise Mismatch(f"reference self-check: RoPE at m={m} is {got.tolist()}, want {want}")
    for a, b in ((3, 1), (12, 10), (102, 100)):
        dot = float(rope_at(q, a) @ rope_at(k, b))
        if abs(dot - 1.388696273717) > 1e-10:
            raise Mismatch(f"reference self-check: dot(R_{a} q, R_{b} k) = {dot}, want 1.388696273717")
    # T5's buckets for 32 buckets and max distance 128, worked out by hand from
    # the definition: bidirectional, 16 a side, 8 exact, e.g. r = -20:
    # 8 + floor(log(20/8) / log(128/8) * 8) = 8 + floor(2.64) = 10, r = -16 lands
    # on 8 + floor(2) = 10 exactly; causal, 16 exact, r = -32: 16 + floor(16/3) = 21,
    # r = -128: 16 + floor(1 * 16) = 32, clamped to 31.
    cases = {True: {0: 0, -1: 1, 1: 17, -7: 7, 7: 23, -8: 8, -16: 10, -20: 10, 20: 26, -100: 15,
                    100: 31, -127: 15, -128: 15, 500: 31, -500: 15},
             False: {0: 0, 5: 0, 200: 0, -1: 1, -15: 15, -16: 16, -32: 21, -100: 30, -127: 31,
                     -128: 31, -1000: 31}}
    for bidirectional, want in cases.items():
        got = t5_bucket(torch.tensor(list(want)), bidirectional, 32, 128).tolist()
        if got != list(want.values()):
            raise Mismatch(f"reference self-check: T5 buckets (bidirectional={bidirectional}) of "
                           f"{list(want)} are {got}, want {list(want.values())}")
    # DeBERTa-v2's log buckets, worked out by hand from the definition: 256
    # buckets (mid 128) and max_relative 512, r = 200: 128 + ceil(log(200/128) /
    # log(511/128) * 127) = 128 + ceil(40.94) = 169, r = 511 lands on 127 exactly
    # (bucket 255), r = 600 on 128 + ceil(141.73) = 270 (beyond the table: the
    # rows clamp it); 4 buckets (mid 2), max_relative 6: |r| = 3, 4, 5 ->
    # 2 + ceil(0.44, 0.76, 1) = 3, |r| = 6, 7 -> 2 + ceil(1.20, 1.37) = 4.
    cases = {(256, 512): {0: 0, 1: 1, -127: -127, 128: 128, -128: -128, 129: 129, 200: 169,
                          -200: -169, 511: 255, -511: -255, 600: 270},
             (4, 6): {0: 0, -1: -1, 2: 2, -2: -2, 3: 3, 4: 3, 5: 3, -5: -3, 6: 4, 7: 4, -7: -4},
             (0, 6): {0: 0, 5: 5, -9: -9}}
    for (nb, mr), want in cases.items():
        got = deberta_bucket(torch.tensor(list(want)), nb, mr).tolist()
        if got != list(want.values()):
            raise Mismatch(f"reference self-check: DeBERTa buckets ({nb}, {mr}) of {list(want)} are "
                           f"{got}, want {list(want.values())}")
    # ... and the rows of T = 8 with 4 buckets, max_relative 6 (span 4): query
    # i's row for key j, i - j = 7 .. -7 -> bucket 4, 4, 3, 3, 3, 2, 1, 0, -1,
    # -2, -3, -3, -3, -4, -4 -> rows 8 (clamped to 7), 8 (7), 7, 7, 7, 6, 5, 4,
    # 3, 2, 1, 1, 1, 0, 0; key j's row for query i, 4 - bucket(j - i), j - i =
    # 7 .. -7 -> 0, 0, 1, 1, 1, 2, 3, 4, 5, 6, 7, 7, 7, 8 (7), 8 (7).
    c2p, p2c = deberta_indices(8, 4, 6)
    for name, index, want in (("query", c2p, [7, 7, 7, 7, 7, 6, 5, 4, 3, 2, 1, 1, 1, 0, 0]),
                              ("key", p2c, [0, 0, 1, 1, 1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 7])):
        got = [int(index[a, 0]) for a in range(7, 0, -1)] + [int(index[0, b]) for b in range(8)]
        if got != want:
            raise Mismatch(f"reference self-check: DeBERTa's {name} rows of distances 7 .. -7 are "
                           f"{got}, want {want}")
    # Transformer-XL's distance sinusoids for d = 4 (w = 1, 1/100), by hand:
    # x = -3: [sin -3, sin -0.03, cos -3, cos -0.03], x = 0: [0, 0, 1, 1].
    got = xl_sinusoids(torch.tensor([-3, 0]), 4)
    want = torch.tensor([[-0.1411200080598672, -0.0299955002024957, -0.9899924966004454,
                          0.9995500337489875], [0.0, 0.0, 1.0, 1.0]], dtype=DT)
    if float((got - want).abs().max()) > 1e-12:
        raise Mismatch(f"reference self-check: XL sinusoids are {got.tolist()}, want {want.tolist()}")


def run(args):
    self_check()
    with tempfile.TemporaryDirectory(prefix="rotor_ref_") as tmp:
        out = args.keep or os.path.join(tmp, "dump.safetensors")
        cmd = [args.dump_tool, "--model", args.model, "--position", args.position, "--norm", args.norm,
               "--activation", args.activation, "--optimizer", args.optimizer,
               "--share-embeddings", "true" if args.share_embeddings else "false",
               "--tupe-relative", args.tupe_relative, "--norm-type", args.norm_type,
               "--gated-ffn", args.gated_ffn, "--bias", args.bias, "--kv-heads", str(args.kv_heads),
               "--seed", str(args.seed), "--out", out]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise Mismatch(f"dump tool failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr}")
        t, meta = read_safetensors(out)

    cfg = {"position": meta["position"], "norm": meta["norm"], "activation": meta["activation"],
           "norm_type": meta.get("norm_type", "layer_norm"),
           "gated_ffn": meta.get("gated_ffn") == "true",
           "bias": meta.get("bias", "true") == "true",
           "kv_heads": int(meta.get("kv_heads", 0)) or None,
           # t5: the dump's table size and reach (8 and 5 by default, so that the
           # 7-token batches reach log-spaced and shared buckets)
           "t5_buckets": int(meta.get("t5_buckets", 0)),
           "t5_max_distance": int(meta.get("t5_max_distance", 0)),
           "rope": meta["position"] == "rope", "rope_base": float(meta["rope_base"]),
           "xl": meta["position"] == "transformer_xl",
           "layer_norm_eps": float(meta["layer_norm_eps"]),
           "share_embeddings": meta["share_embeddings"] == "true",
           "tupe_relative": meta.get("tupe_relative") == "true",
           # deberta: the dump's buckets and max relative position (4 and 6 by
           # default, so that the 8-token batch reaches log-spaced, shared and
           # clamped rows)
           "deberta_buckets": int(meta.get("deberta_buckets", 0)),
           "deberta_max_relative": int(meta.get("deberta_max_relative", 0))}
    lm, mlm = meta["model"] == "lm", meta["model"] == "mlm"
    layer_keys = ("layers",) if lm or mlm else ("encoder_layers", "decoder_layers")
    if mlm:
        layer_keys += ("type_vocab_size",)
        cfg["prefix"] = meta["prefix"]
    for key in ("vocab_size", "pad_id", "d_model", "n_heads", "d_ff", "max_positions",
                "tgt_tokens", "steps") + layer_keys:
        cfg[key] = int(meta[key])
    # lm, mlm: plain cross-entropy
    eps_ls = 0.0 if lm or mlm else float(meta["label_smoothing"])
    torch.manual_seed(0)
    model = (BertMLM if mlm else CausalLM if lm else Seq2Seq)(cfg).to(DT)

    # Load the initial weights by name; the name sets must agree exactly.
    params = dict(model.named_parameters())
    dumped = {n for n in t if "." in n and not n.startswith("batch.")
              and not n.endswith(".grad") and not n.endswith(".after3")}
    if set(params) != dumped:
        raise Mismatch(f"parameter names differ: only in rotor {sorted(dumped - set(params))}, "
                       f"only in the reference {sorted(set(params) - dumped)}")
    with torch.no_grad():
        for n, p in params.items():
            if tuple(p.shape) != t[n].shape:
                raise Mismatch(f"{n}: shape {t[n].shape} in rotor, {tuple(p.shape)} in the reference")
            p.copy_(torch.from_numpy(t[n].astype(np.float64)))
    pad = cfg["pad_id"]
    for n in ("model.shared.weight", "model.encoder.embed_tokens.weight",
              "model.decoder.embed_tokens.weight", "model.embed_tokens.weight",
              cfg.get("prefix", "bert") + ".embeddings.word_embeddings.weight"):
        if n in t and np.any(t[n][pad] != 0):
            raise Mismatch(f"{n}: the pad row is not zero at initialization")

    def batch(name):
        return torch.from_numpy(t["batch." + name].astype(np.int64))

    loss_pad = pad  # rows of the loss whose target is this are skipped
    logit_rows = None  # the rows of the logits compared (None: all)
    if mlm:  # the loss: the original ids at the masked positions (none is a pad)
        ids, types, lengths = batch("input_ids"), batch("token_type_ids"), batch("lengths")
        masked, tgt_out = batch("masked_positions"), batch("masked_targets")
        model_logits = lambda: model(ids, types, lengths)  # noqa: E731
        forward = lambda: model_logits()[masked]  # noqa: E731
        loss_pad = -1
        T = ids.shape[1]
        logit_rows = (torch.arange(T)[None, :] < lengths[:, None]).reshape(-1).numpy()
    elif lm:  # targets: each input's next token, pad where there is none
        ids, tgt_out = batch("input_ids"), batch("targets").reshape(-1)
        forward = model_logits = lambda: model(ids)  # noqa: E731
    else:
        src, src_lengths, tgt_in = batch("src"), batch("src_lengths"), batch("tgt_in")
        tgt_out = batch("tgt_out").reshape(-1)
        forward = model_logits = lambda: model(src, src_lengths, tgt_in)  # noqa: E731
    tokens = int((tgt_out != loss_pad).sum())
    if tokens != cfg["tgt_tokens"]:
        raise Mismatch(f"target tokens: rotor counts {cfg['tgt_tokens']}, the batch has {tokens}")

    report = []
    # ---- forward, loss, gradients ----
    with torch.no_grad():
        lg = model_logits().numpy()
    got = t["logits"].reshape(lg.shape)
    if logit_rows is not None:  # mlm: the non-pad positions (pads' outputs are never used)
        got, lg = got[logit_rows], lg[logit_rows]
    check(report, "logits", got, lg, 1e-5 * max(1.0, float(np.abs(lg).max())))
    logits = forward()
    loss, nll = label_smoothed_loss(logits, tgt_out, eps_ls, loss_pad)
    loss.backward()
    for name, ref in (("loss_sum", loss), ("nll_sum", nll)):
        r = float(ref)
        check(report, name, t[name], np.array([r]), 1e-5 * abs(r))
    grads = {n: p.grad.detach().numpy().copy() for n, p in params.items()}
    gscale = max(float(np.abs(g).max()) for g in grads.values())
    for n in params:
        g = grads[n]
        check(report, n + ".grad", t[n + ".grad"], g, 1e-5 * max(float(np.abs(g).max()), 1e-2 * gscale))

    # ---- three AdamW steps on loss_sum / tokens ----
    no_decay = set()
    for mname, mod in model.named_modules():
        for pname, _ in mod.named_parameters(recurse=False):
            full = f"{mname}.{pname}" if mname else pname
            if isinstance(mod, (nn.LayerNorm, RMSNorm)) or pname == "bias":
                no_decay.add(full)
    # rotor keeps T5's bias tables out of weight decay too (a bias, though a learned one),
    # and Transformer-XL's u and v; W_R (r_proj.weight) decays like any projection.
    # So are TUPE's [CLS] scalars (PREFIX.encoder.tupe.cls); its table and
    # projections decay.
    no_decay |= {n for n in params if n.endswith(".relative_attention_bias.weight")
                 or n.endswith(".r_w_bias") or n.endswith(".r_r_bias") or n.endswith(".tupe.cls")}
    wd = float(meta["weight_decay"])
    lr = float(meta["lr"])
    groups = [{"params": [p for n, p in params.items() if n not in no_decay], "weight_decay": wd},
              {"params": [p for n, p in params.items() if n in no_decay], "weight_decay": 0.0}]
    # optim.name: adam puts the weight decay into the gradient (torch.optim.Adam),
    # adamw decouples it (torch.optim.AdamW).
    Opt = torch.optim.Adam if meta["optimizer"] == "adam" else torch.optim.AdamW
    opt = Opt(groups, lr=lr, betas=(float(meta["beta1"]), float(meta["beta2"])),
              eps=float(meta["adam_eps"]))
    # Tensors whose true gradient is zero (see the module docstring): the key
    # bias adds q.b_k to all of a query's scores (Transformer-XL's term (c)
    # adds u.b_k, the same for every key), which softmax cancels, unless RoPE
    # rotates b_k differently at every key position.
    # TUPE's theta_1 (row 0 of PREFIX.encoder.tupe.cls) is such a constant
    # too: it replaces the whole row of [CLS]'s positional scores. zero_grad:
    # name -> the mask of its elements with a zero true gradient.
    # DeBERTa's position-to-content term reads the key bias as b_k . Q_r[row]
    # with a row that varies with the key: there it has a gradient.
    zero_grad = {n: np.ones(tuple(p.shape), dtype=bool) for n, p in params.items()
                 if (n.endswith(".k_proj.bias") or n.endswith(".attention.self.key.bias"))
                 and (".encoder_attn." in n or not (cfg["rope"] or cfg["position"] == "deberta"))}
    for n, p in params.items():
        if n.endswith(".tupe.cls"):
            zero_grad[n] = np.zeros(tuple(p.shape), dtype=bool)
            zero_grad[n][0] = True
    ref_zero_max = 0.0
    step_losses = []
    for _ in range(cfg["steps"]):
        opt.zero_grad()
        logits = forward()
        loss, _ = label_smoothed_loss(logits, tgt_out, eps_ls, loss_pad)
        step_losses.append(float(loss))
        (loss / tokens).backward()
        for n, mask in zero_grad.items():
            g = params[n].grad.abs().numpy()[mask]
            ref_zero_max = max(ref_zero_max, float(g.max()) * tokens)
        opt.step()
    if ref_zero_max > 1e-12 * gscale:
        raise Mismatch(f"reference: a gradient that should vanish (key bias, TUPE's theta_1) is "
                       f"{ref_zero_max:.3e}")
    check(report, "step_loss_sum", t["step_loss_sum"], np.array(step_losses),
          1e-5 * max(abs(x) for x in step_losses))
    after_tol, bound = 2e-6, cfg["steps"] * 2 * lr
    exempt = 0
    for n, p in params.items():
        ref = p.detach().numpy()
        got = t[n + ".after3"].astype(np.float64)
        mask = zero_grad.get(n)
        if mask is not None:
            exempt += int(mask.sum())
            check(report, n + ".after3[zero-grad]", got[mask], ref[mask], bound)
            if mask.all():
                continue
        # Adam normalizes each element's step by its gradient's size, so an
        # element whose gradient g may be off by the gradient tolerance dg (as
        # checked above) may step off by up to lr * dg / |g| per step. That is
        # below 2e-6 for all but the few elements with a tiny true gradient
        # (RoPE's key bias): for them the bound follows from dg.
        g = np.abs(grads[n])
        dg = 1e-5 * max(float(g.max()), 1e-2 * gscale)
        tol = after_tol + cfg["steps"] * lr * np.minimum(2.0, dg / np.maximum(g, 1e-30))
        if mask is not None:  # checked above against the Adam step bound
            tol = np.where(mask, np.inf, tol)
        excess = np.abs(got - ref) - tol
        err = float(np.max(np.where(mask, 0.0, np.abs(got - ref)) if mask is not None
                           else np.abs(got - ref)))
        report.append((n + ".after3", err, float(np.max(tol[np.isfinite(tol)]))))
        if not np.all(excess <= 0):
            i = int(np.argmax(excess))
            raise Mismatch(f"{n}.after3: element {i}: |rotor - reference| = "
                           f"{float(np.abs(got - ref).flat[i]):.3e} exceeds {float(tol.flat[i]):.3e}")

    if args.verbose:
        for name, err, tol in report:
            print(f"  {name:60s} err {err:.3e}  tol {tol:.3e}")
    worst = {}
    for name, err, tol in report:
        kind = ("after3" if ".after3" in name else "grad" if name.endswith(".grad")
                else "forward")
        if "[zero-grad]" in name:
            kind = "after3[zero-grad]"
        worst[kind] = max(worst.get(kind, (0.0, 0.0, "")), (err / tol if tol else 0.0, err, name))
    tupe_r = " tupe_relative=true" if cfg["tupe_relative"] else ""
    if cfg["position"] == "deberta":
        tupe_r = f" buckets={cfg['deberta_buckets']} max_relative={cfg['deberta_max_relative']}"
    print(f"PASS model={meta['model']} position={cfg['position']}{tupe_r} norm={cfg['norm']} norm_type={cfg['norm_type']} activation={cfg['activation']} "
          f"optimizer={meta['optimizer']} share_embeddings={meta['share_embeddings']}: "
          f"{len(params)} parameters, loss_sum {float(t['loss_sum'][0]):.6f} (ref {step_losses[0]:.6f})")
    for kind, (ratio, err, name) in sorted(worst.items()):
        print(f"  worst {kind:18s} {err:.3e} ({ratio:.2f} of tolerance) in {name}")
    if exempt:
        print(f"  {exempt} elements with a zero true gradient (key biases, TUPE's theta_1) checked against the "
              f"Adam step bound {bound:.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump-tool", required=True, help="path of reference_dump_transformer")
    ap.add_argument("--model", default="seq2seq", choices=["seq2seq", "lm", "mlm"])
    ap.add_argument("--position", required=True, choices=["sinusoidal", "learned", "rope", "none", "t5",
                                                             "transformer_xl", "tupe", "deberta"])
    ap.add_argument("--norm", default="post", choices=["post", "pre"])
    ap.add_argument("--norm-type", default="layer_norm", choices=["layer_norm", "rms_norm"])
    ap.add_argument("--activation", default="relu", choices=["relu", "gelu", "silu"])
    ap.add_argument("--gated-ffn", default="false", choices=["true", "false"])
    ap.add_argument("--bias", default="true", choices=["true", "false"])
    ap.add_argument("--kv-heads", type=int, default=0, help="key/value heads (0: every head)")
    ap.add_argument("--optimizer", default="adamw", choices=["adam", "adamw"])
    ap.add_argument("--share-embeddings", default="true", choices=["true", "false"])
    ap.add_argument("--tupe-relative", default="false", choices=["true", "false"],
                    help="mlm with tupe: TUPE-R (T5's bias besides TUPE's correlation)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--keep", help="write the dump here instead of a temporary file")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every tensor's error")
    args = ap.parse_args()
    if not os.path.isfile(args.dump_tool):
        print(f"FAIL: dump tool {args.dump_tool} not found")
        return 1
    args.share_embeddings = args.share_embeddings == "true"
    torch.set_num_threads(1)
    try:
        run(args)
    except Mismatch as e:
        print(f"FAIL model={args.model} position={args.position} norm={args.norm} activation={args.activation}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
