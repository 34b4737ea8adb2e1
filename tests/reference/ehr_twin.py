#!/usr/bin/env python3
"""A PyTorch twin of rotor's EHR next-visit model (task multilabel, data.format ehr).

The instrument of issue 42 (docs/results.md, "Why the tiny next-visit recipes
predicted the label frequencies"): it separates "rotor computes something
wrong" from "this recipe cannot learn it". Written from the description of
the model (BERT post-norm encoder, Hugging Face names; BEHRT's inputs: code,
visit position, visit segment and age embeddings summed, then LayerNorm; the
[CLS] state through BERT's tanh pooler, or RoFormer's dense + GELU head under
RoPE, or with model.classifier_head label_attention each code's own
attention over the patient's tokens, tanh, a per-code weight and bias
(CAML's head); one logit per code; BCE averaged over the codes and the
patients) and
from src/data/ehr.h's build_ehr_sequence, not from rotor's code.

  check   load a rotor run's checkpoint by name, score a prepared split, and
          compare the probabilities with `rotor predict`'s output on the
          same split (and the AP computed from the twin's own reading of the
          labels with rotor's):
            ehr_twin.py check --run RUN[:best] --dir DIR --predictions P.tsv [--split test]
  train   train the twin with a rotor config's recipe on the same prepared
          directory (same splits, sequences, labels, optimizer, schedule,
          clipping, dropout, init), with overrides for the candidates of the
          issue; prints validation every --valid-interval and the test scores
          of the best validation AP:
            ehr_twin.py train --config CFG.yaml --dir DIR [--lr X] [--updates N]
                [--warmup N] [--dropout P] [--init-std S] [--bias-init zero|prior]
                (default: the config's model.classifier_bias)
                [--loss mean|sum] [--eps E] [--batch-size B] [--seed N]

  replay  the same batches: rotor's epoch plan (data/batch_plan.h, its
          Philox shuffle replayed here) from the same initial weights, without
          dropout; compares the weights and the test probabilities after the
          updates with rotor's:
            ehr_twin.py replay --init RUN0 --run RUN1 --dir DIR
          RUN0: a rotor run of the config with optim.lr=0 and one update (its
          checkpoint holds the initial weights); RUN1: the same config with
          model.dropout=0, model.attention_dropout=0 and model.init_from=RUN0:best.

Needs torch and numpy (exits 77 without them); reads the directory and
scores with scripts/eval/ehr_baselines.py.
"""

import argparse
import math
import os
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import yaml
except ImportError as e:  # pragma: no cover
    print("SKIPPED: %s" % e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts", "eval"))
import ehr_baselines as eb  # noqa: E402

CLS = 5


# ---- data: src/data/ehr.h build_ehr_sequence ----

def build_sequence(tokens, max_len):
    x = np.asarray(tokens).reshape(-1, 3)
    keep = min(len(x), max_len - 1)
    x = x[len(x) - keep:]
    visits = x[:, 2] - x[0, 2]
    codes = np.concatenate([[CLS], x[:, 0]])
    ages = np.concatenate([[x[0, 1]], x[:, 1]])
    positions = np.concatenate([[0], visits])
    return codes, ages, positions % 2, positions


class Data:
    def __init__(self, directory, split, max_len, num_codes):
        prefix = os.path.join(directory, split)
        examples = eb.read_corpus(prefix)
        labels = eb.read_corpus(prefix + ".labels")
        self.seqs = [build_sequence(e, max_len) for e in examples]
        self.truth = np.zeros((len(examples), num_codes), dtype=np.uint8)
        for i, y in enumerate(labels):
            self.truth[i, np.asarray(y) - eb.FIRST_CODE] = 1

    def __len__(self):
        return len(self.seqs)

    def batch(self, ids):
        T = max(len(self.seqs[i][0]) for i in ids)
        out = [torch.zeros(len(ids), T, dtype=torch.long) for _ in range(4)]
        lengths = torch.zeros(len(ids), dtype=torch.long)
        for r, i in enumerate(ids):
            s = self.seqs[i]
            for k in range(4):
                out[k][r, :len(s[k])] = torch.from_numpy(np.asarray(s[k], dtype=np.int64))
            lengths[r] = len(s[0])
        return out, lengths, torch.from_numpy(self.truth[ids].astype(np.float32))


# ---- the model ----

def gelu_new(x):  # rotor's GELU: the tanh approximation (src/ops/gemm.h)
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def rope(x, positions, base=10000.0):
    """RoFormer eq. 34, interleaved pairs: x [B, H, T, D], positions [B, T]."""
    D = x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = positions[:, None, :, None].double() * theta  # [B, 1, T, D/2]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)


class Layer(nn.Module):
    def __init__(self, d, h, ff, p, pa, eps):
        super().__init__()
        self.h, self.p, self.pa = h, p, pa
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=eps), nn.LayerNorm(d, eps=eps)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x, key_pad, rope_pos):
        B, T, d = x.shape
        H, D = self.h, d // self.h
        split = lambda t: t.view(B, T, H, D).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        if rope_pos is not None:
            q, k = rope(q, rope_pos), rope(k, rope_pos)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(D)
        att = att.masked_fill(key_pad[:, None, None, :], float("-inf")).softmax(-1)
        att = F.dropout(att, self.pa, self.training)
        a = (att @ v).transpose(1, 2).reshape(B, T, d)
        x = self.ln1(x + F.dropout(self.o(a), self.p, self.training))
        f = self.ff2(gelu_new(self.ff1(x)))
        return self.ln2(x + F.dropout(f, self.p, self.training))


