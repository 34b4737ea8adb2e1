// The kinds a layer is configured with. The spellings of attention.impl live
// with the rest of the user contract in config/config.h; those of
// model.position are the names of the registered position encodings
// (nn/position.h), and an attention kind's name is its own (nn/attention_kind.h).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string_view>

namespace rotor::nn {

struct PositionScheme;       // nn/position.h
struct AttentionKindScheme;  // nn/attention_kind.h

// How a model knows token positions: one of the registered encodings
// (nn/position.h; nn/positions/registry.cpp lists them). A handle to its
// scheme, which callers ask for its traits instead of naming an encoding.
class PositionKind {
 public:
  explicit constexpr PositionKind(const PositionScheme* scheme) : scheme_(scheme) {}
  // The built-in encodings by name, for defaults and tests; a new encoding
  // needs no name here (position_kind("alibi") finds it).
  static const PositionKind Sinusoidal, Learned, Rope, None;

  const PositionScheme& operator*() const { return *scheme_; }
  const PositionScheme* operator->() const { return scheme_; }
  std::string_view name() const;  // its model.position spelling
  friend constexpr bool operator==(PositionKind a, PositionKind b) {
    return a.scheme_ == b.scheme_;
  }

 private:
  const PositionScheme* scheme_;
};

// The registered position encodings, in the order model.position's error
// lists them.
std::span<const PositionKind> position_kinds();
// The registered encoding spelled `name`, or nullopt.
std::optional<PositionKind> position_kind(std::string_view name);

// What an attention computes from q, k and v: one of the registered kinds
// (nn/attention_kind.h; nn/attention_kinds/registry.cpp lists them), each
// with its plan rule and its core.
class AttentionKind {
 public:
  explicit constexpr AttentionKind(const AttentionKindScheme* scheme) : scheme_(scheme) {}
  // softmax(q k^T) v, the default kind.
  static const AttentionKind Softmax;

  const AttentionKindScheme& operator*() const { return *scheme_; }
  const AttentionKindScheme* operator->() const { return scheme_; }
  std::string_view name() const;
  friend constexpr bool operator==(AttentionKind a, AttentionKind b) {
    return a.scheme_ == b.scheme_;
  }
  // Any fixed order, for the plan memo's keys.
  friend bool operator<(AttentionKind a, AttentionKind b) {
    return std::less<const AttentionKindScheme*>()(a.scheme_, b.scheme_);
  }

 private:
  const AttentionKindScheme* scheme_;
};

// The registered attention kinds, and one by name.
std::span<const AttentionKind> attention_kinds();
std::optional<AttentionKind> attention_kind(std::string_view name);

// Which attention core a layer runs.
//   Reference: ops::attention_forward/backward, saves the [Tq, Tk] probabilities.
//   Rotor:     ops::flash_attention_forward/backward, saves out and the lse.
//   Cudnn:     ops::cudnn_attention_forward/backward (cuDNN's fused SDPA), saves out and the lse.
//   Auto:      per device and case (nn/attention_plan.h, plan_attention).
enum class AttentionImpl { Auto, Rotor, Cudnn, Reference };

}  // namespace rotor::nn
