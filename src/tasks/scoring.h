// How the language-model tasks score a whole evaluation set, written once for
// their validation (tasks/lm/task.cpp, tasks/mlm/task.cpp) and `rotor eval`
// (cli/cmd_eval.cpp), so that the command reproduces a run's validation loss.
//
//   lm:  every block of an evaluation LmBlocks set (non-overlapping blocks,
//        the last one shorter) in order, `batch_size` blocks per batch; the
//        loss is the next-token cross-entropy per target, and bits per byte
//        the total negative log-likelihood in bits over the text's UTF-8
//        bytes.
//   mlm: every packed block in order, masked with the fixed validation masks
//        (data/mlm.h: round kFixedMaskingRound, seeded by the run's seed).
//
// `ctx` is the evaluation context (training false, its device; its update
// picks the random attention features a model that has not trained in this
// process uses).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "data/ehr.h"
#include "data/lm.h"
#include "data/mlm.h"
#include "data/sentencepiece.h"
#include "models/bert.h"
#include "models/decoder_lm.h"
#include "nn/context.h"
#include "tasks/task.h"

namespace rotor::tasks {

// A batch's loss sums as the trainer counts them (training and evaluation).
TaskSums to_sums(const models::LmSums& sums, const models::LmBatch& batch);
TaskSums to_sums(const models::MlmSums& sums, const models::MlmBatch& batch);

// The token between the lines of a causal-LM stream: the tokenizer's </s>,
// or none (-1) for bytes, whose stream keeps its line breaks as bytes.
int32_t lm_end_of_text(const data::Tokenizer& tokenizer);

// The bytes bits per byte divide by: for bytes exactly the scored ones (one
// per target), otherwise text_bytes() (the raw text's UTF-8 bytes); at least 1.
int64_t lm_scored_bytes(const data::Tokenizer& tokenizer, const data::LmBlocks& blocks,
                        const std::function<int64_t()>& text_bytes);

// The causal-LM blocks of an evaluation set: keep_partial, so that every
// target of the corpus is scored once.
// `name` is the set in messages ("data.valid notes.txt"; "": its prefix).
// With data.packing documents (lm_packing), packed documents instead: the
// targets of every document, none across documents (data/lm.h).
std::shared_ptr<const data::LmBlocks> lm_eval_blocks(
    std::shared_ptr<const data::MmapCorpus> corpus, int64_t block_size,
    const data::Tokenizer& tokenizer, const std::string& name = "",
    data::LmPacking packing = data::LmPacking::Stream, data::TextDocuments documents = {});
// data.packing as data/lm.h spells it.
data::LmPacking lm_packing(const Config& c);
// data.document_separator as data/lm.h spells it, with `tokenizer`'s blank tokens.
data::TextDocuments text_documents(const Config& c, const data::Tokenizer& tokenizer);

// How score_lm reads a set, for the log and `rotor eval`.
std::string lm_scoring_how(int64_t block_size);

// sums (loss = nll per target summed, tokens = targets, correct), the
// measure "bpb" over `text_bytes` (at least 1) and `how`.
ValidationResult score_lm(models::DecoderLM& model, std::shared_ptr<const data::LmBlocks> blocks,
                          int64_t text_bytes, int64_t batch_size, const nn::Context& ctx);

// The masking of task mlm: data.mask_prob and its companions, the run's seed.
data::MaskingOptions mlm_masking(const Config& config, const data::Tokenizer& tokenizer);

// data.packing as data/mlm.h spells it.
data::MlmPacking mlm_packing(const Config& c);
// What data.packing documents made of a masked-LM set, logged.
void log_mlm_packing(const data::PackedBlocks& blocks, const std::string& name);

// sums (loss over the masked tokens, tokens = masked tokens, correct).
ValidationResult score_mlm(models::BertForMaskedLM& model,
                           std::shared_ptr<const data::PackedBlocks> blocks,
                           const data::MaskingOptions& masking, int64_t batch_size,
                           const nn::Context& ctx);

// The masking of task mlm on EHR data (data.format ehr): data.mask_prob and
// its companions, the run's seed, the directory's vocabulary of vocab_size
// ids with the standard specials (data/ehr.h).
data::MaskingOptions ehr_mlm_masking(const Config& config, int64_t vocab_size);

// An EHR masked LM on the patients of `split` as its validation scores them:
// one patient per row (the newest seq_len tokens; pack: patients packed into
// rows of seq_len, data.packing documents), the fixed validation masks;
// sums (loss over the masked codes, tokens = masked codes, correct).
ValidationResult score_ehr_mlm(models::BertForMaskedLM& model,
                               std::shared_ptr<const data::EhrSplit> split, int64_t seq_len,
                               const data::MaskingOptions& masking, int64_t batch_size,
                               const nn::Context& ctx, bool pack = false);

}  // namespace rotor::tasks
