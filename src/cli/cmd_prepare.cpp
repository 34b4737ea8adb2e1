// `rotor prepare`: encode and binarize a parallel or monolingual corpus.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "data/corpus.h"
#include "data/fingerprint.h"
#include "data/prepare.h"

namespace {

// prepare replaces an earlier rotor corpus of the same prefix, never another
// tool's files of those names (PREFIX.bin and PREFIX.idx are also Megatron's
// and fairseq's): a regular PREFIX.idx must carry rotor's magic, a
// PREFIX.bin must have such an index beside it, and a fingerprint must be
// rotor's.
void check_replaces_only_rotor_files(const std::string& prefix,
                                     const std::vector<std::string>& sides) {
  namespace fs = std::filesystem;
  const char* keep = "not replacing it: give another --output-prefix";
  std::error_code ec;
  for (const auto& side : sides) {
    const std::string idx = prefix + side + ".idx", bin = prefix + side + ".bin";
    bool rotor_idx = false;
    if (fs::is_regular_file(idx, ec)) {
      char magic[8] = {};
      std::ifstream f(idx, std::ios::binary);
      f.read(magic, sizeof magic);
      rotor_idx = f.gcount() == 8 && std::memcmp(magic, rotor::data::kIdxMagic, 8) == 0;
      if (!rotor_idx)
        ROTOR_FAIL("prepare: {} exists and is not a rotor corpus index; {}", idx, keep);
    }
    if (fs::is_regular_file(bin, ec) && !rotor_idx)
      ROTOR_FAIL("prepare: {} exists without a rotor corpus index ({}) beside it; {}", bin, idx,
                 keep);
  }
  const std::string fp = rotor::data::fingerprint_path(prefix);
  if (fs::is_regular_file(fp, ec) && !rotor::data::Fingerprint::readable(fp))
    ROTOR_FAIL("prepare: {} exists and is not a rotor fingerprint; {}", fp, keep);
}

// Paths and ranges, before any work; prepare_corpus checks the text itself
// (line counts, UTF-8) as it reads it.
void check_args(const rotor::data::PrepareOptions& o) {
  using namespace rotor::cli;
  const char* cmd = "prepare";
  check_input_file(cmd, "--src", o.src);
  if (!o.tgt.empty()) check_input_file(cmd, "--tgt", o.tgt);
  check_input_file(cmd, "--spm", o.spm_model);
  check_nonempty(cmd, "--output-prefix", o.output_prefix);
  const std::vector<std::string> inputs = {o.spm_model, o.src, o.tgt};
  const std::vector<std::string> outputs =
      o.tgt.empty() ? std::vector<std::string>{".bin", ".idx"}
                    : std::vector<std::string>{".src.bin", ".src.idx", ".tgt.bin", ".tgt.idx"};
  for (const auto& ext : outputs)
    check_output_file(cmd, "--output-prefix", o.output_prefix + ext, inputs);
  check_output_file(cmd, "--output-prefix", rotor::data::fingerprint_path(o.output_prefix), inputs);
  check_replaces_only_rotor_files(o.output_prefix, o.tgt.empty()
                                                       ? std::vector<std::string>{""}
                                                       : std::vector<std::string>{".src", ".tgt"});
  check_int(cmd, "--max-len", o.max_len, 0, 1'000'000'000);
  check_int(cmd, "--min-len", o.min_len, 0, 1'000'000'000);
  if (o.max_len > 0 && o.min_len > o.max_len)
    ROTOR_FAIL("{}: --min-len {} exceeds --max-len {}", cmd, o.min_len, o.max_len);
  check_real(cmd, "--max-len-ratio", o.max_len_ratio, 0, 1e6);
  check_int(cmd, "--threads", o.num_threads, 0, 1024);
}

int run_prepare(const rotor::data::PrepareOptions& o) {
  check_args(o);
  // What made the corpus (data/fingerprint.h): training refuses it with
  // another tokenizer. The old fingerprint goes once the new corpus is
  // written whole, before it replaces the old one: while the files change,
  // nothing vouches for them; a run that fails earlier leaves both as they were.
  rotor::data::Fingerprint f("rotor prepare");
  f.setting("--max-len", o.max_len)
      .setting("--min-len", o.min_len)
      .setting("--max-len-ratio", o.max_len_ratio)
      .setting("--append-eos", o.append_eos);
  if (o.keep_line_ends) f.setting("--keep-line-ends", true);  // absent: as before the option
  f.file("tokenizer", o.spm_model).file("--src", o.src);
  if (!o.tgt.empty()) f.file("--tgt", o.tgt);
  const std::string fp = rotor::data::fingerprint_path(o.output_prefix);
  rotor::data::PrepareOptions run = o;
  run.before_commit = [&] {
    std::error_code ec;
    std::filesystem::remove(fp, ec);
    if (ec) ROTOR_FAIL("prepare: cannot remove {}: {}", fp, ec.message());
  };
  auto st = rotor::data::prepare_corpus(run);
  f.save(fp);
  std::printf("%s\n", st.summary().c_str());
  if (o.tgt.empty())
    std::printf("prepare: wrote %s.{bin,idx}\n", o.output_prefix.c_str());
  else
    std::printf("prepare: wrote %s.src.{bin,idx} and %s.tgt.{bin,idx}\n", o.output_prefix.c_str(),
                o.output_prefix.c_str());
  return 0;
}

}  // namespace

ROTOR_COMMAND("prepare", "Encode text with a tokenizer (SentencePiece or bytes) and binarize it",
              21, [](CLI::App& sub) {
                auto o = std::make_shared<rotor::data::PrepareOptions>();
                sub.add_option("--spm", o->spm_model,
                               "Tokenizer: a SentencePiece model or a byte tokenizer file")
                    ->required();
                sub.add_option("--src", o->src, "Source (or monolingual) text")->required();
                auto* tgt = sub.add_option("--tgt", o->tgt, "Target text, line-aligned with --src");
                sub.add_option("--output-prefix", o->output_prefix,
                               "Writes OUT.src/OUT.tgt.{bin,idx}, or OUT.{bin,idx}")
                    ->required();
                sub.add_option("--max-len", o->max_len, "Drop longer sentences (tokens; 0 = off)")
                    ->capture_default_str();
                sub.add_option("--min-len", o->min_len, "Drop shorter sentences (tokens)")
                    ->capture_default_str();
                sub.add_option("--max-len-ratio", o->max_len_ratio,
                               "Drop pairs whose length ratio exceeds this (0 = off)")
                    ->capture_default_str();
                sub.add_option("--threads", o->num_threads, "Encoding threads (0 = all cores)");
                sub.add_flag("--append-eos", o->append_eos, "Store </s> after every sentence");
                sub.add_flag("--keep-line-ends", o->keep_line_ends,
                             "Keep every line's line break (a byte LM's corpus: the file's "
                             "bytes exactly)");
                return [=] {
                  // An empty --tgt is a mistake (a variable that expanded to
                  // nothing), not a request for a monolingual corpus.
                  if (tgt->count() > 0 && o->tgt.empty())
                    ROTOR_FAIL("prepare: --tgt is empty; leave it out for a monolingual corpus");
                  return run_prepare(*o);
                };
              });
