"""rotor <-> Hugging Face transformers, through the rotor binary.

1. Export: a tiny BERT and a tiny RoFormer are trained by `rotor train` (task
   mlm, a few updates on `rotor synth` text), exported with `rotor export
   --format hf` and loaded with BertForMaskedLM / RoFormerForMaskedLM; their
   logits on the same inputs (token ids with padding and token types, and
   text pairs tokenized by Debian's python3-sentencepiece, the library rotor
   links) must equal `rotor mlm-logits` within 1e-4 (relative to the largest
   logit, fp32).
2. Fine-tuned export: each is fine-tuned by `rotor train` (task
   classification from model.init_from: the BERT as a two-label pair
   classifier, the RoFormer as a regressor), exported, and loaded with
   AutoModelForSequenceClassification (BertForSequenceClassification /
   RoFormerForSequenceClassification); their logits must equal `rotor
   predict --scores`.
3. Import: a BertForMaskedLM and a RoFormerForMaskedLM made and saved by
   transformers initialize `rotor train` (model.init_from); after one update
   at a negligible learning rate, rotor's logits must equal transformers'.

4. Causal LMs (task lm): a tiny rotary model (tied, scaled embeddings: the
   export unties them) and a learned-position one (untied) are trained by
   `rotor train`, exported and loaded with AutoModelForCausalLM
   (GPTNeoXForCausalLM / GPT2LMHeadModel); their logits on ragged token-id
   sequences, one by one and batched with right padding, must equal rotor's
   (reference_lm_logits) within 1e-5 of the largest logit. The exported
   tokenizer (LlamaTokenizer, use_fast=False) must give rotor's
   SentencePiece ids, and config.json's eos_token_id the end-of-text id.
   A third, rotary on a quarter of each head's dimensions (model.rope.fraction
   0.25: GPTNeoXConfig's rotary_pct), is checked the same way.
5. A GPTNeoXForCausalLM and a GPT2LMHeadModel (tied, as transformers saves
   it) made by transformers initialize `rotor train` (task lm,
   model.init_from); after one update at a negligible learning rate rotor's
   logits must equal transformers'. So must a GPTNeoXForCausalLM with
   rotary_pct 0.25 (rotor's model.rope.fraction 0.25).

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
from safetensors.torch import load_file
from transformers import (AutoModelForCausalLM, AutoModelForMaskedLM,
                          AutoModelForSequenceClassification, AutoTokenizer, BertConfig,
                          BertForMaskedLM, GPT2Config, GPT2LMHeadModel, GPTNeoXConfig,
                          GPTNeoXForCausalLM, RoFormerConfig, RoFormerForMaskedLM)

TOL = 1e-4
LM_TOL = 1e-5
D, HEADS, FF, LAYERS, POS = 32, 4, 64, 2, 64


def run(rotor, *args):
    r = subprocess.run([rotor, *args], capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    if r.returncode != 0:
        sys.exit(f"rotor {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def model_yaml(position, extra):
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
  max_positions: {POS}
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
    ids, types, mask = hf_inputs([pack(sp, a, b) for a, b in texts])
    with torch.no_grad():
        out = model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
    ok &= compare(f"{type(model).__name__} ({position}), text pairs", ours, out, mask.bool())
    return ok


def check_classifier(rotor, tmp, position, hf_dir, sp):
    """Fine-tune from `hf_dir`, export, and compare rotor predict with transformers."""
    regression = position == "rope"
    rng = random.Random(11)
    en = open(f"{tmp}/data/train.en").read().split("\n")[:300]
    de = open(f"{tmp}/data/train.de").read().split("\n")[:300]
    rows = []
    for i in range(len(en)):
        match = rng.random() < 0.5
        b = de[i] if match else de[rng.randrange(len(de))]
        label = f"{len(en[i].split()) / 2:.1f}" if regression else ("yes" if match else "no")
        rows.append(f"{en[i]}\t{b}\t{label}")
    with open(f"{tmp}/pairs.tsv", "w") as f:
        f.write("first\tsecond\tlabel\n" + "\n".join(rows) + "\n")
    labels = "  regression: true\n" if regression else "  labels: [no, yes]\n"
    cfg = model_yaml(position, f"""  init_from: {hf_dir}
