#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets: tests/fuzz/corpus/<target>/.

Each target gets a handful of small valid inputs and near-valid ones (one
field wrong), in the input layout its fuzz_<target>.cpp describes. The files
are made here from the formats, not taken from elsewhere; rerun after a format
changes:  python3 tests/fuzz/make_corpus.py
"""
import json
import pathlib
import shutil
import struct

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = HERE / "corpus"


def write(target, name, data):
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


# ---- safetensors: 8-byte header length, JSON header, data -------------------

DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "U8": 1}


def safetensors(tensors, metadata=None, header_len=None, extra=b""):
    """tensors: [(name, dtype, shape)]; data bytes are a counting pattern."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = DTYPE_BYTES.get(dtype, 4)
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + n]}
        data += bytes(i % 251 for i in range(n))
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    n = len(text) if header_len is None else header_len
    return struct.pack("<Q", n) + text + data + extra


def safetensors_seeds():
    t = "safetensors"
    write(t, "two_tensors", safetensors([("w", "F32", [2, 3]), ("b", "I32", [4])],
                                        {"format": "pt"}))
    write(t, "every_dtype", safetensors([(d, d, [3]) for d in DTYPE_BYTES]))
    write(t, "scalar_and_empty", safetensors([("s", "F32", []), ("e", "F16", [0, 5])]))
    write(t, "empty_header", safetensors([]))
    write(t, "utf8_names", safetensors([("encoder.layers.0.\u00e4", "BF16", [2, 2])],
                                       {"producer": "rotor \u2713"}))
    write(t, "truncated_data", safetensors([("w", "F32", [4])])[:-3])
    write(t, "bytes_after_data", safetensors([("w", "U8", [4])], extra=b"\0"))
    write(t, "foreign_dtype", safetensors([("w", "F64", [2])]))
    write(t, "header_too_long", safetensors([("w", "F32", [1])], header_len=1 << 20))
    overlap = safetensors([("a", "F32", [1]), ("b", "F32", [1])])
    write(t, "overlapping", overlap.replace(b'"data_offsets":[4,8]', b'"data_offsets":[0,4]'))
    write(t, "not_json", struct.pack("<Q", 8) + b"{nope:1}")
    # A name the writer refuses: the reader must refuse it too (a finding).
    write(t, "empty_tensor_name", safetensors([("", "U8", [4])]))


# ---- config: YAML, lines starting with "--set " are overrides ----------------

def config_seeds():
    t = "config"
    for path in ["configs/quickstart/numbers_rope.yaml", "configs/mlm/roformer_tiny.yaml"]:
        write(t, pathlib.Path(path).stem, (ROOT / path).read_text())
    write(t, "empty", "")
    write(t, "small", "task: translation\nmodel:\n  d_model: 64\n  n_heads: 4\n"
                      "  position: rope\noptim:\n  betas: [0.9, 0.98]\n")
    write(t, "overrides", "model:\n  d_model: 32\n--set model.n_heads=2\n"
                          "--set optim.betas[1]=0.999\n--set data.train=x\n"
                          "--set train.max_updates=1e3\n")
    write(t, "override_list", "--set optim.betas=[0.8,0.9]\n--set optim.betas.0=0.5\n")
    write(t, "unknown_key", "model:\n  d_modle: 64\n")
    write(t, "bad_value", "train:\n  max_updates: abc\n  keep_last: -1\n")
    write(t, "duplicate_key", "seed: 1\nseed: 2\n")
    write(t, "not_a_mapping", "- a\n- b\n")
    write(t, "anchors", "model: &m\n  d_model: 64\ndata: *m\n")
    write(t, "strings", 'output_dir: "runs/\\u00e4 \\t x"\ndevice: cuda:1\n'
                        "dist:\n  rendezvous: file:/tmp/r\n")
    write(t, "bad_yaml", "model: {d_model: [1, 2\n")


# ---- corpus: uint16 k, the .idx (k % (rest + 1) bytes), the .bin -----------

def corpus(sentences, vocab=100, magic=b"ROTORIDX", version=1, dtype=1, tokens=None,
           offsets=None, bin_extra=b""):
    offs = [0]
    for s in sentences:
        offs.append(offs[-1] + len(s))
    offs = offsets if offsets is not None else offs
    total = offs[-1] if tokens is None else tokens
    idx = magic + struct.pack("<IIQQQQ", version, dtype, len(offs) - 1, vocab, total, 0)
    idx += struct.pack(f"<{len(offs)}Q", *offs)
    bin_ = b"".join(struct.pack(f"<{len(s)}i", *s) for s in sentences) + bin_extra
    return struct.pack("<H", len(idx)) + idx + bin_


