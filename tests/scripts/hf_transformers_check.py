"""rotor <-> Hugging Face transformers, through the rotor binary, under
whichever transformers the python3 running it has (CI runs it under 4.36 on
Debian's torch and under the newest 5.x on PyPI's torch: tests/CMakeLists.txt).

1. Export: a tiny BERT and a tiny RoFormer are trained by `rotor train` (task
   mlm, a few updates on `rotor synth` text), exported with `rotor export
   --format hf` and loaded with BertForMaskedLM / RoFormerForMaskedLM; their
   logits on the same inputs (token ids with padding and token types, and
   text pairs tokenized by the exported tokenizer) must equal `rotor
   mlm-logits` within 1e-4 (relative to the largest logit, fp32). The
   exported tokenizer, loaded by AutoTokenizer.from_pretrained with default
   arguments, must give rotor's ids and token types ([CLS] a [SEP] b [SEP])
   on texts with out-of-vocabulary characters, runs of spaces, tabs, NFKC
   forms and [MASK] inside the text (rotor's ids: its own, from `rotor
   mlm-logits`, and SentencePiece's on many more texts).
2. Fine-tuned export: each is fine-tuned by `rotor train` from
   model.init_from: the BERT as a two-label pair classifier, the RoFormer as
   a regressor (task classification), the DeBERTa-v2 as a multi-label
   classifier (task multilabel); each is exported and loaded with
   AutoModelForSequenceClassification; their logits on the pairs that the
   exported tokenizer encodes must equal `rotor predict --scores`, and
   config.json's problem_type (and the multi-label one's id2label and loss)
   must be transformers' for the task. The BERT and the DeBERTa-v2 are also
   fine-tuned as three-way multiple-choice classifiers (data.choices),
   exported and loaded with AutoModelForMultipleChoice: their scores must
   equal `rotor predict --scores` (RoFormer's export is refused: its
   RoFormerForMultipleChoice pools otherwise).
3. Import: a BertForMaskedLM and a RoFormerForMaskedLM made and saved by
   transformers initialize `rotor train` (model.init_from); after one update
   at a negligible learning rate, rotor's logits must equal transformers'.

4. Causal LMs (task lm): a tiny rotary model (tied, scaled embeddings: the
   export unties them) and a learned-position one (untied) are trained by
   `rotor train`, exported and loaded with AutoModelForCausalLM
   (GPTNeoXForCausalLM / GPT2LMHeadModel); their logits on ragged token-id
   sequences, one by one and batched with right padding, must equal rotor's
   (reference_lm_logits) within 1e-5 of the largest logit. The exported
   tokenizer must give rotor's ids (</s>, then SentencePiece's pieces, as
   `rotor generate` feeds a prompt) and config.json's eos_token_id the
   end-of-text id. A third, rotary on a quarter of each head's dimensions
   (model.rope.fraction 0.25), is checked the same way; so is the tokenizer
   of a byte-level LM (data.tokenizer bytes).
5. GPTNeoXForCausalLM and GPT2LMHeadModel (tied, as transformers saves it)
   made and saved by transformers initialize `rotor train` (task lm,
   model.init_from); after one update at a negligible learning rate rotor's
   logits must equal transformers'. The GPT-NeoX ones cover full and partial
   (0.25) rotation, theta 500 with linear x2 scaling and dynamic x2 scaling
   (exercised: sequences longer than max_position_embeddings), saved with
   the keys of the running version (5.x: rope_parameters alone).
6. Llama: a tiny LM with Llama's layer (RMSNorm, SwiGLU, no biases, 4 query
   heads over 2 key/value heads) is trained, exported and loaded as
   LlamaForCausalLM, logits and tokenizer compared as in 4; a
   LlamaForCausalLM made by transformers (grouped heads, theta 500, linear
   x2 scaling; under 5.x also one with Llama 3.1's llama3 scaling)
   initializes rotor as in 5.

Texts the tokenizers give other ids for, by Hugging Face's conventions
(checkpoint/hf_tokenizer.h): <s> </s> <unk> <pad> written in the text, and a
text that is a single user-defined piece; they are reported, not compared.

Usage: hf_transformers_check.py --rotor BIN --lm-logits BIN [--only mlm|lm].
Exits 0 when every comparison holds, 1 otherwise.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import sentencepiece as spm
import torch
import transformers
from safetensors.torch import load_file
from transformers import (AutoModelForCausalLM, AutoModelForMaskedLM,
                          AutoModelForMultipleChoice, AutoModelForSequenceClassification, AutoTokenizer, BertConfig,
                          BertForMaskedLM, DebertaV2Config, DebertaV2ForMaskedLM, GPT2Config, GPT2LMHeadModel, GPTNeoXConfig,
                          GPTNeoXForCausalLM, LlamaConfig, LlamaForCausalLM, RoFormerConfig,
                          RoFormerForMaskedLM)

TOL = 1e-4
LM_TOL = 1e-5
D, HEADS, FF, LAYERS, POS = 32, 4, 64, 2, 64
TRANSFORMERS_5 = int(transformers.__version__.split(".")[0]) >= 5

# Texts for the tokenizer checks: out-of-vocabulary characters (the synthetic
# corpus is lower-case English and German number words), runs of spaces,
# spaces at both ends, tabs and line breaks, forms NFKC rewrites, U+2581
# itself, [MASK] inside a text, and nothing at all.
TOKENIZER_TEXTS = [
    "three hundred twenty-one", "siebenundsiebzigtausend und neun", "nine", "", " ", "a  b",
    "  leading and trailing  ", "tab\there", "line\nbreak", "Straße über Ärger", "日本語 テキスト",
    "emoji 😀 ok", "ﬁne ﬂow", "ＡＢＣ　ｄｅｆ", "①②", "…", "\u2581already", "a\u2581b",
    "e\u0301 é", "\u00a0nbsp\u00a0", "zero\u200bwidth", "1,000.50 $", "''quotes'' ``x``",
    "is [MASK].", "[MASK] at the start", "x[MASK]y", "two [MASK][MASK] masks", "[CLS] x [SEP]",
    "THREE Hundred Twenty", "ninety-nine thousand nine hundred ninety-nine",
]
# Texts the exported tokenizers read by Hugging Face's conventions, not
# rotor's (checkpoint/hf_tokenizer.h): reported, not compared.
CONTROL_PIECES = ("<s>", "</s>", "<unk>", "<pad>")
DIVERGENT_TEXTS = ["see </s> here", "<s>", "[MASK]", " [SEP] "]


def run(rotor, *args):
    r = subprocess.run([rotor, *args], capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    if r.returncode != 0:
        sys.exit(f"rotor {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


# DeBERTa-v2's log buckets: 8 buckets, distances up to 32, so that the short
# test sequences reach the log-spaced and clamped rows.
DEBERTA_BUCKETS, DEBERTA_MAX_REL = 8, 32


def model_yaml(position, extra):
    deberta = (f"\n  deberta:\n    position_buckets: {DEBERTA_BUCKETS}\n"
               f"    max_relative_positions: {DEBERTA_MAX_REL}") if position == "deberta" else ""
    return f"""device: cpu