task: classification
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
    with open(f"{tmp}/cls_{position}.yaml", "w") as f:
        f.write(cfg)
    run(rotor, "train", f"{tmp}/cls_{position}.yaml")
    run(rotor, "export", "--checkpoint", f"{tmp}/cls_{position}:best", "--format", "hf",
        "--output", f"{tmp}/hfc_{position}")
    run(rotor, "predict", "--checkpoint", f"{tmp}/cls_{position}:best", "--input",
        f"{tmp}/pairs.tsv", "--output", f"{tmp}/pred_{position}.tsv", "--scores")
    pred = [l.split("\t") for l in open(f"{tmp}/pred_{position}.tsv").read().splitlines()[1:]]
    ours = torch.tensor([[float(x) for x in p[2:]] for p in pred])
    model = AutoModelForSequenceClassification.from_pretrained(f"{tmp}/hfc_{position}").eval()
    ids, types, mask = hf_inputs([pack(sp, r.split("\t")[0], r.split("\t")[1]) for r in rows])
    with torch.no_grad():
        out = model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
    kind = "regression" if regression else "two labels"
    ok = compare(f"{type(model).__name__} ({position}, {kind})", ours, out)
    if model.config.problem_type != ("regression" if regression else "single_label_classification"):
        print(f"FAIL problem_type {model.config.problem_type}")
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
    else:
        model = BertForMaskedLM(BertConfig(**common))
    with torch.no_grad():  # biases and norms away from 0 and 1, so that each one counts
        for name, p in model.named_parameters():
            if "embed_positions" not in name:  # RoFormer's fixed sinusoid table stays
                p.add_(0.05 * torch.randn_like(p))
    hf_dir = f"{tmp}/made_by_hf_{position}"
    model.save_pretrained(hf_dir, safe_serialization=True)
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


# Partial rotation (model.rope.fraction, GPT-NeoX's rotary_pct): 2 heads of
# 16 dimensions, the first 4 rotated (two pairs, so that the interleaved ->
# halves permutation of the export and import moves rows), 12 left as they are.
PARTIAL_HEADS, PARTIAL_PCT = 2, 0.25


def lm_variant(name):
    """(model.position, n_heads, YAML lines under model:) of an LM check's name."""
    if name == "rope_partial":
        return "rope", PARTIAL_HEADS, f"  rope:\n    fraction: {PARTIAL_PCT}\n"
    return name, HEADS, ""


def lm_yaml(name, out, extra):
    position, heads, rope = lm_variant(name)
    return f"""task: lm
device: cpu
seed: 3
output_dir: {out}
model:
  decoder_layers: {LAYERS}
  d_model: {D}
  n_heads: {heads}
{rope}  d_ff: {FF}
  activation: gelu
  norm: pre
  layer_norm_eps: 1.0e-5
  position: {position}
  max_positions: {POS}
{extra}"""


