#!/usr/bin/env python3
"""The Hugging Face peer of `rotor bench train` (docs/performance.md): the same
model size, optimizer settings and micro-batch shapes, replayed from rotor's
bench JSON (`rotor bench train CONFIG --json rotor.json`), timed on the same
machine.

  python3 scripts/bench/train_peer.py --bench rotor.json [--mode eager|compile]
                                      [--device cuda|cpu] [--json peer.json]
                                      [--build-only]

Peers: task translation (post-norm, sinusoidal positions) -> MarianMTModel;
task mlm with position rope -> RoFormerForMaskedLM, with learned positions ->
BertForMaskedLM; task lm (pre-norm) with position rope -> GPTNeoXForCausalLM
(sequential residual), with learned positions -> GPT2LMHeadModel. Other models
have no Hugging Face twin and are reported absent, with the reason.

--peer performer: for a model with attention.kind linear (the bench JSON's
model.attention), the twin from performer-pytorch (PyPI, lucidrains'
PerformerLM; scripts/deps.sh puts it in .venv-hf5) instead: the same
layers, heads, widths, dropout and tied embeddings, FAVOR+ with the same M
and redraw interval (feature_map favor) or a generalized kernel of elu or
relu over M = D features (elu1, relu: its features are kernel(x W) + 0.001,
one [D, D] projection more than rotor's), causal for task lm and not for
mlm, RoPE through its rotary_position_emb (before the feature map, where
rotor's linear_rope may put it after). Its causal attention on the CPU is
its cumulative-sum version (performer_pytorch's non-CUDA path).
Hugging Face has no linear attention: without --peer, these models are
timed against the softmax twin above, a reference point rather than a
twin.

Runs under transformers 4.36 (Debian's torch 1.13) and 5.x (torch 2.x):
  - RoPE settings come from the JSON's model.rope (theta, fraction, scaling,
    factor, original_max_positions). GPT-NeoX gets them as rope_parameters
    (rope_theta, partial_rotary_factor, rope_type, ...) under transformers 5,
    as rotary_emb_base / rotary_pct / rope_scaling under 4.x. RoFormer has no
    such settings in either version: when they differ from its built-in
    (theta 10000, every dimension, no scaling) its sinusoid table is rewritten
    with rotor's frequencies (core/rope.h). What the peer could not reproduce
    is listed under "rope_notes" in --json.
  - Attention: SDPA is asked for through the config (attn_implementation);
    a model class or a torch that has none falls back to the eager attention.
    The implementation used is reported ("attention").
  - fp16 uses torch.amp.GradScaler("cuda") (torch.cuda.amp.GradScaler on
    torch before 2.3).

Each micro-batch of the bench JSON (sequences x src_len [x tgt_len]) is
replayed with random token ids; update_freq micro-batches make one update:
forward, loss, backward, gradient clipping (train.clip_norm), fused AdamW
(torch.optim.AdamW with the JSON's lr, betas, eps, weight decay). Precision:
bf16/fp16 as autocast over fp32 weights (fp16 with a GradScaler), fp32 plain.
Losses: label-smoothed cross-entropy over every target token (translation),
cross-entropy over the masked positions (mlm, as many as the JSON's tokens),
cross-entropy over every next token (lm), all divided by the update's tokens
as rotor does.

Before timing, every distinct batch shape runs once (torch.compile compiles
what it needs there, with dynamic shapes when there are several; eager warms
its allocator), then the JSON's warmup updates; the timed updates are the
JSON's batches in order. Reported: mean ms per update, peak memory
(torch.cuda.max_memory_allocated), the losses, the parameter count.
--build-only builds the model and reports its settings and parameter count
without training (cheap: the check that transformers 4.x and 5.x build the
same model).
--json writes {"peer", "mode", "step_ms", "peak_bytes", "losses", ...} or
{"peer", "mode", "absent": REASON}; exit status 0 in both cases, 1 (with the
"absent" JSON saying why) when the model fails while training.
"""
import argparse
import json
import math
import sys
import time


