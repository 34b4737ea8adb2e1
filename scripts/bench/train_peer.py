#!/usr/bin/env python3
"""The Hugging Face peer of `rotor bench train` (docs/performance.md): the same
model size, optimizer settings and micro-batch shapes, replayed from rotor's
bench JSON (`rotor bench train CONFIG --json rotor.json`), timed on the same
machine.

  python3 scripts/bench/train_peer.py --bench rotor.json [--mode eager|compile]
                                      [--device cuda|cpu] [--json peer.json]

Peers: task translation (post-norm, sinusoidal positions) -> MarianMTModel;
task mlm with position rope -> RoFormerForMaskedLM, with learned positions ->
BertForMaskedLM (SDPA attention); task lm (pre-norm) with position rope ->
GPTNeoXForCausalLM (sequential residual, every dimension rotated), with
learned positions -> GPT2LMHeadModel. Other models have no Hugging Face twin
and are reported absent, with the reason.

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
its allocator), then the JSON's warmup updates; the timed updates are the JSON's batches in order. Reported: mean ms
per update, peak memory (torch.cuda.max_memory_allocated), the losses.
--json writes {"peer", "mode", "step_ms", "peak_bytes", "losses", ...} or
{"peer", "mode", "absent": REASON}; exit status 0 in both cases.
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


def peer_name(bench):
    m, task = bench["model"], bench["task"]
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


def build_model(bench, transformers):
    m = bench["model"]
    V, d, H, ff = m["vocab_size"], m["d_model"], m["n_heads"], m["d_ff"]
    if bench["task"] == "translation":
        cfg = transformers.MarianConfig(
            vocab_size=V, d_model=d, encoder_layers=m["encoder_layers"],
            decoder_layers=m["decoder_layers"], encoder_attention_heads=H,
            decoder_attention_heads=H, encoder_ffn_dim=ff, decoder_ffn_dim=ff,
            activation_function=hf_act(m["activation"]), dropout=m["dropout"],
            attention_dropout=m["attention_dropout"], activation_dropout=m["activation_dropout"],
            max_position_embeddings=m["max_positions"], scale_embedding=m["scale_embeddings"],
            share_encoder_decoder_embeddings=m["share_embeddings"], tie_word_embeddings=True,
            pad_token_id=1, eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2)
        return transformers.MarianMTModel(cfg)
    seq = max(b["src_len"] for b in bench["batches"])
    if bench["task"] == "lm":
        L = m["decoder_layers"]
        tie = bool(m["share_embeddings"])
        if m["position"] == "rope":
            cfg = transformers.GPTNeoXConfig(
                vocab_size=V, hidden_size=d, num_hidden_layers=L, num_attention_heads=H,
                intermediate_size=ff, hidden_act=hf_act(m["activation"]), rotary_pct=1.0,
                rotary_emb_base=m.get("rope_base", m.get("rope_theta", 10000.0)),
                max_position_embeddings=max(m["max_positions"], seq),
                layer_norm_eps=m["layer_norm_eps"], use_parallel_residual=False,
                hidden_dropout=m["dropout"], attention_dropout=m["attention_dropout"],
                tie_word_embeddings=tie, bos_token_id=2, eos_token_id=3)
            return transformers.GPTNeoXForCausalLM(cfg)
        cfg = transformers.GPT2Config(
            vocab_size=V, n_embd=d, n_layer=L, n_head=H, n_inner=ff,
            activation_function=hf_act(m["activation"]),
            n_positions=max(m["max_positions"], seq), layer_norm_epsilon=m["layer_norm_eps"],
            resid_pdrop=m["dropout"], embd_pdrop=m["dropout"], attn_pdrop=m["attention_dropout"],
            tie_word_embeddings=tie, bos_token_id=2, eos_token_id=3)
        return transformers.GPT2LMHeadModel(cfg)
    common = dict(vocab_size=V, hidden_size=d, num_hidden_layers=m["encoder_layers"],
                  num_attention_heads=H, intermediate_size=ff, hidden_act=hf_act(m["activation"]),
                  hidden_dropout_prob=m["dropout"],
                  attention_probs_dropout_prob=m["attention_dropout"],
                  max_position_embeddings=max(m["max_positions"], seq),
                  type_vocab_size=m["type_vocab_size"], layer_norm_eps=m["layer_norm_eps"],
                  pad_token_id=0)
    if m["position"] == "rope":
        cfg = transformers.RoFormerConfig(embedding_size=d, rotary_value=False, **common)
        return transformers.RoFormerForMaskedLM(cfg)
    cfg = transformers.BertConfig(**common)
    try:  # SDPA attention where this transformers and torch have it
        return transformers.BertForMaskedLM(cfg, attn_implementation="sdpa")
    except (TypeError, ValueError, ImportError):
        return transformers.BertForMaskedLM(cfg)


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True, help="rotor bench train --json output")
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with open(args.bench) as f:
        bench = json.load(f)
    for key in ("task", "model", "train", "batches", "precision"):
        if key not in bench:
            sys.exit(f"train_peer: {args.bench} has no '{key}' (not a rotor bench train --json file)")
    peer, why_not = peer_name(bench)
    if why_not:
        return absent(args, peer, why_not)
    try:
        import torch
        import torch.nn.functional as F
        import transformers
    except ImportError as e:
        return absent(args, peer, f"PyTorch and transformers are needed ({e})")
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

    model = build_model(bench, transformers).to(device)
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
    scaler = torch.cuda.amp.GradScaler() if precision == "fp16" else None
    ls = train.get("label_smoothing", 0.0)
    clip = train.get("clip_norm", 0.0)
    freq = max(1, int(train.get("update_freq", 1)))
    V = bench["model"]["vocab_size"]

    gen = torch.Generator().manual_seed(args.seed)
    batches = bench["batches"]
    inputs = [make_inputs(bench, b, torch, device, gen) for b in batches]
    updates = [list(range(i, min(i + freq, len(batches)))) for i in range(0, len(batches), freq)]

    def micro(i, tokens):
        kwargs, labels = inputs[i]
        with torch.autocast(device_type=args.device, dtype=amp_dtype,
                            enabled=amp_dtype is not None):
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
    peak = torch.cuda.max_memory_allocated() if args.device == "cuda" else 0
    result = {
        "peer": peer, "mode": args.mode, "precision": precision, "device": args.device,
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "torch": torch.__version__, "transformers": transformers.__version__,
        "updates": len(updates), "step_ms": seconds * 1e3 / max(1, len(updates)),
        "warmup_s": warm_s, "peak_bytes": int(peak),
        "losses": [float(x) for x in losses],
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    bad = [x for x in result["losses"] if not math.isfinite(x)]
    print(f"train_peer: {peer} {args.mode} {precision}: {result['step_ms']:.1f} ms/update over "
          f"{len(updates)} updates, peak {peak / 2**30:.2f} GiB, first loss "
          f"{result['losses'][0]:.3f}{' (non-finite losses!)' if bad else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