class Twin(nn.Module):
    def __init__(self, m, vocab, num_codes):
        super().__init__()
        d, self.p = m["d_model"], m["dropout"]
        self.rope = m["position"] == "rope"
        self.visit = m["position_source"] == "visit"
        self.word = nn.Embedding(vocab, d, padding_idx=0)
        self.pos = None if self.rope else nn.Embedding(m["max_positions"], d)
        self.seg = nn.Embedding(m["type_vocab_size"], d)
        self.age = nn.Embedding(m["age_vocab_size"], d) if m["age_vocab_size"] > 0 else None
        self.ln = nn.LayerNorm(d, eps=m["layer_norm_eps"])
        self.layers = nn.ModuleList(Layer(d, m["n_heads"], m["d_ff"], m["dropout"],
                                          m["attention_dropout"], m["layer_norm_eps"])
                                    for _ in range(m["encoder_layers"]))
        self.label = m.get("classifier_head", "cls") == "label_attention"
        if self.label:  # per code: a query, a weight (out.weight) and a bias (out.bias)
            self.lab_q = nn.Linear(d, num_codes, bias=False)
        else:  # BERT: bert.pooler.dense; RoFormer: classifier.dense
            self.dense = nn.Linear(d, d)
        self.out = nn.Linear(d, num_codes)   # classifier / classifier.out_proj
        std = m["init_std"]
        for name, t in self.named_parameters():
            if "ln" in name.split(".")[-2]:
                nn.init.ones_(t) if name.endswith("weight") else nn.init.zeros_(t)
            elif name.endswith("bias"):
                nn.init.zeros_(t)
            else:
                nn.init.normal_(t, 0.0, std)
        with torch.no_grad():
            self.word.weight[0].zero_()

    def names(self):
        """rotor's (Hugging Face's) name of each parameter."""
        p = "roformer" if self.rope else "bert"
        e = p + ".embeddings."
        n = {"word.weight": e + "word_embeddings.weight", "seg.weight": e + "token_type_embeddings.weight",
             "ln.weight": e + "LayerNorm.weight", "ln.bias": e + "LayerNorm.bias"}
        if self.pos is not None:
            n["pos.weight"] = e + "position_embeddings.weight"
        if self.age is not None:
            n["age.weight"] = e + "age_embeddings.weight"
        hf = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
              "o": "attention.output.dense", "ln1": "attention.output.LayerNorm",
              "ff1": "intermediate.dense", "ff2": "output.dense", "ln2": "output.LayerNorm"}
        for i in range(len(self.layers)):
            for a, b in hf.items():
                for w in ("weight", "bias"):
                    n["layers.%d.%s.%s" % (i, a, w)] = "%s.encoder.layer.%d.%s.%s" % (p, i, b, w)
        if self.label:
            n.update({"lab_q.weight": "classifier.label_queries",
                      "out.weight": "classifier.label_weight", "out.bias": "classifier.label_bias"})
            return n
        heads = (("classifier.dense", "classifier.out_proj") if self.rope
                 else ("bert.pooler.dense", "classifier"))
        for a, b in zip(("dense", "out"), heads):
            for w in ("weight", "bias"):
                n["%s.%s" % (a, w)] = "%s.%s" % (b, w)
        return n

    def forward(self, batch, lengths):
        codes, ages, segments, positions = batch
        T = codes.shape[1]
        token_pos = torch.arange(T)[None, :].expand_as(codes)
        pos = positions if self.visit else token_pos
        x = self.word(codes) + self.seg(segments)
        if self.pos is not None:
            x = x + self.pos(pos)
        if self.age is not None:
            x = x + self.age(ages)
        x = F.dropout(self.ln(x), self.p, self.training)
        key_pad = token_pos >= lengths[:, None]
        for layer in self.layers:
            x = layer(x, key_pad, pos if self.rope else None)
        if self.label:  # a_c = softmax_t(h_t . u_c); v_c = tanh(sum_t a_c,t h_t)
            a = torch.einsum("btd,cd->bct", x, self.lab_q.weight)
            a = a.masked_fill(key_pad[:, None, :], float("-inf")).softmax(-1)
            v = torch.tanh(torch.einsum("bct,btd->bcd", a, x))
            z = (F.dropout(v, self.p, self.training) * self.out.weight).sum(-1) + self.out.bias
            return z, v[:, 0]
        h = x[:, 0]
        if self.rope:  # RoFormer's head
            h = gelu_new(self.dense(F.dropout(h, self.p, self.training)))
        else:  # BERT's pooler
            h = torch.tanh(self.dense(h))
        return self.out(F.dropout(h, self.p, self.training)), h