seed: 3
model:
  encoder_layers: {LAYERS}
  d_model: {D}
  n_heads: {HEADS}
  d_ff: {FF}
  activation: gelu
  layer_norm_eps: 1.0e-12
  position: {position}
  max_positions: {POS}{deberta}
{extra}"""


def compare(name, ours, theirs, mask=None, tol=TOL):
    ours, theirs = torch.as_tensor(ours, dtype=torch.float32), theirs.float()
    if mask is not None:
        ours, theirs = ours[mask], theirs[mask]
    scale = max(1.0, theirs.abs().max().item())
    diff = (ours - theirs).abs().max().item()
    ok = diff <= tol * scale
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max |rotor - transformers| = {diff:.3g} "
          f"(largest logit {theirs.abs().max().item():.3g})")
    return ok


def pack(sp, a, b=None, cls=5, sep=6):
    ids = [cls] + sp.encode(a) + [sep]
    types = [0] * len(ids)
    if b is not None:
        tail = sp.encode(b) + [sep]
        ids += tail
        types += [1] * len(tail)
    return ids, types


def hf_inputs(rows):
    T = max(len(i) for i, _ in rows)
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    types = torch.zeros_like(ids)
    mask = torch.zeros_like(ids)
    for r, (i, t) in enumerate(rows):
        ids[r, :len(i)] = torch.tensor(i)
        types[r, :len(t)] = torch.tensor(t)
        mask[r, :len(i)] = 1
    return ids, types, mask


def divergent(text, user_pieces):
    """Whether `text` (or a pair of texts) is one the exported tokenizers read
    otherwise by design."""
    if isinstance(text, tuple):
        return any(divergent(t, user_pieces) for t in text)
    if not isinstance(text, str):
        return False
    return any(c in text for c in CONTROL_PIECES) or text.strip() in user_pieces


def corpus_texts(tmp, n=40):
    """Lines of the synthetic corpus, both languages, as more tokenizer texts."""
    out = []
    for lang in ("en", "de"):
        with open(f"{tmp}/data/train.{lang}", encoding="utf-8") as f:
            out += f.read().split("\n")[:n]
    return out


def compare_ids(label, texts, want, got, user_pieces=()):
    """want(text) and got(text) -> ids; every text but the divergent ones."""
    ok, shown, compared = True, 0, 0
    for t in texts:
        if divergent(t, user_pieces):
            continue
        compared += 1
        w, g = want(t), got(t)
        if w != g:
            ok = False
            if shown < 5:
                print(f"FAIL {label}: {t!r} -> {g}, rotor {w}")
                shown += 1
    if ok:
        print(f"ok   {label}: rotor's ids on {compared} texts")
    return ok


def report_divergent(label, tok, sp_ids, texts):
    """The documented differences: printed, so that a change shows in the log."""
    for t in texts:
        got = tok(t, add_special_tokens=False).input_ids
        note = "same as rotor" if got == sp_ids(t) else f"rotor {sp_ids(t)}"
        print(f"note {label}: {t!r} -> {got} ({note}; by Hugging Face's conventions)")


def check_encoder_tokenizer(rotor, tmp, label, ckpt, hf_dir, sp):
    """The exported tokenizer of a masked LM or classifier: rotor's ids and types
    (and, for a masked LM's checkpoint `ckpt`, those of `rotor mlm-logits`)."""
    tok = AutoTokenizer.from_pretrained(hf_dir)
    user = ("[MASK]", "[CLS]", "[SEP]")
    texts = TOKENIZER_TEXTS + corpus_texts(tmp)
    ok = compare_ids(f"{label} tokenizer, single texts", texts,
                     lambda t: [5] + sp.encode(t) + [6], lambda t: tok(t).input_ids, user)
    ok &= compare_ids(f"{label} tokenizer, pieces alone", texts, sp.encode,
                      lambda t: tok(t, add_special_tokens=False).input_ids, user)
    # Pairs of two texts (an empty second text is no pair to transformers).
    pairs = [(a, b) for a, b in zip(texts[::2], texts[1::2]) if a and b]
    ok &= compare_ids(f"{label} tokenizer, pairs and token types", pairs,
                      lambda p: (pack(sp, *p)[0], pack(sp, *p)[1]),
                      lambda p: (tok(*p).input_ids, tok(*p).token_type_ids), user)
    if tok.mask_token_id != 4 or tok.cls_token_id != 5 or tok.sep_token_id != 6 or \
            tok.pad_token_id != 0:
        print(f"FAIL {label} tokenizer special ids: mask {tok.mask_token_id} cls "
              f"{tok.cls_token_id} sep {tok.sep_token_id} pad {tok.pad_token_id}")
        ok = False
    if ckpt is None:
        return ok
    # rotor's own ids for text (not SentencePiece's, which they must equal):
    # what `rotor mlm-logits` packs, row by row.
    rows = [(a, b) for a, b in pairs
            if not divergent(a, user) and not divergent(b, user) and a.strip() and b.strip()
            and not any(c in a + b for c in "\t\n\r\u2028\u0085")][:12]
    with open(f"{tmp}/tok_pairs.txt", "w", encoding="utf-8") as f:
        f.write("".join(f"{a}\t{b}\n" for a, b in rows))
    out = f"{tmp}/tok_pairs_{label.replace(' ', '_')}.safetensors"
    run(rotor, "mlm-logits", "--checkpoint", ckpt, "--input", f"{tmp}/tok_pairs.txt", "--output",
        out)
    d = load_file(out)
    ours = [(ids[m.bool()].tolist(), types[m.bool()].tolist())
            for ids, types, m in zip(d["input_ids"], d["token_type_ids"], d["attention_mask"])]
    ok &= compare_ids(f"{label} tokenizer against rotor mlm-logits", range(len(rows)),
                      lambda i: ours[i],
                      lambda i: (tok(*rows[i]).input_ids, tok(*rows[i]).token_type_ids))
    report_divergent(f"{label} tokenizer", tok, sp.encode, DIVERGENT_TEXTS)
    return ok


def check_mlm(rotor, tmp, position, ckpt, hf_dir, sp):
    """rotor mlm-logits of `ckpt` against transformers on `hf_dir`."""
    ok = True
    model = AutoModelForMaskedLM.from_pretrained(hf_dir).eval()
    rng = random.Random(7)
    V = model.config.vocab_size
    lines = []
    for n in (5, 12, 3, 9):  # ragged lengths: padding and key masking
        ids = [5] + [rng.randrange(7, V) for _ in range(n)] + [6]
        types = [0] * (n // 2 + 1) + [1] * (len(ids) - n // 2 - 1)
        lines.append(" ".join(map(str, ids)) + "\t" + " ".join(map(str, types)))
    with open(f"{tmp}/ids.txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    run(rotor, "mlm-logits", "--checkpoint", ckpt, "--input", f"{tmp}/ids.txt", "--input-format",
        "ids", "--output", f"{tmp}/ids_{position}.safetensors")
    d = load_file(f"{tmp}/ids_{position}.safetensors")
    with torch.no_grad():
        out = model(input_ids=d["input_ids"].long(), token_type_ids=d["token_type_ids"].long(),
                    attention_mask=d["attention_mask"].long()).logits
    ok &= compare(f"{type(model).__name__} ({position}), token ids", d["logits"], out,
                  d["attention_mask"].bool())
    # Text pairs: rotor tokenizes and packs [CLS] a [SEP] b [SEP]; so does this side.
    texts = [("three hundred twenty-one", "dreihunderteinundzwanzig"),
             ("seventy-seven thousand", "siebenundsiebzigtausend"), ("nine", None)]
    with open(f"{tmp}/text.txt", "w") as f:
        f.write("".join(a + ("\t" + b if b else "") + "\n" for a, b in texts))
    run(rotor, "mlm-logits", "--checkpoint", ckpt, "--input", f"{tmp}/text.txt", "--output",
        f"{tmp}/text_{position}.npy")
    ours = np.load(f"{tmp}/text_{position}.npy")
    if os.path.exists(f"{hf_dir}/tokenizer.json"):  # an export: its own tokenizer
        tok = AutoTokenizer.from_pretrained(hf_dir)
        encoded = [tok(a, b) if b else tok(a) for a, b in texts]
        rows = [(e.input_ids, e.token_type_ids) for e in encoded]
    else:  # a model transformers saved: rotor's packing
        rows = [pack(sp, a, b) for a, b in texts]
    ids, types, mask = hf_inputs(rows)
    with torch.no_grad():
        out = model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
    ok &= compare(f"{type(model).__name__} ({position}), text pairs", ours, out, mask.bool())
    return ok


def train_export_predict(rotor, tmp, name, cfg, ckpt, tsv):
    """Trains `cfg` (a run in tmp/name), exports checkpoint `ckpt` to tmp/hf_name
    and runs `rotor predict --scores` on `tsv`: the prediction file's header
    and rotor's logits, one row a line."""
    with open(f"{tmp}/{name}.yaml", "w") as f:
        f.write(cfg)
    run(rotor, "train", f"{tmp}/{name}.yaml")
    run(rotor, "export", "--checkpoint", ckpt, "--format", "hf", "--output", f"{tmp}/hf_{name}")
    run(rotor, "predict", "--checkpoint", ckpt, "--input", tsv, "--output", f"{tmp}/{name}.pred",
        "--scores")
    lines = open(f"{tmp}/{name}.pred").read().splitlines()
    header = lines[0].split("\t")
    cols = [i for i, h in enumerate(header) if h.startswith("logit_")]
    logits = torch.tensor([[float(l.split("\t")[i]) for i in cols] for l in lines[1:]])
    return [header[i] for i in cols], logits


# The classifier each position's masked LM is fine-tuned into: BERT two
# labels, RoFormer a regressor, DeBERTa-v2 multi-label (task multilabel:
# which of the English words "hundred", "seven", "thousand" the first text
# holds).
CLASSIFIER_KIND = {"learned": "two labels", "rope": "regression", "deberta": "multi-label"}
PROBLEM_TYPE = {"two labels": "single_label_classification", "regression": "regression",
                "multi-label": "multi_label_classification"}
MULTI_LABELS = ("hundred", "seven", "thousand")


def check_classifier(rotor, tmp, position, hf_dir, sp):
    """Fine-tune from `hf_dir`, export, and compare rotor predict with transformers."""
    kind = CLASSIFIER_KIND[position]
    rng = random.Random(11)
    en = open(f"{tmp}/data/train.en").read().split("\n")[:300]
    de = open(f"{tmp}/data/train.de").read().split("\n")[:300]
    rows = []
    for i in range(len(en)):
        match = rng.random() < 0.5
        b = de[i] if match else de[rng.randrange(len(de))]
        if kind == "regression":
            label = f"{len(en[i].split()) / 2:.1f}"
        elif kind == "multi-label":
            label = ",".join(w for w in MULTI_LABELS if w in en[i].split())
        else:
            label = "yes" if match else "no"
        rows.append(f"{en[i]}\t{b}\t{label}")
    with open(f"{tmp}/pairs.tsv", "w") as f:
        f.write("first\tsecond\tlabel\n" + "\n".join(rows) + "\n")
    labels = {"regression": "  regression: true\n", "two labels": "  labels: [no, yes]\n",
              "multi-label": ""}[kind]
    task = "multilabel" if kind == "multi-label" else "classification"
    cfg = model_yaml(position, f"""  init_from: {hf_dir}
task: {task}
output_dir: {tmp}/cls_{position}
data:
  train: {tmp}/pairs.tsv
  valid: {tmp}/pairs.tsv
  sentence1_column: first
  sentence2_column: second
{labels}  seq_len: {POS}
train:
  max_updates: 20
  batch_size: 16
  valid_interval: 10
  save_interval: 20
optim:
  name: adamw
  lr: 3.0e-3
  warmup_updates: 2
""")
    header, ours = train_export_predict(rotor, tmp, f"cls_{position}", cfg,
                                        f"{tmp}/cls_{position}:best", f"{tmp}/pairs.tsv")
    model = AutoModelForSequenceClassification.from_pretrained(f"{tmp}/hf_cls_{position}").eval()
    ok = check_encoder_tokenizer(None, tmp, f"classifier {position}", None, f"{tmp}/hf_cls_{position}",
                                 sp)
    tok = AutoTokenizer.from_pretrained(f"{tmp}/hf_cls_{position}")
    encoded = [tok(*r.split("\t")[:2]) for r in rows]
    ids, types, mask = hf_inputs([(e.input_ids, e.token_type_ids) for e in encoded])
    with torch.no_grad():
        out = model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
    ok &= compare(f"{type(model).__name__} ({position}, {kind})", ours, out)
    if model.config.problem_type != PROBLEM_TYPE[kind]:
        print(f"FAIL problem_type {model.config.problem_type}")
        ok = False
    if kind == "multi-label":
        names = [model.config.id2label[i] for i in range(model.config.num_labels)]
        header = [h[len("logit_"):] for h in header]
        if names != list(MULTI_LABELS) or header != names:
            print(f"FAIL id2label {names}, rotor's outputs {header}")
            ok = False
        # transformers' own loss for the problem type (BCEWithLogitsLoss)
        # against rotor's, recomputed from its logits.
        target = torch.tensor([[float(w in r.split("\t")[2].split(",")) for w in names]
                               for r in rows])
        with torch.no_grad():
            theirs = model(input_ids=ids, token_type_ids=types, attention_mask=mask,
                           labels=target).loss
        mine = torch.nn.functional.binary_cross_entropy_with_logits(ours, target)
        ok &= compare(f"{type(model).__name__} ({position}, {kind}) loss", mine.reshape(1),
                      theirs.reshape(1))
    return ok


def check_multiple_choice(rotor, tmp, position, hf_dir, sp):
    """A multiple-choice classifier fine-tuned from `hf_dir` (BERT, DeBERTa-v2:
    RoFormer's is refused), exported and loaded with AutoModelForMultipleChoice:
    its scores equal `rotor predict --scores`."""
    rng = random.Random(13)
    en = open(f"{tmp}/data/train.en").read().split("\n")[:200]
    de = open(f"{tmp}/data/train.de").read().split("\n")[:200]
    rows = []
    for i in range(len(en)):
        right = rng.randrange(3)
        choices = [de[rng.randrange(len(de))] for _ in range(3)]
        choices[right] = de[i]
        rows.append([str(right), en[i]] + choices)
    with open(f"{tmp}/choices.tsv", "w") as f:
        f.write("label\tcontext\tc0\tc1\tc2\n" + "".join("\t".join(r) + "\n" for r in rows))
    cfg = model_yaml(position, f"""  init_from: {hf_dir}
task: classification
output_dir: {tmp}/mc_{position}
data:
  train: {tmp}/choices.tsv
  valid: {tmp}/choices.tsv
  choices: 3
  seq_len: {POS}
train:
  max_updates: 20
  batch_size: 8
  valid_interval: 20
  save_interval: 20
optim:
  name: adamw
  lr: 3.0e-3
  warmup_updates: 2
""")
    _, ours = train_export_predict(rotor, tmp, f"mc_{position}", cfg, f"{tmp}/mc_{position}",
                                   f"{tmp}/choices.tsv")
    model = AutoModelForMultipleChoice.from_pretrained(f"{tmp}/hf_mc_{position}").eval()
    tok = AutoTokenizer.from_pretrained(f"{tmp}/hf_mc_{position}")
    encoded = [tok(r[1], c) for r in rows for c in r[2:]]
    ids, types, mask = hf_inputs([(e.input_ids, e.token_type_ids) for e in encoded])
    shape = (len(rows), 3, ids.shape[1])
    with torch.no_grad():
        out = model(input_ids=ids.view(shape), token_type_ids=types.view(shape),
                    attention_mask=mask.view(shape)).logits
    ok = compare(f"{type(model).__name__} ({position}, 3 choices)", ours, out)
    if ours.shape != out.shape:
        print(f"FAIL multiple choice shapes: rotor {tuple(ours.shape)}, transformers "
              f"{tuple(out.shape)}")
        ok = False
    return ok


def check_import(rotor, tmp, position, spm_model, vocab):
    """A model saved by transformers initializes rotor: the same logits."""
    torch.manual_seed(5)
    common = dict(vocab_size=vocab, hidden_size=D, num_hidden_layers=LAYERS,
                  num_attention_heads=HEADS, intermediate_size=FF, hidden_act="gelu_new",
                  max_position_embeddings=POS, layer_norm_eps=1e-12, pad_token_id=0)
    if position == "rope":
        model = RoFormerForMaskedLM(RoFormerConfig(embedding_size=D, **common))
    elif position == "deberta":
        model = DebertaV2ForMaskedLM(DebertaV2Config(
            type_vocab_size=2, relative_attention=True, position_biased_input=False,
            pos_att_type="p2c|c2p", share_att_key=True, norm_rel_ebd="layer_norm",
            position_buckets=DEBERTA_BUCKETS, max_relative_positions=DEBERTA_MAX_REL, **common))
    else:
        model = BertForMaskedLM(BertConfig(**common))
    with torch.no_grad():  # biases and norms away from 0 and 1, so that each one counts
        for name, p in model.named_parameters():
            if "embed_positions" not in name:  # RoFormer's fixed sinusoid table stays
                p.add_(0.05 * torch.randn_like(p))
    hf_dir = f"{tmp}/made_by_hf_{position}"
    model.save_pretrained(hf_dir)
    shutil.copy(spm_model, f"{hf_dir}/spiece.model")
    cfg = model_yaml(position, f"""  init_from: {hf_dir}
task: mlm
output_dir: {tmp}/imported_{position}
data:
  train: {tmp}/data/train.en
  seq_len: {POS}
train:
  max_updates: 1
  batch_size: 4
optim:
  lr: 1.0e-30
  warmup_updates: 0
  schedule: constant
""")
    with open(f"{tmp}/imported_{position}.yaml", "w") as f:
        f.write(cfg)
    run(rotor, "train", f"{tmp}/imported_{position}.yaml")
    return check_mlm(rotor, tmp, position + " imported", f"{tmp}/imported_{position}", hf_dir,
                     spm.SentencePieceProcessor(model_file=spm_model))


# The causal LMs' variants: (model.position, n_heads, model.rope, and the
# GPT-NeoX rotation as transformers holds it). Partial rotation
# (model.rope.fraction, GPT-NeoX's rotary_pct / partial_rotary_factor): 2
# heads of 16 dimensions, the first 4 rotated (two pairs, so that the
# interleaved -> halves permutation of the export and import moves rows), 12
# left as they are. Dynamic scaling changes the angles only past
# max_position_embeddings: that variant has 16 positions and sequences of up
# to 30 tokens.
PARTIAL_HEADS, PARTIAL_PCT = 2, 0.25
DYNAMIC_POS = 16
LM_VARIANTS = {
    "rope": ("rope", HEADS, {}, dict(theta=10000.0, pct=1.0, scaling=None)),
    "rope_partial": ("rope", PARTIAL_HEADS, {"fraction": PARTIAL_PCT},
                     dict(theta=10000.0, pct=PARTIAL_PCT, scaling=None)),
    "rope_theta500_linear2": ("rope", HEADS, {"theta": 500, "scaling": "linear", "factor": 2},
                              dict(theta=500.0, pct=1.0, scaling="linear", factor=2.0)),
    "rope_dynamic2": ("rope", HEADS, {"scaling": "dynamic_ntk", "factor": 2},
                      dict(theta=10000.0, pct=1.0, scaling="dynamic", factor=2.0)),
    "learned": ("learned", HEADS, {}, None),
}


# Llama's layer (model.position rope with RMSNorm: LlamaForCausalLM): SwiGLU
# without biases, and 4 query heads over 2 key/value heads.
LLAMA_KV_HEADS = 2
LLAMA_LINES = f"""  activation: silu
  norm_type: rms_norm
  gated_ffn: true
  bias: false
  kv_heads: {LLAMA_KV_HEADS}
"""


def lm_positions(name):
    return DYNAMIC_POS if name == "rope_dynamic2" else POS


def lm_yaml(name, out, extra, llama=False, rope=None):
    """The tiny causal LM of variant `name`; llama: Llama's layer (LLAMA_LINES);
    rope: model.rope's keys instead of the variant's."""
    position, heads, variant_rope, _ = LM_VARIANTS[name]
    rope = variant_rope if rope is None else rope
    activation = LLAMA_LINES if llama else "  activation: gelu\n"
    rope_lines = "".join(f"    {k}: {v}\n" for k, v in rope.items())
    return f"""task: lm
device: cpu
seed: 3
output_dir: {out}
model:
  decoder_layers: {LAYERS}
  d_model: {D}
  n_heads: {heads}
{"  rope:" + chr(10) + rope_lines if rope_lines else ""}  d_ff: {FF}
{activation}  norm: pre
  layer_norm_eps: 1.0e-5
  position: {position}
  max_positions: {lm_positions(name)}
{extra}"""


def neox_config(rotation, **kwargs):
    """GPTNeoXConfig with `rotation` in the keys of the running transformers
    (5.x: rope_parameters, which save_pretrained writes alone; 4.x: rotary_pct,
    rotary_emb_base and rope_scaling)."""
    if TRANSFORMERS_5:
        params = {"rope_type": rotation["scaling"] or "default", "rope_theta": rotation["theta"],
                  "partial_rotary_factor": rotation["pct"]}
        if rotation["scaling"]:
            params["factor"] = rotation["factor"]
        return GPTNeoXConfig(rope_parameters=params, **kwargs)
    scaling = ({"type": rotation["scaling"], "factor": rotation["factor"]}
               if rotation["scaling"] else None)
    return GPTNeoXConfig(rotary_pct=rotation["pct"], rotary_emb_base=rotation["theta"],
                         rope_scaling=scaling, **kwargs)


def lm_logits_of(lm_logits, tmp, name, ckpt, seqs):
    """reference_lm_logits of `ckpt` on `seqs`, each run alone: [N, T, V]."""
    with open(f"{tmp}/lm_ids.txt", "w") as f:
        f.write("".join(" ".join(map(str, s)) + "\n" for s in seqs))
    out = f"{tmp}/lm_logits_{name}.safetensors"
    r = subprocess.run([lm_logits, ckpt, f"{tmp}/lm_ids.txt", out], capture_output=True,
                       text=True)
    if r.returncode != 0:
        sys.exit(f"reference_lm_logits failed ({r.returncode}):\n{r.stderr}")
    return load_file(out)["logits"]


def check_lm(lm_logits, tmp, name, ckpt, hf_dir, variant):
    """reference_lm_logits of `ckpt` against transformers on `hf_dir`."""
    model = AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    rng = random.Random(9)
    V = model.config.vocab_size
    dynamic = variant == "rope_dynamic2"
    # Dynamic scaling depends on the length of the call, rotor's and
    # transformers' alike (reference_lm_logits runs each sequence alone):
    # sequences one by one, longest last (transformers keeps the longest
    # angles it has seen), and no padded batch, whose rows all take the
    # batch's length in transformers.
    lengths = (1, 7, 19, 30) if dynamic else (7, 30, 1, 19)
    seqs = [[rng.randrange(1, V) for _ in range(n)] for n in lengths]
    ours = lm_logits_of(lm_logits, tmp, name, ckpt, seqs)
    ok = True
    arch = type(model).__name__
    with torch.no_grad():
        for i, s in enumerate(seqs):  # one by one
            theirs = model(input_ids=torch.tensor([s])).logits[0]
            ok &= compare(f"{arch} ({name}), sequence {i} ({len(s)} tokens)", ours[i, :len(s)],
                          theirs, tol=LM_TOL)
        if dynamic:
            return ok
        T = max(len(s) for s in seqs)  # batched, right-padded with <pad>
        ids = torch.zeros(len(seqs), T, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, s in enumerate(seqs):
            ids[i, :len(s)] = torch.tensor(s)
            mask[i, :len(s)] = 1
        theirs = model(input_ids=ids, attention_mask=mask).logits
    ok &= compare(f"{arch} ({name}), batch with padding", ours, theirs, mask.bool(), tol=LM_TOL)
    return ok


def check_lm_tokenizer(tmp, label, hf_dir, want_pieces, boundary):
    """The exported tokenizer of a causal LM: the boundary, then rotor's ids."""
    tok = AutoTokenizer.from_pretrained(hf_dir)
    texts = TOKENIZER_TEXTS + corpus_texts(tmp)
    ok = compare_ids(f"{label} tokenizer", texts, lambda t: [boundary] + want_pieces(t),
                     lambda t: tok(t).input_ids)
    ok &= compare_ids(f"{label} tokenizer, pieces alone", texts, want_pieces,
                      lambda t: tok(t, add_special_tokens=False).input_ids)
    report_divergent(f"{label} tokenizer", tok, want_pieces, DIVERGENT_TEXTS[:2])
    return ok, tok


def check_lm_export(rotor, lm_logits, tmp, position, llama=False):
    """Train, export and compare a tiny causal LM (llama: with Llama's layer,
    exported as LlamaForCausalLM); the tokenizer and eos id too."""
    share = "true" if position.startswith("rope") else "false"
    name = "llama" if llama else position
    out = f"{tmp}/lm_{name}"
    with open(f"{out}.yaml", "w") as f:
        f.write(lm_yaml(position, out, f"""  share_embeddings: {share}
  scale_embeddings: true
data:
  train: {tmp}/data/train.en
  spm_model: {tmp}/spm_lm.model
  vocab_size: 200
  seq_len: 32
train:
  max_updates: 30
  batch_size: 8
  save_interval: 30
optim:
  name: adamw
  lr: 3.0e-3
  warmup_updates: 5
""", llama))
    run(rotor, "train", f"{out}.yaml")
    sp = spm.SentencePieceProcessor(model_file=f"{tmp}/spm_lm.model")
    hf_dir = f"{tmp}/hf_lm_{name}"
    run(rotor, "export", "--checkpoint", out, "--format", "hf", "--output", hf_dir)
    ok = check_lm(lm_logits, tmp, f"{name}, exported", out, hf_dir, position)
    if llama:
        arch = type(AutoModelForCausalLM.from_pretrained(hf_dir)).__name__
        ok &= arch == "LlamaForCausalLM"
        print(f"{'ok  ' if arch == 'LlamaForCausalLM' else 'FAIL'} llama export loads as {arch}")
    tok_ok, tok = check_lm_tokenizer(tmp, f"lm {name}", hf_dir, sp.encode, sp.eos_id())
    ok &= tok_ok
    cfg = AutoModelForCausalLM.from_pretrained(hf_dir).config
    if cfg.eos_token_id != sp.eos_id() or tok.eos_token_id != sp.eos_id():
        print(f"FAIL eos_token_id ({position}): config {cfg.eos_token_id}, tokenizer "
              f"{tok.eos_token_id}, rotor {sp.eos_id()}")
        ok = False
    else:
        print(f"ok   eos_token_id ({position})")
    return ok


def check_byte_lm_export(rotor, lm_logits, tmp):
    """A byte-level LM (data.tokenizer bytes): its logits and its tokenizer."""
    out = f"{tmp}/lm_bytes"
    with open(f"{out}.yaml", "w") as f:
        f.write(lm_yaml("rope", out, f"""  share_embeddings: true
  scale_embeddings: true
data:
  train: {tmp}/data/train.de
  tokenizer: bytes
  seq_len: 32
train:
  max_updates: 10
  batch_size: 8
  save_interval: 10
optim:
  name: adamw
  lr: 3.0e-3
  warmup_updates: 2
"""))
    run(rotor, "train", f"{out}.yaml")
    hf_dir = f"{tmp}/hf_lm_bytes"
    run(rotor, "export", "--checkpoint", out, "--format", "hf", "--output", hf_dir)
    ok = check_lm(lm_logits, tmp, "bytes, exported", out, hf_dir, "rope")
    # rotor's byte ids: 4 + the user-defined symbols (its tokenizer file) + byte.
    with open(f"{out}/checkpoint_last/spm.model", encoding="utf-8") as f:
        symbols = [l[len("symbol "):] for l in f.read().splitlines()[1:]]
    first = 4 + len(symbols)

    def pieces(t):
        return [first + b for b in t.encode("utf-8")]
    tok_ok, _ = check_lm_tokenizer(tmp, "lm bytes", hf_dir, pieces, first + ord("\n"))
    return ok & tok_ok


def check_lm_import(rotor, lm_logits, tmp, variant, spm_model, vocab):
    """A causal LM saved by transformers initializes rotor: the same logits."""
    torch.manual_seed(6)
    _, heads, _, rotation = LM_VARIANTS[variant]
    if rotation is not None:
        model = GPTNeoXForCausalLM(neox_config(
            rotation, vocab_size=vocab, hidden_size=D, num_hidden_layers=LAYERS,
            num_attention_heads=heads, intermediate_size=FF, hidden_act="gelu_new",
            max_position_embeddings=lm_positions(variant), layer_norm_eps=1e-5,
            use_parallel_residual=False, tie_word_embeddings=False))
        share = "false"
    else:  # GPT-2 ties its output to the input table by default
        model = GPT2LMHeadModel(GPT2Config(
            vocab_size=vocab, n_embd=D, n_layer=LAYERS, n_head=HEADS, n_inner=FF,
            activation_function="gelu_new", n_positions=POS, layer_norm_epsilon=1e-5))
        share = "true"
    with torch.no_grad():  # biases and norms away from 0 and 1, so that each one counts
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return import_made_by_hf(rotor, lm_logits, tmp, model, f"lm_{variant}", variant, spm_model,
                             share)


def import_made_by_hf(rotor, lm_logits, tmp, model, name, variant, spm_model, share,
                      llama=False, rope=None):
    """Saves `model` (made by transformers), starts `rotor train` from it
    (model.init_from, one update at a negligible learning rate) and compares
    the logits."""
    hf_dir = f"{tmp}/made_by_hf_{name}"
    model.save_pretrained(hf_dir)
    shutil.copy(spm_model, f"{hf_dir}/spiece.model")
    out = f"{tmp}/imported_{name}"
    with open(f"{out}.yaml", "w") as f:
        f.write(lm_yaml(variant, out, f"""  share_embeddings: {share}
  scale_embeddings: false
  init_from: {hf_dir}
data:
  train: {tmp}/data/train.en
  seq_len: {min(32, lm_positions(variant))}
train:
  max_updates: 1
  batch_size: 4
optim:
  lr: 1.0e-30
  warmup_updates: 0
  schedule: constant
""", llama, rope))
    run(rotor, "train", f"{out}.yaml")
    return check_lm(lm_logits, tmp, f"{name}, made by transformers", out, hf_dir, variant)


# Llama 3.1's rope scaling on the tiny heads (8 dimensions, theta 500): over
# an original context of 16, pair 0 (wavelength 6.3) is blended and the
# others are divided by 8. transformers 4.36 has no llama3 rope type.
LLAMA3_ROPE = {"theta": 500, "scaling": "llama3", "factor": 8, "original_max_positions": 16,
               "low_freq_factor": 1, "high_freq_factor": 4}
LLAMA3_HF = {"rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0, "low_freq_factor": 1.0,
             "high_freq_factor": 4.0, "original_max_position_embeddings": 16}


def check_llama_import(rotor, lm_logits, tmp, spm_model, vocab, llama3=False):
    """A LlamaForCausalLM saved by transformers (grouped key/value heads, rope
    theta 500 scaled linearly by 2, or by Llama 3.1's llama3 scaling)
    initializes rotor: the same logits."""
    torch.manual_seed(7)
    variant = "rope_theta500_linear2"
    kwargs = dict(vocab_size=vocab, hidden_size=D, intermediate_size=FF, num_hidden_layers=LAYERS,
                  num_attention_heads=HEADS, num_key_value_heads=LLAMA_KV_HEADS,
                  hidden_act="silu", max_position_embeddings=POS, rms_norm_eps=1e-5,
                  tie_word_embeddings=False)
    if llama3:
        config = LlamaConfig(rope_parameters=dict(LLAMA3_HF), **kwargs)
    elif TRANSFORMERS_5:
        config = LlamaConfig(rope_parameters={"rope_type": "linear", "rope_theta": 500.0,
                                              "factor": 2.0}, **kwargs)
    else:
        config = LlamaConfig(rope_theta=500.0, rope_scaling={"type": "linear", "factor": 2.0},
                             **kwargs)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # norms away from 1, so that each one counts
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return import_made_by_hf(rotor, lm_logits, tmp, model, "llama3" if llama3 else "llama",
                             variant, spm_model, "false", llama=True,
                             rope=LLAMA3_ROPE if llama3 else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rotor", required=True)
    ap.add_argument("--lm-logits", required=True)
    ap.add_argument("--only", choices=("mlm", "lm"))
    args = ap.parse_args()
    rotor = args.rotor
    torch.set_num_threads(1)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        run(rotor, "synth", "numbers-en-de", "--output", f"{tmp}/data", "--train", "2000",
            "--valid", "100", "--test", "20", "--test-long", "5", "--seed", "3")
        if args.only != "mlm":
            for position in ("rope", "rope_partial", "learned"):
                ok &= check_lm_export(rotor, args.lm_logits, tmp, position)
            ok &= check_byte_lm_export(rotor, args.lm_logits, tmp)
            vocab = spm.SentencePieceProcessor(model_file=f"{tmp}/spm_lm.model").get_piece_size()
            for variant in LM_VARIANTS:
                ok &= check_lm_import(rotor, args.lm_logits, tmp, variant, f"{tmp}/spm_lm.model",
                                      vocab)
            ok &= check_lm_export(rotor, args.lm_logits, tmp, "rope", llama=True)
            ok &= check_llama_import(rotor, args.lm_logits, tmp, f"{tmp}/spm_lm.model", vocab)
            if TRANSFORMERS_5:  # 4.36 has no llama3 rope type
                ok &= check_llama_import(rotor, args.lm_logits, tmp, f"{tmp}/spm_lm.model",
                                         vocab, llama3=True)
        for position in ("learned", "rope", "deberta") if args.only != "lm" else ():
            with open(f"{tmp}/mlm_{position}.yaml", "w") as f:
                f.write(model_yaml(position, f"""task: mlm
output_dir: {tmp}/mlm_{position}
data:
  train: {tmp}/data/train.en
  spm_model: {tmp}/spm.model
  vocab_size: 200
  seq_len: {POS}
train:
  max_updates: 40
  batch_size: 16
  save_interval: 40
optim:
  name: adamw
  lr: 3.0e-3
  warmup_updates: 5
"""))
            run(rotor, "train", f"{tmp}/mlm_{position}.yaml")
            run(rotor, "export", "--checkpoint", f"{tmp}/mlm_{position}", "--format", "hf",
                "--output", f"{tmp}/hf_{position}")
            sp = spm.SentencePieceProcessor(model_file=f"{tmp}/spm.model")
            ok &= check_encoder_tokenizer(rotor, tmp, f"mlm {position}", f"{tmp}/mlm_{position}",
                                          f"{tmp}/hf_{position}", sp)
            ok &= check_mlm(rotor, tmp, position, f"{tmp}/mlm_{position}", f"{tmp}/hf_{position}",
                            sp)
            ok &= check_classifier(rotor, tmp, position, f"{tmp}/hf_{position}", sp)
            if position != "rope":  # RoFormerForMultipleChoice pools otherwise: refused
                ok &= check_multiple_choice(rotor, tmp, position, f"{tmp}/hf_{position}", sp)
            ok &= check_import(rotor, tmp, position, f"{tmp}/spm.model", sp.get_piece_size())
    print(f"transformers {transformers.__version__}, torch {torch.__version__}: "
          + ("all comparisons hold" if ok else "some comparisons FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
