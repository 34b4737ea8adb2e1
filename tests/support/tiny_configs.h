// The tiny experiments the end-to-end tests train through the rotor binary
// (a RoFormer translator, masked LM, classifier and causal LM of one layer,
// d_model 32), written once here: each test takes one and states only what
// it changes (docs/testing.md, "Shared support"). A config is an ordered list of
// `key` / `section.key` entries rendered as two-level YAML, so that a test
// can override, add or drop a key and ask on which line a key stands (the
// config errors name it).
#pragma once

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace rotor::test {

class TinyConfig {
 public:
  TinyConfig(std::initializer_list<std::pair<std::string, std::string>> entries)
      : entries_(entries) {}

  // Replaces the value of `path` ("seed", "model.dropout"), or adds the key
  // at the end of its section. Values are YAML text ("[loss, bleu]").
  TinyConfig& set(const std::string& path, const std::string& value) {
    auto it = find(path);
    if (it != entries_.end()) {
      it->second = value;
      return *this;
    }
    // After the last key of the section (a new section goes at the end).
    const std::string sec = section(path);
    auto pos = entries_.end();
    for (auto e = entries_.begin(); e != entries_.end(); ++e)
      if (section(e->first) == sec) pos = e + 1;
    entries_.insert(pos, {path, value});
    return *this;
  }
  TinyConfig& erase(const std::string& path) {
    auto it = find(path);
    if (it != entries_.end()) entries_.erase(it);
    return *this;
  }

  // Top-level keys first, then each section in the order of its first key.
  std::string text() const {
    std::string out;
    for (const auto& [path, value] : entries_)
      if (section(path).empty()) out += path + ": " + value + "\n";
    std::vector<std::string> done;
    for (const auto& e : entries_) {
      const std::string sec = section(e.first);
      if (sec.empty() || std::find(done.begin(), done.end(), sec) != done.end()) continue;
      done.push_back(sec);
      out += sec + ":\n";
      for (const auto& [path, value] : entries_)
        if (section(path) == sec) out += "  " + path.substr(sec.size() + 1) + ": " + value + "\n";
    }
    return out;
  }

  // The 1-based line of `path` in text() (0 when absent).
  int line_of(const std::string& path) const {
    const std::string sec = section(path), key = path.substr(sec.empty() ? 0 : sec.size() + 1);
    const std::string want = (sec.empty() ? "" : "  ") + key + ":";
    bool in_section = sec.empty();
    const std::string t = text();
    int line = 0;
    for (size_t p = 0, next; p < t.size(); p = next + 1) {
      next = t.find('\n', p);
      const std::string l = t.substr(p, next - p);
      ++line;
      if (!sec.empty() && l.back() == ':' && l[0] != ' ') in_section = l == sec + ":";
      if (in_section && l.rfind(want, 0) == 0) return line;
    }
    return 0;
  }

  // Writes text() to `file` and returns the path.
  std::string write(const std::string& file) const {
    std::ofstream(file) << text();
    return file;
  }

 private:
  static std::string section(const std::string& path) {
    const size_t dot = path.find('.');
    return dot == std::string::npos ? std::string() : path.substr(0, dot);
  }
  std::vector<std::pair<std::string, std::string>>::iterator find(const std::string& path) {
    return std::find_if(entries_.begin(), entries_.end(),
                        [&](const auto& e) { return e.first == path; });
  }
  std::vector<std::pair<std::string, std::string>> entries_;
};

// A RoFormer translator of 1 + 1 layers on `synth numbers-en-de` data in
// DATA (DATA/train, DATA/valid), run into RUN: 4 updates, validated and saved
// every 2.
inline TinyConfig tiny_translation(const std::string& data = "data",
                                   const std::string& run = "run") {
  return {{"task", "translation"},
          {"output_dir", run},
          {"seed", "5"},
          {"device", "cpu"},
          {"model.encoder_layers", "1"},
          {"model.decoder_layers", "1"},
          {"model.d_model", "32"},
          {"model.n_heads", "2"},
          {"model.d_ff", "64"},
          {"model.position", "rope"},
          {"model.max_positions", "256"},
          {"data.train", data + "/train"},
          {"data.max_len", "255"},  // + eos fits the table when a test sets learned positions
          {"data.valid", data + "/valid"},
          {"data.vocab_size", "120"},
          {"data.max_tokens", "512"},
          {"data.max_len_ratio", "20"},
          {"train.max_updates", "4"},
          {"train.log_interval", "1"},
          {"train.valid_interval", "2"},
          {"train.save_interval", "2"},
          {"optim.lr", "2.0e-3"},
          {"optim.warmup_updates", "2"}};
}

// The translator of the command-line tests: 2 updates and a checkpoint at 2,
// no validation set.
inline TinyConfig tiny_translation_2_updates(const std::string& data, const std::string& run) {
  return tiny_translation(data, run)
      .erase("data.valid")
      .set("data.max_tokens", "256")
      .set("train.max_updates", "2")
      .erase("train.log_interval")
      .erase("train.valid_interval");
}

// A one-layer RoFormer encoder (GELU, max_positions 64): the model of the
// masked-LM and classification configs.
inline TinyConfig tiny_encoder(const std::string& task, const std::string& run) {
  return {{"task", task},
          {"output_dir", run},
          {"seed", "5"},
          {"device", "cpu"},
          {"model.encoder_layers", "1"},
          {"model.d_model", "32"},
          {"model.n_heads", "2"},
          {"model.d_ff", "64"},
          {"model.activation", "gelu"},
          {"model.position", "rope"},
          {"model.max_positions", "64"}};
}

// A masked LM on the text lines of TRAIN and VALID (write_mlm_text): 3
// updates of 4 sequences of 32 tokens, validated and saved at the end.
inline TinyConfig tiny_mlm(const std::string& train = "mlm.txt",
                           const std::string& valid = "mlm_valid.txt",
                           const std::string& run = "run") {
  return tiny_encoder("mlm", run)
      .set("data.train", train)
      .set("data.valid", valid)
      .set("data.vocab_size", "150")
      .set("data.seq_len", "32")
      .set("train.max_updates", "3")
      .set("train.batch_size", "4")
      .set("train.log_interval", "1")
      .set("train.valid_interval", "3")
      .set("train.save_interval", "3")
      .set("optim.name", "adamw")
      .set("optim.lr", "1.0e-3")
      .set("optim.warmup_updates", "1");
}

// A causal LM (task lm: one pre-LN causal layer, rope, tied output) on the
// text lines of TRAIN and VALID (write_mlm_text): 4 updates of 4 blocks of 16
// tokens, validated and saved every 2.
inline TinyConfig tiny_lm(const std::string& train = "lm.txt",
                          const std::string& valid = "lm_valid.txt",
                          const std::string& run = "run") {
  return {{"task", "lm"},
          {"output_dir", run},
          {"seed", "5"},
          {"device", "cpu"},
          {"model.decoder_layers", "1"},
          {"model.d_model", "32"},
          {"model.n_heads", "2"},
          {"model.d_ff", "64"},
          {"model.dropout", "0.1"},
          {"model.norm", "pre"},
          {"model.position", "rope"},
          {"model.max_positions", "64"},
          {"data.train", train},
          {"data.valid", valid},
          {"data.vocab_size", "150"},
          {"data.seq_len", "16"},
          {"train.max_updates", "4"},
          {"train.batch_size", "4"},
          {"train.log_interval", "1"},
          {"train.valid_interval", "2"},
          {"train.save_interval", "2"},
          {"optim.name", "adamw"},
          {"optim.lr", "1.0e-3"},
          {"optim.warmup_updates", "1"}};
}

// A sentence-pair classifier (columns s1, s2, label; labels no / yes) on the
// TSV files TRAIN and VALID with the SentencePiece model SPM: 3 updates of 8.
inline TinyConfig tiny_classification(const std::string& train = "cls_train.tsv",
                                      const std::string& valid = "cls_valid.tsv",
                                      const std::string& spm = "cls_spm.model",
                                      const std::string& run = "run") {
  return tiny_encoder("classification", run)
      .set("data.train", train)
      .set("data.valid", valid)
      .set("data.spm_model", spm)
      .set("data.sentence1_column", "s1")
      .set("data.sentence2_column", "s2")
      .set("data.label_column", "label")
      .set("data.labels", "[no, yes]")
      .set("data.seq_len", "48")
      .set("train.max_updates", "3")
      .set("train.batch_size", "8")
      .set("train.log_interval", "1")
      .set("train.valid_interval", "3")
      .set("train.save_interval", "3")
      .set("optim.name", "adamw")
      .set("optim.lr", "1.0e-3")
      .set("optim.warmup_updates", "1");
}

// The in-process model of the Hugging Face export and import tests: a
// two-layer encoder of d_model 16 (BERT's layer-norm epsilon), no run keys.
inline TinyConfig tiny_hf_encoder(const std::string& task, const std::string& position) {
  return {{"task", task},
          {"model.encoder_layers", "2"},
          {"model.d_model", "16"},
          {"model.n_heads", "2"},
          {"model.d_ff", "32"},
          {"model.activation", "gelu"},
          {"model.layer_norm_eps", "1.0e-12"},
          {"model.position", position},
          {"model.max_positions", "24"},
          {"data.seq_len", "24"}};
}

}  // namespace rotor::test