def scores(model, data, bs=256):
    model.eval()
    out = []
    with torch.no_grad():
        for s in range(0, len(data), bs):
            b, lengths, _ = data.batch(list(range(s, min(len(data), s + bs))))
            out.append(model(b, lengths)[0].double())
    model.train()
    return torch.cat(out).numpy()


# ---- check: rotor's checkpoint in the twin against rotor predict ----

def load_safetensors(path):
    import json
    import struct
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        assert v["dtype"] == "F32", (k, v["dtype"])
        out[k] = torch.from_numpy(np.frombuffer(raw[8 + n + s:8 + n + e], dtype="<f4").copy()).view(v["shape"])
    return out


def check(a):
    run, _, tag = a.run.partition(":")
    ckpt = os.path.join(run, "checkpoints", tag or "best")
    cfg = yaml.safe_load(open(os.path.join(ckpt, "config.yaml")))
    import json
    meta = json.load(open(os.path.join(a.dir, "ehr.json")))
    C = meta["vocab_size"] - eb.FIRST_CODE
    model = Twin(cfg["model"], meta["vocab_size"], C)
    w = load_safetensors(os.path.join(ckpt, "model.safetensors"))
    names = model.names()
    with torch.no_grad():
        for k, t in model.named_parameters():
            src = w[names[k]]
            if src.shape != t.shape:
                sys.exit("check: %s: rotor %s, twin %s" % (names[k], tuple(src.shape), tuple(t.shape)))
            t.copy_(src)
    unused = set(w) - set(names.values())
    data = Data(a.dir, a.split, cfg["data"]["seq_len"], C)
    z = scores(model, data)
    prob = 1 / (1 + np.exp(-z))
    lines = open(a.predictions).read().splitlines()
    header = lines[0].split("\t")
    codes = [l.split("\t")[0] for l in open(os.path.join(a.dir, "vocab.txt")).read().splitlines()][eb.FIRST_CODE:]
    if header[2:] != ["p_" + c for c in codes]:
        sys.exit("check: rotor predict's columns are not the codes of vocab.txt in order")
    rot = np.array([[float(v) for v in l.split("\t")[2:]] for l in lines[1:]])
    diff = np.abs(rot - prob).max()
    m_twin = eb.multilabel_scores(prob, data.truth)
    m_rot = eb.multilabel_scores(rot, data.truth)
    print("check: %d patients x %d codes; max |p_rotor - p_twin| = %.2e; unused rotor tensors: %s"
          % (rot.shape[0], rot.shape[1], diff, sorted(unused) or "none"))
    print("check: ap twin %.4f rotor-probabilities %.4f; auroc_macro twin %.4f rotor %.4f"
          % (m_twin["ap"], m_rot["ap"], m_twin["auroc_macro"], m_rot["auroc_macro"]))
    # The head: where its output bias went, and how saturated BERT's tanh
    # pooler is (|h| > 0.99: its derivative 1 - h^2 below 0.02) on the split.
    model.eval()
    with torch.no_grad():
        b, lengths, _ = data.batch(list(range(min(512, len(data)))))
        _, h = model(b, lengths)
    bias = model.out.bias.detach()
    print("head: output bias mean %.3f (from %.3f to %.3f); pooled |h| > 0.99: %.2f of the units; "
          "pooled std over patients %.3f"
          % (float(bias.mean()), float(bias.min()), float(bias.max()),
             float((h.abs() > 0.99).float().mean()), float(h.std(dim=0).mean())))
    # rotor predict prints probabilities to 6 decimals.
    return 0 if diff <= a.tolerance else 1