def check_lm(lm_logits, tmp, name, ckpt, hf_dir):
    """reference_lm_logits of `ckpt` against transformers on `hf_dir`."""
    model = AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    rng = random.Random(9)
    V = model.config.vocab_size
    seqs = [[rng.randrange(1, V) for _ in range(n)] for n in (7, 30, 1, 19)]
    with open(f"{tmp}/lm_ids.txt", "w") as f:
        f.write("".join(" ".join(map(str, s)) + "\n" for s in seqs))
    out = f"{tmp}/lm_logits_{name}.safetensors"
    r = subprocess.run([lm_logits, ckpt, f"{tmp}/lm_ids.txt", out], capture_output=True,
                       text=True)
    if r.returncode != 0:
        sys.exit(f"reference_lm_logits failed ({r.returncode}):\n{r.stderr}")
    ours = load_file(out)["logits"]
    ok = True
    arch = type(model).__name__
    with torch.no_grad():
        for i, s in enumerate(seqs):  # one by one
            theirs = model(input_ids=torch.tensor([s])).logits[0]
            ok &= compare(f"{arch} ({name}), sequence {i} ({len(s)} tokens)", ours[i, :len(s)],
                          theirs, tol=LM_TOL)
        T = max(len(s) for s in seqs)  # batched, right-padded with <pad>
        ids = torch.zeros(len(seqs), T, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, s in enumerate(seqs):
            ids[i, :len(s)] = torch.tensor(s)
            mask[i, :len(s)] = 1
        theirs = model(input_ids=ids, attention_mask=mask).logits
    ok &= compare(f"{arch} ({name}), batch with padding", ours, theirs, mask.bool(), tol=LM_TOL)
    return ok


def check_lm_export(rotor, lm_logits, tmp, position):
    """Train, export and compare a tiny causal LM; the tokenizer and eos id too."""
    share = "true" if position.startswith("rope") else "false"
    out = f"{tmp}/lm_{position}"
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
"""))
    run(rotor, "train", f"{out}.yaml")
    sp = spm.SentencePieceProcessor(model_file=f"{tmp}/spm_lm.model")
    hf_dir = f"{tmp}/hf_lm_{position}"
    run(rotor, "export", "--checkpoint", out, "--format", "hf", "--output", hf_dir)
    ok = check_lm(lm_logits, tmp, f"{position}, exported", out, hf_dir)
    tok = AutoTokenizer.from_pretrained(hf_dir, use_fast=False)
    texts = ["three hundred twenty-one", "siebenundsiebzigtausend und neun", "nine"]
    for t in texts:
        theirs = tok(t, add_special_tokens=False).input_ids
        if theirs != sp.encode(t):
            print(f"FAIL tokenizer ({position}): {t!r} -> {theirs}, rotor {sp.encode(t)}")
            ok = False
    cfg = AutoModelForCausalLM.from_pretrained(hf_dir).config
    if cfg.eos_token_id != sp.eos_id() or tok.eos_token_id != sp.eos_id():
        print(f"FAIL eos_token_id ({position}): config {cfg.eos_token_id}, tokenizer "
              f"{tok.eos_token_id}, rotor {sp.eos_id()}")
        ok = False
    else:
        print(f"ok   tokenizer and eos_token_id ({position})")
    return ok


def check_lm_import(rotor, lm_logits, tmp, position, spm_model, vocab):
    """A causal LM saved by transformers initializes rotor: the same logits."""
    torch.manual_seed(6)
    if position.startswith("rope"):
        _, heads, _ = lm_variant(position)
        pct = PARTIAL_PCT if position == "rope_partial" else 1.0
        model = GPTNeoXForCausalLM(GPTNeoXConfig(
            vocab_size=vocab, hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=heads,
            intermediate_size=FF, hidden_act="gelu_new", rotary_pct=pct, rotary_emb_base=10000,
            max_position_embeddings=POS, layer_norm_eps=1e-5, use_parallel_residual=False,
            tie_word_embeddings=False))
        share = "false"
    else:  # GPT-2 ties its output to the input table by default
        model = GPT2LMHeadModel(GPT2Config(
            vocab_size=vocab, n_embd=D, n_layer=LAYERS, n_head=HEADS, n_inner=FF,
            activation_function="gelu_new", n_positions=POS, layer_norm_epsilon=1e-5))
        share = "true"
    with torch.no_grad():  # biases and norms away from 0 and 1, so that each one counts
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    hf_dir = f"{tmp}/made_by_hf_lm_{position}"
    model.save_pretrained(hf_dir, safe_serialization=True)
    shutil.copy(spm_model, f"{hf_dir}/spiece.model")
    out = f"{tmp}/imported_lm_{position}"
    with open(f"{out}.yaml", "w") as f:
        f.write(lm_yaml(position, out, f"""  share_embeddings: {share}
  scale_embeddings: false
  init_from: {hf_dir}
data:
  train: {tmp}/data/train.en
  seq_len: 32
train:
  max_updates: 1
  batch_size: 4
optim:
  lr: 1.0e-30
  warmup_updates: 0
  schedule: constant
"""))
    run(rotor, "train", f"{out}.yaml")
    return check_lm(lm_logits, tmp, f"{position}, made by transformers", out, hf_dir)


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
            vocab = spm.SentencePieceProcessor(model_file=f"{tmp}/spm_lm.model").get_piece_size()
            for position in ("rope", "rope_partial", "learned"):
                ok &= check_lm_import(rotor, args.lm_logits, tmp, position, f"{tmp}/spm_lm.model",
                                      vocab)
        for position in ("learned", "rope") if args.only != "lm" else ():
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
            ok &= check_mlm(rotor, tmp, position, f"{tmp}/mlm_{position}", f"{tmp}/hf_{position}",
                            sp)
            ok &= check_classifier(rotor, tmp, position, f"{tmp}/hf_{position}", sp)
            ok &= check_import(rotor, tmp, position, f"{tmp}/spm.model", sp.get_piece_size())
    print("all comparisons hold" if ok else "some comparisons FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