def corpus_seeds():
    t = "corpus"
    three = [[5, 6, 7], [8], [9, 10, 11, 12]]
    write(t, "three", corpus(three))
    write(t, "none", corpus([]))
    write(t, "empty_sentence", corpus([[], [1, 2]]))
    write(t, "bad_magic", corpus(three, magic=b"ROTORIDY"))
    write(t, "bad_version", corpus(three, version=2))
    write(t, "bin_too_long", corpus(three, bin_extra=b"\1\0\0\0"))
    write(t, "bin_truncated", corpus(three)[:-2])
    write(t, "offsets_decrease", corpus(three, offsets=[0, 3, 2, 8]))
    write(t, "huge_token_count", corpus([], tokens=1 << 62, offsets=[0, 1 << 62]))
    write(t, "id_outside_vocab", corpus(three, vocab=10))
    write(t, "negative_id", corpus([[1, -2], [3]], vocab=0))
    write(t, "large_ids", corpus([[999, 1000], [2**31 - 1]], vocab=0))


# ---- json: a JSON document, also read as a trainer_state.json ----------------

def json_seeds():
    t = "json"
    state = {"format": "rotor-trainer-state-1", "step": 1200, "micro_step": 2400,
             "world_size": 2, "epoch": 3, "batch_index": 17, "loss_scale": 128.0,
             "loss_scale_good_steps": 5, "skipped_steps": 1, "best_valid_loss": 2.5,
             "bad_validations": 0, "train_seconds": 61.25}
    write(t, "trainer_state", json.dumps(state, indent=2) + "\n")
    missing = dict(state)
    del missing["loss_scale"]
    write(t, "missing_key", json.dumps(missing))
    write(t, "wrong_type", json.dumps(dict(state, step="1200", world_size=2.5)))
    write(t, "big_numbers", json.dumps(dict(state, step=18446744073709551615, epoch=-1,
                                            train_seconds=1e308, loss_scale=-0.0)))
    write(t, "duplicate_key", '{"step": 1, "step": 2}')
    write(t, "nested", '{"a": [1, [2, [3, {"b": null}]]], "c": true, "d": "\\u00e4\\ud83d\\ude00"}')
    write(t, "scalar", "3.5e-7")
    write(t, "truncated", json.dumps(state)[:40])


# ---- hf_index: a model.safetensors.index.json ------------------------------

def hf_index_seeds():
    t = "hf_index"
    names = ["bert.embeddings.word_embeddings.weight", "bert.encoder.layer.0.output.dense.weight",
             "cls.predictions.bias"]
    two = {n: f"model-0000{1 + i % 2}-of-00002.safetensors" for i, n in enumerate(names)}
    write(t, "two_shards", json.dumps({"metadata": {"total_size": 1234}, "weight_map": two},
                                      indent=2))
    write(t, "one_shard", json.dumps({"weight_map": {n: "model.safetensors" for n in names}}))
    write(t, "leaves_dir", json.dumps({"weight_map": {"w": "../model.safetensors"}}))
    write(t, "dot_dot", json.dumps({"weight_map": {"w": "..", "b": "."}}))
    write(t, "not_string", json.dumps({"weight_map": {"w": 1, "b": None}}))
    write(t, "empty_map", json.dumps({"weight_map": {}}))
    write(t, "map_is_list", json.dumps({"weight_map": [["w", "a.safetensors"]]}))
    write(t, "empty_name", json.dumps({"weight_map": {"": "a.safetensors", "w": ""}}))
    write(t, "duplicate_key", '{"weight_map": {"w": "a.safetensors", "w": "b.safetensors"}}')
    write(t, "nul_in_name", '{"weight_map": {"w\u0000": "a\u0000.safetensors"}}')


# ---- eval: an options byte, then hypothesis and reference lines ---------------

def eval_seeds():
    t = "eval"
    lines = [
        ("The cat sat on the mat.", "The cat is sitting on the mat."),
        ("It's the U.S. Dr. Smith's dog's bone, isn't it?", "it is Mr. Smith's dog."),
        ("Der 3. Mai: 1,000.50 Euro (ca. 20%) - z.B. E-Mail-Adresse",
         "Am 3. Mai 1.000,50 \u20ac - zum Beispiel E-Mail"),
        ("dreihunderteinundzwanzig", "dreihundertzweiundzwanzig"),
        ("&amp; &lt;skipped&gt; <skipped> &quot;x&quot; a--b ...", "& < > \"x\" a - b ."),
        ("\u00c4\u00d6\u00dc \u0130stanbul \u03a3\u039f\u03a6\u039f\u03a3 \u4e2d\u6587\u3002",
         "\u00e4\u00f6\u00fc istanbul \u03c3\u03bf\u03c6\u03bf\u03c2 \u4e2d\u6587"),
        ("tabs\there\u00a0nbsp\u2003em  space ", " leading and trailing\u3000"),
        ("\U0001f600 emoji \u00bf\u00a1 \u00ab\u00bb \u2014 \u2026", ""),
    ]
    # One pair per seed, each with other options: small inputs run fast.
    flags = [0, 1 | 8, 2 | 16, 3 | 32, 4 | 64, 4 | 16 | 128, 1 | 96, 4 | 8 | 128]
    for i, ((h, r), f) in enumerate(zip(lines, flags)):
        write(t, f"pair_{i}", bytes([f]) + f"{h}\n{r}".encode())
    write(t, "all_pairs", bytes([0]) + "\n".join(f"{h}\n{r}" for h, r in lines).encode())
    write(t, "invalid_utf8", bytes([0]) + b"a\xff\xfeb \xc3\x28 \xed\xa0\x80 \xf4\x90\x80\x80\nab")
    write(t, "single_line", bytes([16]) + b"a-b-c d-e")


