// Prepared data and tokenizers outlive the config that made them only while
// their fingerprints say so (data/fingerprint.h), and weights are checked
// where they enter (a sharded Hugging Face checkpoint, a resumed trainer
// state) and leave (export, average). Each case is one row of a table, run
// as a shell script in a fresh copy of a small world:
//
//   data/{train,valid}.{en,de}   raw text of the numbers task
//   tiny.yaml, run/              a translation config and its run (2 updates,
//                                checkpoints/step_2, spm.model, data/ and
//                                their fingerprints)
//   small.model                  another tokenizer, of 60 pieces
//   pre/train.*, pre/valid.*     data/train and data/valid prepared with it
//   mlm.yaml, mlm.txt, mlmrun/   a masked-LM config, its text and its run
//   hf/                          mlmrun exported as a Hugging Face directory
//   st.py                        edits safetensors: `python3 st.py nan FILE
//                                TENSOR` puts a NaN in TENSOR; `python3 st.py
//                                shard hf OUT MODE` writes hf as two shards and
//                                an index, MODE ok, dup, unlisted, misplaced,
//                                missing or outside
//
// A case: {name, setup (a script that changes the world first), command,
// expected exit status, what stderr's last line must contain ("": the command
// succeeds and prints no error), files and directories whose contents must
// not change (compared before and after the command; a path absent before
// must stay absent), a check (a shell test that must hold afterwards, "" for
// none)}. All rows run in one process, so that
// the world is trained once.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "support/error_table.h"
#include "support/run_rotor.h"
#include "support/test_util.h"

namespace {

namespace fs = std::filesystem;
using rotor::test::slurp;
using rotor::test::TempDir;

// Safetensors surgery for the weight cases, in the format's own terms.
const char* kSafetensorsTool = R"(import json, math, os, shutil, struct, sys
def read(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n]); d = b[8 + n:]
    meta = h.pop('__metadata__', None)
    return {k: (v['dtype'], v['shape'], d[v['data_offsets'][0]:v['data_offsets'][1]])
            for k, v in h.items()}, meta
def write(p, t, meta):
    h, data = ({'__metadata__': meta} if meta else {}), b''
    for k, (dt, sh, by) in t.items():
        h[k] = {'dtype': dt, 'shape': sh, 'data_offsets': [len(data), len(data) + len(by)]}
        data += by
    s = json.dumps(h).encode(); s += b' ' * ((8 - len(s) % 8) % 8)
    open(p, 'wb').write(struct.pack('<Q', len(s)) + s + data)
if sys.argv[1] == 'nan':
    p, name = sys.argv[2:4]; t, m = read(p); dt, sh, by = t[name]
    t[name] = (dt, sh, struct.pack('<f', math.nan) + by[4:]); write(p, t, m)
else:
    src, out, mode = sys.argv[2:5]
    shutil.copytree(src, out); os.remove(out + '/model.safetensors')
    t, m = read(src + '/model.safetensors'); names = sorted(t)
    shard = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']
    parts, wm = [{}, {}], {}
    for i, n in enumerate(names):
        parts[i % 2][n] = t[n]; wm[n] = shard[i % 2]
    a = names[0]
    if mode == 'dup': parts[1][a] = t[a]
    if mode == 'unlisted': parts[0]['extra.weight'] = t[a]
    if mode == 'misplaced': wm[a] = shard[1]
    if mode == 'missing': del parts[0][a]
    if mode == 'outside': wm[a] = '../model.safetensors'
    for i in range(2): write(out + '/' + shard[i], parts[i], m)
    json.dump({'metadata': {'total_size': 0}, 'weight_map': wm},
              open(out + '/model.safetensors.index.json', 'w'))
)";

struct Case {
  const char* name;
  const char* setup;      // sh, run in the case directory first (must succeed)
  const char* command;    // sh, run next; its exit status is the case's
  int code;               // expected exit status
  const char* message;    // stderr's last line holds it ("": no error line at all)
  const char* unchanged;  // space-separated paths whose contents must not change
  const char* check;      // sh test that must succeed afterwards ("" for none)
};