# ---- replay: rotor's batches (src/core/philox.h, src/data/batch_plan.h) ----

M32 = 0xFFFFFFFF


def philox4x32_10(c, k0, k1):
    c0, c1, c2, c3 = c
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c0, c1, c2, c3


class PhiloxRng:
    def __init__(self, seed, stream):
        self.seed, self.stream, self.pos, self.cache = seed, stream, 0, (None, None)

    def u32(self):
        block, lane = self.pos >> 2, self.pos & 3
        if self.cache[0] != block:
            s, st = self.seed, self.stream
            self.cache = (block, philox4x32_10((block & M32, block >> 32, st & M32, st >> 32),
                                               s & M32, (s >> 32) & M32))
        self.pos += 1
        return self.cache[1][lane]

    def below(self, n):
        limit = (2 ** 64 - 1) - (2 ** 64 - 1) % n
        while True:
            x = (self.u32() << 32) | self.u32()
            if x < limit:
                return x % n


def rotor_batches(n, batch_size, seed, layer=3):
    """rotor's classification batches, epoch after epoch (one rank, no drop_last)."""
    epoch = 0
    while True:
        stream = (epoch << 32) | ((layer & 0xFFF) << 20) | ((4 & 0xFF) << 12)  # RngPurpose::Shuffle
        rng, order = PhiloxRng(seed, stream), list(range(n))
        for i in range(n, 1, -1):
            j = rng.below(i)
            order[i - 1], order[j] = order[j], order[i - 1]
        for b in range(0, n, batch_size):
            yield order[b:b + batch_size]
        epoch += 1


def load_rotor_weights(model, ckpt):
    w = load_safetensors(os.path.join(ckpt, "model.safetensors"))
    names = model.names()
    with torch.no_grad():
        for k, t in model.named_parameters():
            t.copy_(w[names[k]])
    return w


