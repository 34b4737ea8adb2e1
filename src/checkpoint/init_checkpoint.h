// `model.init_from` naming a rotor checkpoint instead of a Hugging Face
// directory: a run directory (its checkpoint_last), RUN:best or a checkpoint
// directory (checkpoint/checkpoint.h, resolve_checkpoint). This is how a task
// with a BERT/RoFormer encoder (mlm, classification, multilabel) fine-tunes
// from a rotor run whose weights have no Hugging Face form -- an EHR encoder
// with its age embedding and visit positions -- or from any rotor masked LM
// without the round trip through `rotor export`.
//
// Before any weight is read, the checkpoint's config.yaml must agree with the
// run's on what shapes do not show: a BERT/RoFormer task, model.position,
// model.position_source, model.rope_base, model.activation, model.norm and
// data.format; with data.format ehr, the checkpoint's vocab.txt must equal
// the run's DIR/vocab.txt token for token (two prepare-ehr outputs may number
// the codes differently). Text runs read the checkpoint's spm.model as their
// tokenizer (tasks/data.h, tokenizer_path).
//
// Every encoder parameter (`bert.` / `roformer.` but the pooler) must be in
// model.safetensors with its shape; head parameters (the MLM head, the pooler,
// the classifier) are loaded when present with the same shape and keep their
// fresh initialization otherwise (a masked LM's checkpoint starts a
// classifier); a classifier's label rows are read by label name
// (checkpoint/label_rows.h: `labels`, the task's, against the checkpoint's
// labels.txt or data.labels). Values must be finite.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/import_hf.h"
#include "config/config.h"
#include "nn/parameters.h"

namespace rotor::checkpoint {

// Whether PATH names a rotor checkpoint (as above) rather than a Hugging Face
// directory (which holds config.json).
bool is_rotor_checkpoint(const std::string& path);

// Loads the checkpoint PATH into `store` (allocated, registered by the model
// of `config`). Throws rotor::Error naming the file and the key or tensor for
// any mismatch. model_type in the result is "rotor".
HfImportResult import_rotor_checkpoint(const std::string& path, const Config& config,
                                       nn::ParameterStore& store,
                                       const std::vector<std::string>& labels = {});

}  // namespace rotor::checkpoint