def absent(args, peer, reason):
    result = {"peer": peer, "mode": args.mode, "absent": reason}
    print(f"train_peer: {peer} {args.mode}: absent ({reason})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


def linear_attention(bench):
    """The bench JSON's model.attention when it is linear attention, else None."""
    a = bench["model"].get("attention") or {}
    return a if a.get("kind") == "linear" else None


def peer_name(bench, which="hf"):
    m, task = bench["model"], bench["task"]
    if which == "performer":
        if not linear_attention(bench):
            return "PerformerLM", "not a linear-attention model (attention.kind softmax)"
        if task not in ("lm", "mlm"):
            return "PerformerLM", f"no PerformerLM twin for task {task}"
        if m["norm"] != "pre":
            return "PerformerLM", "PerformerLM has pre-norm layers only"
        if m["position"] not in ("rope", "learned"):
            return "PerformerLM", f"no PerformerLM with {m['position']} positions"
        if m["d_ff"] % m["d_model"] != 0:
            return "PerformerLM", "PerformerLM's feed-forward width is a multiple of d_model"
        return "PerformerLM", None
    if task == "translation":
        if m["norm"] != "post" or m["position"] != "sinusoidal":
            return "MarianMTModel", (f"no Hugging Face encoder-decoder with {m['norm']}-norm and "
                                     f"{m['position']} positions")
        return "MarianMTModel", None
    if task == "mlm":
        if m["position"] == "rope":
            return "RoFormerForMaskedLM", None
        if m["position"] == "learned":
            return "BertForMaskedLM", None
        return "BertForMaskedLM", f"no Hugging Face masked LM with {m['position']} positions"
    if task == "lm":
        peer = "GPTNeoXForCausalLM" if m["position"] == "rope" else "GPT2LMHeadModel"
        if m["norm"] != "pre":
            return peer, "no Hugging Face causal LM with post-norm layers"
        if m["position"] not in ("rope", "learned"):
            return peer, f"no Hugging Face causal LM with {m['position']} positions"
        return peer, None
    return task, f"no peer for task {task}"


def hf_act(name):
    return {"relu": "relu", "gelu": "gelu_new"}[name]  # rotor's GELU is the tanh approximation


def major_version(module):
    try:
        return int(str(module.__version__).split(".")[0])
    except ValueError:
        return 0


# ---- RoPE: rotor's settings (model.rope of the bench JSON, core/rope.h) -------------

def rope_settings(m):
    """rotor's RoPE settings from the bench JSON (older JSONs: model.rope_base)."""
    r = m.get("rope") or {}
    theta = float(r.get("theta", m.get("rope_base", m.get("rope_theta", 10000.0))))
    scaling = str(r.get("scaling", "none") or "none")
    return {
        "theta": theta,
        "fraction": float(r.get("fraction", 1.0)),
        "layout": str(r.get("layout", "interleaved")),
        "scaling": scaling,
        "factor": float(r.get("factor", 1.0)),
        # 0: model.max_positions (rotor reads it as Hugging Face does).
        "original_max": int(r.get("original_max_positions", 0) or 0) or int(m["max_positions"]),
    }


def rotated_dims(rope, head_dim):
    return int(head_dim * rope["fraction"])


def ntk_base(base, factor, rotated):
    return base * factor ** (rotated / (rotated - 2.0))


def rope_frequencies(rope, head_dim, length):
    """theta_i of each rotated pair and YaRN's attention factor, as core/rope.h
    computes them for a call of `length` positions."""
    R = rotated_dims(rope, head_dim)
    base, scaling, s = rope["theta"], rope["scaling"], rope["factor"]
    if scaling == "dynamic_ntk":  # resolved at the call's length (rope::at_length)
        scaling = "none"
        if length > rope["original_max"]:
            base = ntk_base(base, s * length / rope["original_max"] - (s - 1.0), R)
    if scaling == "ntk":
        base = ntk_base(base, s, R)
    freqs = []
    for pair in range(R // 2):
        theta = base ** (-2.0 * pair / R)
        if scaling == "linear":
            theta /= s
        elif scaling == "yarn":
            ctx, two_pi, log_base = float(rope["original_max"]), 2 * math.pi, 2 * math.log(base)
            low = max(0.0, math.floor(R * math.log(ctx / (32.0 * two_pi)) / log_base))
            high = min(R - 1.0, math.ceil(R * math.log(ctx / (1.0 * two_pi)) / log_base))
            if low == high:
                high += 0.001
            ramp = min(1.0, max(0.0, (pair - low) / (high - low)))
            theta = theta * (1.0 - ramp) + theta / s * ramp
        freqs.append(theta)
    attention = 0.1 * math.log(s) + 1.0 if scaling == "yarn" and s > 1.0 else 1.0
    return freqs, attention


def rope_is_default(rope):
    return rope["theta"] == 10000.0 and rope["fraction"] == 1.0 and rope["scaling"] == "none"


def neox_rope_kwargs(rope, head_dim, hf5, notes):
    """GPTNeoXConfig's RoPE arguments: rope_parameters under transformers 5,
    rotary_emb_base / rotary_pct / rope_scaling under 4.x."""
    if rope["layout"] != "half":
        notes.append(f"GPT-NeoX rotates halves (i, i + R/2); rotor's layout is {rope['layout']}")
    theta, rope_type, extra = rope["theta"], "default", {}
    scaling, s = rope["scaling"], rope["factor"]
    if scaling == "ntk":  # static NTK-aware: a larger base, no Hugging Face rope_type
        theta = ntk_base(theta, s, rotated_dims(rope, head_dim))
    elif scaling == "linear":
        rope_type, extra = "linear", {"factor": s}
    elif scaling == "dynamic_ntk":
        rope_type, extra = "dynamic", {"factor": s}
    elif scaling == "yarn":
        rope_type = "yarn"
        extra = {"factor": s, "original_max_position_embeddings": rope["original_max"],
                 "beta_fast": 32.0, "beta_slow": 1.0}
    if hf5:
        params = {"rope_type": rope_type, "rope_theta": theta,
                  "partial_rotary_factor": rope["fraction"], **extra}
        return {"rope_parameters": params}
    kwargs = {"rotary_emb_base": theta, "rotary_pct": rope["fraction"]}
    if rope_type in ("linear", "dynamic"):
        kwargs["rope_scaling"] = {"type": rope_type, "factor": s}
    elif rope_type == "yarn":
        notes.append("transformers 4.x has no YaRN for GPT-NeoX: unscaled RoPE instead")
    return kwargs


def set_roformer_rope(model, rope, head_dim, length, torch, notes):
    """Rewrites RoFormer's sinusoid table ([positions, D]: sin of each pair in
    the first half, cos in the second; pairs interleaved) with rotor's
    frequencies. Pairs beyond the rotated ones get angle 0 (pass unchanged);
    YaRN's attention factor multiplies cos and sin, as in core/rope.h."""
    if rope["layout"] != "interleaved":
        notes.append(f"RoFormer rotates interleaved pairs; rotor's layout is {rope['layout']}")
    if rope_is_default(rope):
        return "RoFormer's table (theta 10000, every dimension)"
    emb = model.roformer.encoder.embed_positions
    n_pos, dim = emb.weight.shape
    freqs, attention = rope_frequencies(rope, head_dim, length)
    freqs = freqs + [0.0] * (dim // 2 - len(freqs))
    pos = torch.arange(n_pos, dtype=torch.float64)[:, None]
    ang = pos * torch.tensor(freqs, dtype=torch.float64)[None, :]
    scale = torch.tensor([attention if f else 1.0 for f in freqs], dtype=torch.float64)
    table = torch.cat([torch.sin(ang) * scale, torch.cos(ang) * scale], dim=-1)
    with torch.no_grad():
        emb.weight.copy_(table.to(emb.weight.dtype))
    if rope["scaling"] == "dynamic_ntk":
        notes.append(f"dynamic_ntk resolved once, at length {length}")
    return "rotor's frequencies written into RoFormer's table"


# ---- the models ----------------------------------------------------------------------

def with_attention(make, config_cls, kwargs, info):
    """Builds the model with SDPA attention asked for through the config, else
    the eager attention; returns (model, implementation used)."""
    errors = []
    for impl in ("sdpa", "eager", None):
        kw = dict(kwargs)
        if impl is not None:
            kw["attn_implementation"] = impl
        try:
            model = make(config_cls(**kw))
        except (TypeError, ValueError, ImportError, RuntimeError) as e:
            errors.append(f"{impl}: {str(e).splitlines()[0][:160] if str(e) else type(e).__name__}")
            continue
        used = getattr(model.config, "_attn_implementation", None) or impl or "eager"
        if impl != "sdpa":
            info["attention_note"] = f"no SDPA attention here ({errors[0]})"
        return model, used
    raise RuntimeError("could not build the model: " + "; ".join(errors))


def build_performer(bench, torch, notes, info):
    """performer-pytorch's PerformerLM as the twin of a linear-attention
    model, wrapped to take input_ids and return .logits like the Hugging
    Face models."""
    import performer_pytorch
    from performer_pytorch import PerformerLM
    m, a = bench["model"], linear_attention(bench)
    seq = max(b["src_len"] for b in bench["batches"])
    favor = a["feature_map"] == "favor"
    M = a["features"]  # as the layers resolve it (rotor bench train --json)
    layers = m["decoder_layers"] if bench["task"] == "lm" else m["encoder_layers"]
    kernel = {"elu1": torch.nn.ELU, "relu": torch.nn.ReLU}.get(a["feature_map"])
    rotary = m["position"] == "rope"
    model = PerformerLM(
        num_tokens=m["vocab_size"], max_seq_len=max(m["max_positions"], seq), dim=m["d_model"],
        depth=layers, heads=m["n_heads"], dim_head=m["d_model"] // m["n_heads"],
        causal=bench["task"] == "lm", ff_mult=m["d_ff"] // m["d_model"], nb_features=M,
        feature_redraw_interval=a.get("feature_redraw") or 10**9, emb_dropout=m["dropout"],
        ff_dropout=m["dropout"], attn_dropout=m["attention_dropout"],
        generalized_attention=not favor, kernel_fn=kernel() if kernel else torch.nn.ReLU(),
        tie_embed=bool(m["share_embeddings"]), rotary_position_emb=rotary, qkv_bias=True,
        attn_out_bias=True)
    if m["activation"] != "gelu":
        notes.append(f"PerformerLM's feed-forward is GELU, rotor's {m['activation']}")
    if rotary and a.get("linear_rope") == "after_feature_map":
        notes.append("PerformerLM rotates q and k before the feature map, rotor after it")
    if rotary and (m["rope"]["scaling"] != "none" or m["rope"]["fraction"] != 1.0):
        notes.append("PerformerLM's rotary embedding has no scaling or partial rotation")
    if not favor:
        notes.append(f"PerformerLM's generalized kernel is {a['feature_map'][:4]}(x W) + 0.001 "
                     f"with a [D, D] projection, rotor's {a['feature_map']} has none")
    version = getattr(performer_pytorch, "__version__", None)
    if version is None:
        try:
            from importlib.metadata import version as dist_version
            version = dist_version("performer-pytorch")
        except Exception:  # noqa: BLE001 - only for the report
            version = "?"
    info["performer_pytorch"] = version

    class Out:
        def __init__(self, logits):
            self.logits = logits

    class Twin(torch.nn.Module):
        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, input_ids, attention_mask=None, token_type_ids=None):
            return Out(self.lm(input_ids))

    kind = "causal " if bench["task"] == "lm" else ""
    feats = f"FAVOR+ M={M}" if favor else f"{a['feature_map']} kernel M={M}"
    return Twin(model), f"performer-pytorch {version} {kind}linear attention, {feats}"


def build_model(bench, transformers, torch, notes, info, which="hf"):
    if which == "performer":
        return build_performer(bench, torch, notes, info)
    m = bench["model"]
    hf5 = major_version(transformers) >= 5
    V, d, H, ff = m["vocab_size"], m["d_model"], m["n_heads"], m["d_ff"]
    if bench["task"] == "translation":
        kwargs = dict(
            vocab_size=V, d_model=d, encoder_layers=m["encoder_layers"],
            decoder_layers=m["decoder_layers"], encoder_attention_heads=H,
            decoder_attention_heads=H, encoder_ffn_dim=ff, decoder_ffn_dim=ff,
            activation_function=hf_act(m["activation"]), dropout=m["dropout"],
            attention_dropout=m["attention_dropout"], activation_dropout=m["activation_dropout"],
            max_position_embeddings=m["max_positions"], scale_embedding=m["scale_embeddings"],
            share_encoder_decoder_embeddings=m["share_embeddings"], tie_word_embeddings=True,
            use_cache=False, pad_token_id=1, eos_token_id=2, decoder_start_token_id=2,
            forced_eos_token_id=2)
        return with_attention(transformers.MarianMTModel, transformers.MarianConfig, kwargs, info)
    seq = max(b["src_len"] for b in bench["batches"])
    head_dim = d // H
    rope = rope_settings(m)
    if m["position"] == "rope":
        info["rope"] = rope
    if bench["task"] == "lm":
        L = m["decoder_layers"]
        tie = bool(m["share_embeddings"])
        if m["position"] == "rope":
            max_pos = max(m["max_positions"], seq)
            if rope["scaling"] == "dynamic_ntk":
                max_pos = rope["original_max"]  # Hugging Face's dynamic scaling grows past it
            elif rope["scaling"] == "yarn":  # 5.x checks factor = max / original
                max_pos = max(seq, int(round(rope["original_max"] * rope["factor"])))
            kwargs = dict(
                vocab_size=V, hidden_size=d, num_hidden_layers=L, num_attention_heads=H,
                intermediate_size=ff, hidden_act=hf_act(m["activation"]),
                max_position_embeddings=max_pos,
                layer_norm_eps=m["layer_norm_eps"], use_parallel_residual=False,
                hidden_dropout=m["dropout"], attention_dropout=m["attention_dropout"],
                tie_word_embeddings=tie, use_cache=False, bos_token_id=2, eos_token_id=3,
                **neox_rope_kwargs(rope, head_dim, hf5, notes))
            info["rope_applied"] = {k: v for k, v in kwargs.items()
                                    if k in ("rope_parameters", "rotary_emb_base", "rotary_pct",
                                             "rope_scaling")}
            return with_attention(transformers.GPTNeoXForCausalLM, transformers.GPTNeoXConfig,
                                  kwargs, info)
        kwargs = dict(
            vocab_size=V, n_embd=d, n_layer=L, n_head=H, n_inner=ff,
            activation_function=hf_act(m["activation"]),
            n_positions=max(m["max_positions"], seq), layer_norm_epsilon=m["layer_norm_eps"],
            resid_pdrop=m["dropout"], embd_pdrop=m["dropout"], attn_pdrop=m["attention_dropout"],
            tie_word_embeddings=tie, use_cache=False, bos_token_id=2, eos_token_id=3)
        return with_attention(transformers.GPT2LMHeadModel, transformers.GPT2Config, kwargs, info)
    common = dict(vocab_size=V, hidden_size=d, num_hidden_layers=m["encoder_layers"],
                  num_attention_heads=H, intermediate_size=ff, hidden_act=hf_act(m["activation"]),
                  hidden_dropout_prob=m["dropout"],
                  attention_probs_dropout_prob=m["attention_dropout"],
                  max_position_embeddings=max(m["max_positions"], seq),
                  type_vocab_size=m["type_vocab_size"], layer_norm_eps=m["layer_norm_eps"],
                  pad_token_id=0)
    if m["position"] == "rope":
        model, used = with_attention(transformers.RoFormerForMaskedLM, transformers.RoFormerConfig,
                                     dict(common, embedding_size=d, rotary_value=False), info)
        info["rope_applied"] = set_roformer_rope(model, rope, head_dim, seq, torch, notes)
        return model, used
    return with_attention(transformers.BertForMaskedLM, transformers.BertConfig, common, info)


def make_inputs(bench, batch, torch, device, gen):
    """Random ids in [4, V) for one micro-batch, and its loss labels."""
    V = bench["model"]["vocab_size"]
    B, S = batch["sequences"], batch["src_len"]
    ids = torch.randint(4, V, (B, S), generator=gen).to(device)
    if bench["task"] == "translation":
        T = batch["tgt_len"]
        tgt = torch.randint(4, V, (B, T + 1), generator=gen).to(device)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                "decoder_input_ids": tgt[:, :-1]}, tgt[:, 1:]
    if bench["task"] == "lm":  # the next token of every input
        return {"input_ids": ids}, torch.randint(4, V, (B, S), generator=gen).to(device)
    labels = torch.full((B, S), -100, dtype=torch.long)
    masked = max(1, min(batch["tokens"], B * S))
    flat = torch.randperm(B * S, generator=gen)[:masked]
    labels.view(-1)[flat] = torch.randint(4, V, (masked,), generator=gen)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "token_type_ids": torch.zeros_like(ids)}, labels.to(device)


