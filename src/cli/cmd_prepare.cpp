// `rotor prepare`: encode and binarize a parallel or monolingual corpus.
#include <cstdio>

#include "cli/command.h"
#include "data/prepare.h"

namespace {

int run_prepare(const rotor::data::PrepareOptions& o) {
  auto st = rotor::data::prepare_corpus(o);
  std::printf("%s\n", st.summary().c_str());
  if (o.tgt.empty())
    std::printf("prepare: wrote %s.{bin,idx}\n", o.output_prefix.c_str());
  else
    std::printf("prepare: wrote %s.src.{bin,idx} and %s.tgt.{bin,idx}\n", o.output_prefix.c_str(),
                o.output_prefix.c_str());
  return 0;
}

}  // namespace

ROTOR_COMMAND("prepare", "Encode text with a SentencePiece model and binarize it", 21,
              [](CLI::App& sub) {
                auto o = std::make_shared<rotor::data::PrepareOptions>();
                sub.add_option("--spm", o->spm_model, "SentencePiece model")->required();
                sub.add_option("--src", o->src, "Source (or monolingual) text")->required();
                sub.add_option("--tgt", o->tgt, "Target text, line-aligned with --src");
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
                return [o] { return run_prepare(*o); };
              });
