// The tokenizer files of `rotor export --format hf`, shared by the encoder
// (checkpoint/export_hf.h) and causal-LM (checkpoint/hf_lm.h) exports:
//
//   tokenizer.json           the run's tokenizer in the format of Hugging Face's
//                            `tokenizers` library, which transformers 4.x and 5.x
//                            both load through AutoTokenizer.from_pretrained(DIR)
//                            (tokenizer_class PreTrainedTokenizerFast: no
//                            conversion on load, so that every version encodes
//                            with the same pipeline);
//   tokenizer_config.json    the special tokens, the model's inputs, the length;
//   special_tokens_map.json
//   spiece.model             the SentencePiece model itself (what model.init_from
//                            reads back; absent for a byte tokenizer).
//
// A SentencePiece model becomes the pipeline SentencePiece runs itself: the
// model's precompiled normalization (nmt_nfkc, ...), extra spaces removed (at
// both ends, runs of spaces to one), spaces escaped to U+2581, the dummy
// prefix, then the Unigram model with the pieces' scores, or BPE with merges
// ranked by the merged piece's score (SentencePiece merges the pair whose
// union scores highest; ties go to the lower id, then the shorter left part),
// unknown characters fused into one <unk>, byte fallback where the model has
// it. User-defined pieces ([MASK] [CLS] [SEP] of a masked LM) are matched
// after normalization and never merged, as SentencePiece does. A byte
// tokenizer (data.tokenizer bytes) becomes byte-level: each UTF-8 byte is its
// id 4 + user-defined symbols + byte, the symbols matched first, longest
// first.
//
// What AutoTokenizer gives by default (add_special_tokens=True) is what rotor
// feeds its model: [CLS] a [SEP] (b [SEP]) with token types 0 | 1 for the
// masked LM and the classifier, the document boundary then the text for the
// causal LM (</s>, or the line break of a byte LM: `rotor generate`'s
// prompts); add_special_tokens=False gives the pieces alone. The ids equal
// rotor's on any text but two cases, both Hugging Face conventions: a text
// holding <s>, </s>, <unk> or <pad> literally (Hugging Face reads each as its
// special token, SentencePiece and rotor as characters), and a text that is
// nothing but one user-defined piece such as "[MASK]" (SentencePiece puts
// the dummy prefix "▁" before it; Hugging Face cannot tell that text from the
// piece itself). tests/scripts/hf_transformers_check.py checks both versions.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "checkpoint/export_hf.h"

namespace rotor::checkpoint {

// tokenizer.json for the tokenizer file `path` (a checkpoint's spm.model:
// a SentencePiece model or a byte tokenizer). rotor::Error naming the file
// when it cannot be read or has no Hugging Face form (with the reason).
nlohmann::ordered_json hf_tokenizer_json(const std::string& path, HfTokenizerTemplate t);

// Writes the files above into OUTPUT_DIR from the checkpoint's tokenizer
// file `path` (a missing file: no tokenizer files, a note), appending to
// r.files and r.notes.
void write_hf_tokenizer(const std::string& path, const std::string& output_dir,
                        HfTokenizerTemplate t, int64_t max_positions, HfExportResult& r);

}  // namespace rotor::checkpoint