def grad_scaler(torch):
    """fp16's loss scaler: torch.amp.GradScaler("cuda") where it exists
    (torch 2.3+), torch.cuda.amp.GradScaler on older torch."""
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        return amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True, help="rotor bench train --json output")
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--build-only", action="store_true",
                    help="build the model and report it, no training")
    ap.add_argument("--peer", choices=["hf", "performer"], default="hf",
                    help="performer: performer-pytorch's PerformerLM for a linear-attention model")
    args = ap.parse_args()
    with open(args.bench) as f:
        bench = json.load(f)
    for key in ("task", "model", "train", "batches", "precision"):
        if key not in bench:
            sys.exit(f"train_peer: {args.bench} has no '{key}' (not a rotor bench train --json file)")
    peer, why_not = peer_name(bench, args.peer)
    if why_not:
        return absent(args, peer, why_not)
    try:
        import torch
        import torch.nn.functional as F
        import transformers
    except ImportError as e:
        return absent(args, peer, f"PyTorch and transformers are needed ({e})")
    if args.peer == "performer":
        try:
            import performer_pytorch  # noqa: F401
        except ImportError as e:
            return absent(args, peer, f"performer-pytorch is needed ({e})")
    if args.device == "cuda" and not torch.cuda.is_available():
        return absent(args, peer, "no GPU answers to PyTorch")
    if args.mode == "compile" and not hasattr(torch, "compile"):
        return absent(args, peer, f"torch {torch.__version__} has no torch.compile")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    train = bench["train"]
    precision = bench["precision"]
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    if amp_dtype is not None and args.device == "cpu" and amp_dtype != torch.bfloat16:
        return absent(args, peer, f"{precision} autocast needs a GPU")

    notes, info = [], {}
    model, attention = build_model(bench, transformers, torch, notes, info, args.peer)
    parameters = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    base = {
        "peer": peer, "mode": args.mode, "precision": precision, "device": args.device,
        "torch": torch.__version__, "transformers": transformers.__version__,
        "attention": attention, "parameters": parameters, "trainable_parameters": trainable,
        "rotor_parameters": bench.get("parameters"),
    }
    if "performer_pytorch" in info:
        base["performer_pytorch"] = info["performer_pytorch"]
    if "rope" in info:
        base["rope"] = info["rope"]
    if "rope_applied" in info:
        base["rope_applied"] = info["rope_applied"]
    if notes:
        base["rope_notes"] = notes
    if "attention_note" in info:
        base["attention_note"] = info["attention_note"]
        notes = notes + [info["attention_note"]]
    for n in notes:
        print(f"train_peer: note: {n}")
    if args.build_only:
        print(f"train_peer: {peer} built with transformers {transformers.__version__} "
              f"(torch {torch.__version__}), {attention} attention: {parameters} parameters "
              f"({trainable} trainable); rotor {bench.get('parameters')}")
        if "rope_applied" in info:
            print(f"train_peer: rope: {json.dumps(info['rope_applied'], sort_keys=True)}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(dict(base, build_only=True), f, indent=1)
        return 0

    model = model.to(device)
    model.train()
    shapes = {(b["sequences"], b["src_len"], b["tgt_len"]) for b in bench["batches"]}
    # Batches of many shapes (translation): one compile with symbolic shapes
    # instead of a recompile per shape (and eager beyond dynamo's cache limit).
    step_model = (torch.compile(model, dynamic=len(shapes) > 1) if args.mode == "compile"
                  else model)
    opt_kw = dict(lr=train["lr"], betas=tuple(train["betas"]), eps=train["eps"],
                  weight_decay=train["weight_decay"])
    try:
        opt = torch.optim.AdamW(model.parameters(), fused=args.device == "cuda", **opt_kw)
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(model.parameters(), **opt_kw)
    scaler = grad_scaler(torch) if precision == "fp16" else None
    ls = train.get("label_smoothing", 0.0)
    clip = train.get("clip_norm", 0.0)
    freq = max(1, int(train.get("update_freq", 1)))
    V = bench["model"]["vocab_size"]

    gen = torch.Generator().manual_seed(args.seed)
    batches = bench["batches"]
    inputs = [make_inputs(bench, b, torch, device, gen) for b in batches]
    updates = [list(range(i, min(i + freq, len(batches)))) for i in range(0, len(batches), freq)]
    autocast_kw = {"device_type": args.device, "enabled": amp_dtype is not None}
    if amp_dtype is not None:
        autocast_kw["dtype"] = amp_dtype

    def micro(i, tokens):
        kwargs, labels = inputs[i]
        with torch.autocast(**autocast_kw):
            logits = step_model(**kwargs).logits
            loss = F.cross_entropy(logits.reshape(-1, V).float(), labels.reshape(-1),
                                   ignore_index=-100, reduction="sum",
                                   label_smoothing=ls if bench["task"] == "translation" else 0.0)
            loss = loss / tokens
        (scaler.scale(loss) if scaler else loss).backward()
        return loss.detach()

    def update(idx):
        opt.zero_grad(set_to_none=True)
        tokens = sum(max(1, batches[i]["tokens"]) for i in idx)
        total = sum(micro(i, tokens) for i in idx)
        if scaler:
            scaler.unscale_(opt)
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        return total

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    # Warm-up: every distinct shape once, then the JSON's warmup updates.
    seen = {}
    for i, b in enumerate(batches):
        seen.setdefault((b["sequences"], b["src_len"], b["tgt_len"]), i)
    try:
        t0 = time.perf_counter()
        for i in seen.values():
            update([i])
        for k in range(int(bench.get("warmup", 0))):
            update(updates[k % len(updates)])
        sync()
        warm_s = time.perf_counter() - t0
        if args.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        losses = [update(u) for u in updates]
        sync()
        seconds = time.perf_counter() - t0
    except (RuntimeError, ValueError, TypeError, AssertionError) as e:
        # Out of memory, a torch.compile failure, an autocast this torch lacks
        # (torch 1.13's CPU bf16 layer norm): the table says so.
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        absent(args, peer, f"failed under torch {torch.__version__}, transformers "
                           f"{transformers.__version__}: {type(e).__name__}: {first}")
        import traceback
        traceback.print_exc()
        return 1
    peak = torch.cuda.max_memory_allocated() if args.device == "cuda" else 0
    result = dict(base)
    result.update({
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "updates": len(updates), "step_ms": seconds * 1e3 / max(1, len(updates)),
        "warmup_s": warm_s, "peak_bytes": int(peak),
        "losses": [float(x) for x in losses],
    })
    bad = [x for x in result["losses"] if not math.isfinite(x)]
    print(f"train_peer: {peer} {args.mode} {precision} ({attention} attention, transformers "
          f"{transformers.__version__}, torch {torch.__version__}): {result['step_ms']:.1f} ms/update "
          f"over {len(updates)} updates, peak {peak / 2**30:.2f} GiB, first loss "
          f"{result['losses'][0]:.3f}{' (non-finite losses!)' if bad else ''}; "
          f"{parameters} parameters ({trainable} trainable; rotor {bench.get('parameters')})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