def replay(a):
    import json
    cfg = yaml.safe_load(open(os.path.join(a.run, "config.yaml")))
    m, t, o = cfg["model"], cfg["train"], cfg["optim"]
    if m["dropout"] != 0 or m["attention_dropout"] != 0:
        sys.exit("replay: %s trains with dropout; its masks cannot be replayed" % a.run)
    meta = json.load(open(os.path.join(a.dir, "ehr.json")))
    C = meta["vocab_size"] - eb.FIRST_CODE
    tr = Data(a.dir, "train", cfg["data"]["seq_len"], C)
    te = Data(a.dir, a.split, cfg["data"]["seq_len"], C)
    model = Twin(m, meta["vocab_size"], C)
    load_rotor_weights(model, os.path.join(a.init, "checkpoints", "best"))
    updates, warmup = t["max_updates"], o["warmup_updates"]
    opt, lr_at = optimizer(model, o, o["lr"], o["eps"], updates, warmup)
    batches = rotor_batches(len(tr), t["batch_size"], cfg["seed"])
    for u in range(1, updates + 1):
        b, lengths, y = tr.batch(next(batches))
        loss = F.binary_cross_entropy_with_logits(model(b, lengths)[0], y)
        opt.zero_grad()
        loss.backward()
        if t.get("clip_norm", 0) > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), t["clip_norm"])
        for g in opt.param_groups:
            g["lr"] = lr_at(u)
        opt.step()
    final = os.path.join(a.run, "checkpoints", "step_%d" % updates)
    rot = load_safetensors(os.path.join(final, "model.safetensors"))
    names = model.names()
    worst = max(((float((p.detach() - rot[names[k]]).abs().max()), names[k])
                 for k, p in model.named_parameters()), key=lambda x: x[0])
    p_twin = 1 / (1 + np.exp(-scores(model, te)))
    load_rotor_weights(model, final)
    p_rot = 1 / (1 + np.exp(-scores(model, te)))
    diff = float(np.abs(p_twin - p_rot).max())
    ap_t, ap_r = eb.sample_ap(p_twin, te.truth), eb.sample_ap(p_rot, te.truth)
    print("replay: %d updates of rotor's batches from %s; largest weight difference %.2e (%s); "
          "%s: max |p_rotor - p_twin| %.2e, ap twin %.4f rotor %.4f"
          % (updates, a.init, worst[0], worst[1], a.split, diff, ap_t, ap_r))
    ok = diff <= a.tolerance and abs(ap_t - ap_r) <= a.tolerance
    return 0 if ok and worst[0] <= a.weight_tolerance else 1


def optimizer(model, o, lr, eps, updates, warmup):
    """AdamW with rotor's decay groups (biases and norms excluded) and its
    linear schedule (src/train/scheduler.h), update u = 1, 2, ..."""
    decay = [p for n, p in model.named_parameters() if not n.endswith("bias") and "ln" not in n]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "ln" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": o.get("weight_decay", 0.0)},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=tuple(o.get("betas", (0.9, 0.999))), eps=eps)
    end_lr, init_lr = o.get("end_lr", 0.0), o.get("warmup_init_lr", 0.0)

    def lr_at(u):
        if u <= warmup:
            return init_lr + (lr - init_lr) * u / max(1, warmup)
        return end_lr + (lr - end_lr) * (updates - u) / max(1, updates - warmup)
    return opt, lr_at


# ---- train: the recipe of a rotor config ----

