// `rotor export --checkpoint CKPT --format hf --output DIR`: write a Hugging
// Face BertForMaskedLM / RoFormerForMaskedLM (or sequence classifier)
// directory (checkpoint/export_hf.h), or for task lm a GPTNeoXForCausalLM /
// GPT2LMHeadModel one (checkpoint/hf_lm.h).
#include <cstdio>

#include "checkpoint/checkpoint.h"
#include "checkpoint/export_hf.h"
#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"

namespace {

struct ExportArgs {
  std::string checkpoint, format = "hf", output;
};

}  // namespace

ROTOR_COMMAND("export", "Export a checkpoint to another format (hf: Hugging Face)", 13,
              [](CLI::App& app) {
                auto a = std::make_shared<ExportArgs>();
                app.add_option("--checkpoint", a->checkpoint,
                               "Checkpoint directory, or a run directory (its checkpoint_last)")
                    ->required();
                app.add_option("--format", a->format, "Output format: hf");
                app.add_option("--output", a->output, "Output directory")->required();
                return [a] {
                  using namespace rotor::cli;
                  check_nonempty("export", "--checkpoint", a->checkpoint);
                  if (a->format != "hf")
                    ROTOR_FAIL("export: unknown --format '{}' (available: hf)", a->format);
                  // Writing into (or around) the checkpoint would replace its
                  // model.safetensors with the exported one.
                  const rotor::checkpoint::HeldCheckpoint held(a->checkpoint);
                  check_output_dir("export", "--output", a->output, {held.dir()});
                  rotor::checkpoint::HfExportResult r =
                      rotor::checkpoint::export_hf(held.dir(), a->output);
                  std::printf("export: wrote a Hugging Face %s model to %s:", r.model_type.c_str(),
                              a->output.c_str());
                  for (const auto& f : r.files) std::printf(" %s", f.c_str());
                  std::printf("\n");
                  for (const auto& n : r.notes) std::printf("export: note: %s\n", n.c_str());
                  return 0;
                };
              });