#define RESUME "R train tiny.yaml --resume"
#define OVERWRITE "R train tiny.yaml --overwrite"
// What a refused resume must leave alone: everything of the run.
#define RUN_FILES "run/checkpoints run/data run/spm.model run/metrics.jsonl run/config.yaml"
#define MLM_INIT(dir) "R train mlm.yaml --set output_dir=r2 --set model.init_from=" dir

// clang-format off
const Case kCases[] = {
  // ---- class 2: --resume refuses what no longer matches, naming it ----
  {"resume_unchanged_continues", "", RESUME " --set train.max_updates=3", 0, "",
   "run/data run/spm.model", "test -d run/checkpoints/step_3"},
  {"resume_train_text_changed", "echo 'one' >> data/train.en && echo 'eins' >> data/train.de",
   RESUME, 1, "run/spm.model does not match the config and data now (data.train.en "
   "data/train.en changed (", RUN_FILES " data", ""},
  {"resume_train_text_edited_same_size", "sed -i '1s/./X/' data/train.en", RESUME, 1,
   "data.train.en data/train.en changed (same size, other content)", RUN_FILES " data", ""},
  {"resume_vocab_size_changed", "", RESUME " --set data.vocab_size=100", 1,
   "data.vocab_size was 120, is 100 now", RUN_FILES, ""},
  {"resume_spm_model_type_changed", "", RESUME " --set data.spm_model_type=unigram", 1,
   "data.spm_model_type was bpe, is unigram now", RUN_FILES, ""},
  {"resume_max_len_changed", "", RESUME " --set data.max_len=50", 1,
   "run/data/train does not match the config and data now (data.max_len was 256, is 50 now)",
   RUN_FILES, ""},
  {"resume_direction_swapped", "", RESUME " --set data.src_lang=de --set data.tgt_lang=en", 1,
   "data.src_lang was en, is de now", RUN_FILES, ""},
  {"resume_valid_text_changed", "echo 'two' >> data/valid.en && echo 'zwei' >> data/valid.de",
   RESUME, 1, "run/data/valid does not match the config and data now (data.valid.en",
   RUN_FILES " data", ""},
  {"resume_tokenizer_replaced", "cp small.model run/spm.model", RESUME, 1,
   "the tokenizer run/spm.model differs from run/checkpoints/step_2/spm.model", RUN_FILES, ""},
  {"resume_tokenizer_missing", "rm run/spm.model", RESUME, 1,
   "the tokenizer run/spm.model is missing", RUN_FILES, "! test -e run/spm.model"},
  {"resume_data_without_fingerprint", "rm run/data/train.fingerprint.json", RESUME, 1,
   "run/data/train does not match the config and data now (it has no fingerprint", RUN_FILES,
   "! test -e run/data/train.fingerprint.json"},
  {"resume_tokenizer_without_fingerprint", "rm run/spm.fingerprint.json", RESUME, 1,
   "run/spm.model does not match the config and data now (it has no fingerprint", RUN_FILES, ""},
  {"resume_damaged_fingerprint", "echo '{' > run/data/valid.fingerprint.json", RESUME, 1,
   "its fingerprint is unreadable", RUN_FILES, ""},

  // ---- class 2: --overwrite rebuilds exactly what differs ----
  {"overwrite_same_inputs_reuses", "", OVERWRITE, 0, "",
   "run/spm.model run/spm.fingerprint.json run/data data", ""},
  {"overwrite_vocab_size_retrains", "", OVERWRITE " --set data.vocab_size=100", 0, "", "data",
   "grep -q '\"data.vocab_size\": 100' run/spm.fingerprint.json && "
   "! cmp -s run/spm.model run/previous-*/checkpoints/step_2/spm.model && "
   "grep -q 'training the tokenizer again: data.vocab_size was 120' run/train.log"},
  {"overwrite_text_changed_rebinarizes", "echo 'one' >> data/train.en && echo 'eins' >> "
   "data/train.de", OVERWRITE, 0, "", "data",
   "grep -q \"\\\"bytes\\\": $(wc -c < data/train.en)\" run/data/train.fingerprint.json && "
   "grep -q 'binarizing data.train again' run/train.log"},
  {"overwrite_max_len_rebinarizes_only_data", "", OVERWRITE " --set data.max_len=20", 0, "",
   "run/spm.model run/data/valid.src.bin data",
   "grep -q '\"data.max_len\": 20' run/data/train.fingerprint.json && "
   "grep -q '\"data.max_len\": 0' run/data/valid.fingerprint.json"},
  {"overwrite_rebuilds_data_without_fingerprint", "rm run/data/train.fingerprint.json", OVERWRITE,
   0, "", "run/spm.model data",
   "grep -q 'it has no fingerprint' run/train.log && test -f run/data/train.fingerprint.json"},

  // ---- class 2: a prepared prefix is used with its own tokenizer only ----
  {"prefix_with_other_tokenizer_refused", "",
   "R train tiny.yaml --set output_dir=r2 --set data.train=pre/train "
   "--set data.spm_model=run/spm.model", 1,
   "data.train: pre/train was prepared with the tokenizer small.model (hash ", "pre run r2", ""},
  {"prefix_other_tokenizer_names_both", "", "R train tiny.yaml --set output_dir=r2 "
   "--set data.valid=pre/valid --set data.spm_model=run/spm.model", 1,
   "the run uses run/spm.model (hash ", "pre run r2", ""},
  {"prefix_with_its_tokenizer_trains", "", "R train tiny.yaml --set output_dir=r2 "
   "--set data.train=pre/train --set data.valid=pre/valid --set data.spm_model=small.model", 0,
   "", "pre small.model", "test -d r2/checkpoints/step_2 && ! test -e r2/data"},
  {"prepare_records_fingerprint", "", "R prepare --spm small.model --src data/valid.en "
   "--output-prefix o", 0, "", "small.model data",
   "grep -q '\"made_by\": \"rotor prepare\"' o.fingerprint.json && "
   "grep -q '\"path\": \"small.model\"' o.fingerprint.json && grep -q '\"--max-len\": 250' "
   "o.fingerprint.json"},

  // ---- class 7: a trainer state that disagrees with its directory ----
  {"resume_state_step_disagrees", "sed -i 's/\"step\": 2,/\"step\": 5,/' "
   "run/checkpoints/step_2/trainer_state.json", RESUME, 1,
   "run/checkpoints/step_2/trainer_state.json says step 5, but its directory is step_2",
   RUN_FILES, ""},

  // ---- class 7: non-finite weights are never written ----
  {"export_nonfinite_refused", "python3 st.py nan mlmrun/checkpoints/step_2/model.safetensors "
   "roformer.encoder.layer.0.output.dense.weight", "R export --checkpoint mlmrun --output out", 1,
   "roformer.encoder.layer.0.output.dense.weight holds a non-finite value (nan at element 0)",
   "mlmrun out", ""},
  {"average_nonfinite_refused", "R average run/checkpoints/step_2 --output avg && "
   "cp -r run/checkpoints/step_2 c1 && python3 st.py nan c1/model.safetensors model.shared.weight",
   "R average run/checkpoints/step_2 c1 --output avg", 1,
   "c1/model.safetensors: model.shared.weight holds a non-finite value", "avg c1 run", ""},
  {"average_nonfinite_new_output", "cp -r run/checkpoints/step_2 c1 && "
   "python3 st.py nan c1/model.safetensors model.shared.weight",
   "R average c1 run/checkpoints/step_2 --output avg2", 1,
   "not averaging it", "c1 run avg2", ""},

  // ---- class 7: a sharded checkpoint is read as its index says ----
  {"shards_as_indexed_load", "python3 st.py shard hf hfs ok", MLM_INIT("hfs"), 0, "", "hfs hf",
   "grep -q 'model.init_from hfs' r2/train.log"},
  {"shard_tensor_in_two_shards", "python3 st.py shard hf hfs dup", MLM_INIT("hfs"), 1,
   "hfs/model-00002-of-00002.safetensors: tensor cls.predictions.bias is also in "
   "hfs/model-00001-of-00002.safetensors", "hfs", ""},
  {"shard_tensor_not_in_map", "python3 st.py shard hf hfs unlisted", MLM_INIT("hfs"), 1,
   "hfs/model-00001-of-00002.safetensors: tensor extra.weight is not in the weight_map of "
   "hfs/model.safetensors.index.json", "hfs", ""},
  {"shard_tensor_misplaced", "python3 st.py shard hf hfs misplaced", MLM_INIT("hfs"), 1,
   "tensor cls.predictions.bias is here, but hfs/model.safetensors.index.json puts it in "
   "model-00002-of-00002.safetensors", "hfs", ""},
  {"shard_tensor_missing", "python3 st.py shard hf hfs missing", MLM_INIT("hfs"), 1,
   "hfs/model-00001-of-00002.safetensors: tensor cls.predictions.bias is missing", "hfs", ""},
  {"shard_outside_directory", "python3 st.py shard hf hfs outside", MLM_INIT("hfs"), 1,
   "names the shard \"../model.safetensors\", which is not a file name in the directory", "hfs",
   ""},
};
// clang-format on

