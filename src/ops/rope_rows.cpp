#include "ops/rope_rows.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "core/error.h"
#include "ops/cpu_rows.h"

namespace rotor::ops {

void check_rope_params(const rope::Params& p, int64_t head_dim, const char* op) {
  if (!(std::isfinite(p.theta) && p.theta > 0.0))
    ROTOR_FAIL("{}: the RoPE base must be finite and > 0, got {}", op, p.theta);
  if (!(p.fraction > 0.0 && p.fraction <= 1.0))
    ROTOR_FAIL("{}: the RoPE fraction must be in (0, 1], got {}", op, p.fraction);
  const int64_t r = rope::rotated_dims(p, head_dim);
  if (r < 2 || r % 2 != 0)
    ROTOR_FAIL("{}: RoPE rotates pairs: {} of a head dim of {} rotates {} dimensions", op,
               p.fraction, head_dim, r);
  if (!(std::isfinite(p.factor) && p.factor >= 1.0))
    ROTOR_FAIL("{}: the RoPE scaling factor must be finite and >= 1, got {}", op, p.factor);
  const bool ntk = p.scaling == rope::Scaling::Ntk || p.scaling == rope::Scaling::DynamicNtk;
  if (ntk && r < 4)
    ROTOR_FAIL("{}: NTK scaling raises the base to R/(R-2) and needs R >= 4 rotated dims, got {}",
               op, r);
  const bool needs_context = p.scaling == rope::Scaling::DynamicNtk ||
                             p.scaling == rope::Scaling::Yarn || p.scaling == rope::Scaling::Llama3;
  if (needs_context && p.original_max_positions <= 0)
    ROTOR_FAIL("{}: this RoPE scaling needs the original context length (> 0), got {}", op,
               p.original_max_positions);
  if (p.scaling == rope::Scaling::Llama3 &&
      !(p.low_freq_factor > 0.0 && p.high_freq_factor > p.low_freq_factor))
    ROTOR_FAIL("{}: llama3 scaling needs 0 < low_freq_factor < high_freq_factor, got {} and {}", op,
               p.low_freq_factor, p.high_freq_factor);
}

std::vector<rope::Rotation> rope_table(const rope::Params& p, int64_t head_dim, int64_t pos0,
                                       int64_t T) {
  const rope::Params at = rope::at_length(p, head_dim, pos0 + T);
  const int64_t r = rope::rotated_dims(at, head_dim), half = r / 2;
  std::vector<rope::Rotation> table(static_cast<size_t>(T * half));
  for (int64_t i = 0; i < half; ++i) {
    const double freq = rope::frequency(at, i, r);
    for (int64_t t = 0; t < T; ++t) table[t * half + i] = rope::rotation_at(at, pos0 + t, freq);
  }
  return table;
}

std::shared_ptr<const std::vector<rope::Rotation>> shared_rope_table(const rope::Params& p,
                                                                     int64_t head_dim, int64_t pos0,
                                                                     int64_t T) {
  using Table = std::shared_ptr<const std::vector<rope::Rotation>>;
  constexpr size_t kEntries = 8;
  constexpr int64_t kMaxBytes = int64_t{1} << 20;
  struct Entry {
    rope::Params p;
    int64_t head_dim, pos0, T;
    Table table;
  };
  static std::mutex mu;
  static std::vector<Entry> kept;  // most recently used first
  {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < kept.size(); ++i) {
      const Entry& e = kept[i];
      if (e.p == p && e.head_dim == head_dim && e.pos0 == pos0 && e.T == T) {
        Table t = e.table;
        std::rotate(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(i),
                    kept.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        return t;
      }
    }
  }
  Table t = std::make_shared<const std::vector<rope::Rotation>>(rope_table(p, head_dim, pos0, T));
  if (static_cast<int64_t>(t->size() * sizeof(rope::Rotation)) > kMaxBytes) return t;
  std::lock_guard<std::mutex> lock(mu);
  kept.insert(kept.begin(), Entry{p, head_dim, pos0, T, t});
  if (kept.size() > kEntries) kept.pop_back();
  return t;
}

void rope_row(const rope::Params& p, int64_t head_dim, const rope::Rotation* r, const float* x,
              float* y, bool back) {
  const int64_t rotated = rope::rotated_dims(p, head_dim);
  for (int64_t j = 0; j < head_dim / 2; ++j) {
    int64_t a, b;
    rope::slot_dims(p.layout, rotated, j, a, b);
    if (2 * j >= rotated) {
      y[a] = x[a];
      y[b] = x[b];
      continue;
    }
    float y0, y1;
    if (back)
      rope::rotate_back(x[a], x[b], r[j], y0, y1);
    else
      rope::rotate(x[a], x[b], r[j], y0, y1);
    y[a] = y0;
    y[b] = y1;
  }
}

void rope_rows(const rope::Params& p, int64_t head_dim, const rope::Rotation* table,
               const float* in, float* out, int64_t n, bool back) {
  static_assert(sizeof(rope::Rotation) == 2 * sizeof(float), "Rotation is (cos, sin)");
  const int64_t half = rope::rotated_dims(p, head_dim) / 2;
  const float* t = reinterpret_cast<const float*>(table);
  if (p.layout == rope::Layout::Half)
    detail::rope_rows_half(t, in, out, n, head_dim, half, back);
  else
    detail::rope_rows_interleaved(t, in, out, n, head_dim, half, back);
}

}  // namespace rotor::ops
