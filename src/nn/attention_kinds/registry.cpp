// The registered attention kinds (nn/attention_kind.h). A new kind is its
// file in this folder, defining `const AttentionKindScheme kNameAttention`,
// and its entry in the list below (with its declaration beside the others).
#include "nn/attention_kind.h"

namespace rotor::nn {

extern const AttentionKindScheme kSoftmaxAttention, kLinearAttention;

namespace {

constinit const AttentionKind kRegistered[] = {
    AttentionKind(&kSoftmaxAttention),
    AttentionKind(&kLinearAttention),
};

}  // namespace

constinit const AttentionKind AttentionKind::Softmax(&kSoftmaxAttention);

std::string_view AttentionKind::name() const {
  return scheme_->name;
}

std::span<const AttentionKind> attention_kinds() {
  return kRegistered;
}

std::optional<AttentionKind> attention_kind(std::string_view name) {
  for (AttentionKind k : kRegistered)
    if (k->name == name) return k;
  return std::nullopt;
}

}  // namespace rotor::nn