def train(a):
    cfg = yaml.safe_load(open(a.config))
    m, t, o = cfg["model"], cfg["train"], cfg["optim"]
    defaults = {"position_source": "token", "age_vocab_size": 0, "attention_dropout": m.get("dropout", 0.1),
                "layer_norm_eps": 1e-12, "type_vocab_size": 2, "max_positions": 512, "init_std": 0.02}
    for k, v in defaults.items():
        m.setdefault(k, v)
    if a.dropout is not None:
        m["dropout"] = m["attention_dropout"] = a.dropout
    if a.init_std is not None:
        m["init_std"] = a.init_std
    lr = a.lr if a.lr is not None else o["lr"]
    updates = a.updates if a.updates is not None else t["max_updates"]
    warmup = a.warmup if a.warmup is not None else o.get("warmup_updates", 0)
    bs = a.batch_size or t["batch_size"]
    eps = a.eps if a.eps is not None else o.get("eps", 1e-8)
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    import json
    meta = json.load(open(os.path.join(a.dir, "ehr.json")))
    C = meta["vocab_size"] - eb.FIRST_CODE
    seq_len = cfg["data"]["seq_len"]
    tr, va, te = (Data(a.dir, s, seq_len, C) for s in ("train", "valid", "test"))
    model = Twin(m, meta["vocab_size"], C)
    bias_init = a.bias_init or m.get("classifier_bias", "zero")
    if bias_init == "prior":
        p = np.clip(tr.truth.mean(axis=0), 1e-4, 1 - 1e-4)
        with torch.no_grad():
            model.out.bias.copy_(torch.from_numpy(np.log(p / (1 - p))).float())
    opt, lr_at = optimizer(model, o, lr, eps, updates, warmup)

    rng = np.random.default_rng(a.seed)
    order, at = rng.permutation(len(tr)), 0
    best, log, t0 = (-1, 0, None), [], time.time()
    clip = t.get("clip_norm", 0.0)
    interval = a.valid_interval or t.get("valid_interval", 250)
    run_loss = 0.0
    for u in range(1, updates + 1):
        if at + bs > len(order):
            order, at = rng.permutation(len(tr)), 0
        ids = order[at:at + bs].tolist()
        at += bs
        b, lengths, y = tr.batch(ids)
        z, _ = model(b, lengths)
        loss = F.binary_cross_entropy_with_logits(z, y, reduction="mean")
        if a.loss == "sum":
            loss = loss * C  # summed over the codes, mean over the patients
        opt.zero_grad()
        loss.backward()
        if u == 1:  # the scale of the gradients against Adam's eps (loss mean over the codes)
            rms = sorted(float(p.grad.pow(2).mean().sqrt()) for n, p in model.named_parameters()
                         if not n.endswith(".k.bias"))  # softmax ignores the key bias: grad 0
            print("update 1: loss %.4f; gradient RMS per tensor: min %.2e, median %.2e, max %.2e "
                  "(key biases left out); Adam eps %.0e" % (float(loss.detach()), rms[0],
                                                             rms[len(rms) // 2], rms[-1], eps))
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip if clip > 0 else float("inf"))
        for g in opt.param_groups:
            g["lr"] = lr_at(u)
        opt.step()
        run_loss += float(loss.detach()) / (C if a.loss == "sum" else 1)
        if u % interval == 0 or u == updates:
            zv = scores(model, va)
            mv = eb.multilabel_scores(zv, va.truth)
            _, h = model.eval()(*va.batch(list(range(min(256, len(va)))))[:2])
            model.train()
            sat = float((h.abs() > 0.99).float().mean())
            print("update %5d | train loss %.4f | gnorm %.3g | valid ap %.4f auroc_macro %.4f | "
                  "head |h|>0.99 %.2f | bias mean %.2f | %.0fs"
                  % (u, run_loss / interval, float(gnorm), mv["ap"], mv["auroc_macro"], sat,
                     float(model.out.bias.detach().mean()), time.time() - t0), flush=True)
            run_loss = 0.0
            if mv["ap"] > best[0]:
                best = (mv["ap"], u, {k: v.clone() for k, v in model.state_dict().items()})
    model.load_state_dict(best[2])
    mt = eb.multilabel_scores(scores(model, te), te.truth)
    print("test (best valid ap %.4f at update %d): ap %.4f auroc %.4f ap_micro %.4f auroc_macro %.4f"
          % (best[0], best[1], mt["ap"], mt["auroc"], mt["ap_micro"], mt["auroc_macro"]))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("check")
    c.add_argument("--run", required=True)
    c.add_argument("--dir", required=True)
    c.add_argument("--predictions", required=True, help="rotor predict's output on --split")
    c.add_argument("--split", default="test")
    c.add_argument("--tolerance", type=float, default=2e-5)
    t = sub.add_parser("train")
    t.add_argument("--config", required=True)
    t.add_argument("--dir", required=True)
    t.add_argument("--lr", type=float)
    t.add_argument("--updates", type=int)
    t.add_argument("--warmup", type=int)
    t.add_argument("--dropout", type=float)
    t.add_argument("--init-std", type=float)
    t.add_argument("--eps", type=float)
    t.add_argument("--batch-size", type=int)
    t.add_argument("--bias-init", choices=["zero", "prior"],
                   help="the output bias: zero or the label log-odds (default: the config's "
                        "model.classifier_bias)")
    t.add_argument("--loss", choices=["mean", "sum"], default="mean")
    t.add_argument("--valid-interval", type=int)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--threads", type=int, default=2)
    r = sub.add_parser("replay")
    r.add_argument("--init", required=True, help="the rotor run whose checkpoint holds the initial weights")
    r.add_argument("--run", required=True, help="the rotor run trained from them without dropout")
    r.add_argument("--dir", required=True)
    r.add_argument("--split", default="test")
    r.add_argument("--tolerance", type=float, default=1e-3)
    r.add_argument("--weight-tolerance", type=float, default=1e-4,
                   help="the largest weight difference allowed after the updates")
    a = ap.parse_args()
    sys.exit({"check": check, "train": train, "replay": replay}[a.mode](a))


if __name__ == "__main__":
    main()