# ---- tsv: an options byte, then a classification TSV -------------------------

def tsv_seeds():
    t = "tsv"
    header, pair, regression, required = 1, 2, 4, 8
    write(t, "pairs", bytes([header | pair | required]) +
          b"s1\ts2\tlabel\nthree hundred\tdreihundert\tyes\nfour\tf\xc3\xbcnf\tno\n")
    write(t, "single_crlf", bytes([header]) + b"s1\tlabel\r\none\tyes\r\n\r\ntwo\tno")
    write(t, "regression_cr", bytes([header | pair | regression]) +
          b"s1\ts2\tlabel\ra\tb\t+0.5\rc\td\t-1e3\r")
    write(t, "bom", bytes([header | regression | required]) +
          b"\xef\xbb\xbfs1\tlabel\nx\t1e300\ny\t.5\n")
    write(t, "no_header", bytes([pair]) + b"a\tb\tyes\nc\td\n")
    write(t, "test_set", bytes([header | pair]) + b"s1\ts2\nq\tr\n")
    write(t, "extra_field", bytes([header | required]) + b"s1\tlabel\na\tyes\textra\n")
    write(t, "invalid_utf8", bytes([header]) + b"s1\tlabel\na\xff\tyes\n\xed\xa0\x80\tno\n")


# ---- ehr: an options byte, then JSON lines or the CSV tables ------------------

def ehr_seeds():
    t = "ehr"
    jsonl = 1
    patients = b"patient_id,birth_date\nP1,1950-03-15\n\"P,2\",1980-12-31\r\n"
    events = (b"patient_id,time,visit_id,code\nP1,2001-01-01,1,E11\nP1,2001-01-02,1,I10\n"
              b"\"P,2\",2010-06-01,v7,\"J4\"\"5\"\nP1,1999-05-05,0,E11\n")
    write(t, "csv_two_patients", bytes([0]) + patients + b"\0" + events)
    write(t, "csv_bom_extra_column", bytes([0]) + b"\xef\xbb\xbfpatient_id,sex,birth_date\nA,f,"
          b"2000-02-29\n\0patient_id,code,time,visit_id\nA,X,2004-02-28,1\n")
    write(t, "csv_tab_in_code", bytes([0]) + patients + b"\0" +
          b"patient_id,time,visit_id,code\nP1,2001-01-01,1,E1\t1\n")
    write(t, "csv_age_9998_years", bytes([0]) + b"patient_id,birth_date\nA,0001-01-01\n\0"
          b"patient_id,time,visit_id,code\nA,9999-01-01,1,X\n")
    write(t, "csv_patients_only", bytes([0]) + b"patient_id,birth_date\nA,1970-01-01\n")
    write(t, "jsonl_basic", bytes([jsonl]) +
          b'{"patient_id": "A", "visits": [{"age": 40.5, "codes": ["I10", "I10"]}, '
          b'{"age": 12, "codes": ["J45"]}]}\n\n{"patient_id": 17, "visits": []}\r\n')
    write(t, "jsonl_newline_in_id", bytes([jsonl]) +
          b'{"patient_id": "A\\nB", "visits": [{"age": 1, "codes": ["X"]}]}\n')
    write(t, "jsonl_special_code", bytes([jsonl]) +
          b'{"patient_id": "A", "visits": [{"age": 1, "codes": ["[SEP]"]}]}\n')
    write(t, "jsonl_old_age", bytes([jsonl]) +
          b'{"patient_id": "A", "visits": [{"age": 1801, "codes": ["X"]}]}\n')


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    safetensors_seeds()
    config_seeds()
    corpus_seeds()
    json_seeds()
    hf_index_seeds()
    eval_seeds()
    tsv_seeds()
    ehr_seeds()
    for d in sorted(OUT.iterdir()):
        print(f"{d.relative_to(ROOT)}: {len(list(d.iterdir()))} files")


if __name__ == "__main__":
    main()