using Outcome = rotor::test::RunResult;

Outcome sh(const std::string& dir, const std::string& script, int timeout_s = 120) {
  return rotor::test::run_script(dir, script, timeout_s);
}

TEST(Fingerprints, TableOfCases) {
  TempDir base;
  const std::string b = base.path();
  std::ofstream(b + "/tiny.yaml") << rotor::test::kWorldTranslationYaml;
  std::ofstream(b + "/mlm.yaml") << rotor::test::kWorldMlmYaml;
  std::ofstream(b + "/st.py") << kSafetensorsTool;
  const Outcome setup = sh(b,
                           "set -e; R synth numbers-en-de --output data --train 200 --valid 20 "
                           "--test 5 --test-long 2 --seed 4; "
                           "paste -d' ' data/train.en data/train.de > mlm.txt; "
                           "R spm-train --input data/train.en --input data/train.de "
                           "--model-prefix small --vocab-size 60; mkdir pre; "
                           "for s in train valid; do R prepare --spm small.model --src data/$s.en "
                           "--tgt data/$s.de --output-prefix pre/$s --max-len-ratio 0; done; "
                           "R train tiny.yaml; R train mlm.yaml; "
                           "R export --checkpoint mlmrun --output hf",
                           600);
  ASSERT_EQ(setup.code, 0) << setup.err;
  int rows = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    ++rows;
    TempDir dir;
    rotor::test::copy_world(b, dir);
    if (*c.setup) {
      const Outcome s = sh(dir.path(), c.setup);
      ASSERT_EQ(s.code, 0) << "setup failed: " << c.setup << "\n" << s.err;
    }
    const auto before = rotor::test::snapshot(dir.path(), c.unchanged);
    const Outcome o = sh(dir.path(), c.command);
    EXPECT_EQ(o.code, c.code) << c.command << "\nstderr: " << o.err;
    if (*c.message) {
      rotor::test::expect_error_line(o.err, c.message);
    } else {
      rotor::test::expect_no_error(o.err);
    }
    const auto after = rotor::test::snapshot(dir.path(), c.unchanged);
    for (const auto& [path, bytes] : before) {
      auto it = after.find(path);
      EXPECT_TRUE(it != after.end() && it->second == bytes) << path << " changed";
    }
    for (const auto& [path, bytes] : after)
      EXPECT_TRUE(before.count(path)) << path << " appeared under an unchanged path";
    if (*c.check) {
      const Outcome k = sh(dir.path(), c.check);
      EXPECT_EQ(k.code, 0) << "check failed: " << c.check << "\nafter: " << o.err;
    }
    for (const auto& e : fs::recursive_directory_iterator(dir.path()))
      EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos)
          << "temporary left behind: " << e.path();
  }
  EXPECT_GE(rows, 20);
}

}  // namespace
