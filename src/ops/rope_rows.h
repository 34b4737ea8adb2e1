// The host side of core/rope.h shared by the CPU ops that rotate (the head
// split, the flash twin, linear attention): the check of the settings against
// a head dimension, the table of factors of a run of positions, and the
// rotation of one row.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/rope.h"

namespace rotor::ops {

// Fails (naming `op`) unless p rotates heads of dimension `head_dim`: base > 0,
// fraction in (0, 1] giving an even R >= 2 (>= 4 for ntk and dynamic_ntk),
// factor >= 1, original_max > 0 for dynamic_ntk and yarn.
void check_rope_params(const rope::Params& p, int64_t head_dim, const char* op);

// cos/sin of positions pos0 .. pos0 + T - 1: [T, R/2] (row t, pair i at
// t * R/2 + i), p resolved at length pos0 + T (rope::at_length) unless the
// caller resolved it already.
std::vector<rope::Rotation> rope_table(const rope::Params& p, int64_t head_dim, int64_t pos0,
                                       int64_t T);

// rope_table's factors, shared: the last 8 distinct (p, head_dim, pos0, T)
// asked for are kept, each up to 1 MiB (a training run asks for the same
// few every step: linear attention for q and k in the forward and again in
// the backward), so that their cos and sin are made once rather than by
// one thread while the others wait. Bigger tables are made each time.
// Thread-safe; the result stays valid while held.
std::shared_ptr<const std::vector<rope::Rotation>> shared_rope_table(const rope::Params& p,
                                                                     int64_t head_dim, int64_t pos0,
                                                                     int64_t T);

// y = row x [head_dim] rotated by the factors r [R/2] of its position (back:
// by the transpose); dimensions past R are copied. x may equal y.
void rope_row(const rope::Params& p, int64_t head_dim, const rope::Rotation* r, const float* x,
              float* y, bool back);

// rope_row over n rows of head_dim floats, row r by the factors
// table[r * R/2, (r + 1) * R/2): the same bits, in vector loops
// (ops/cpu_rows.h). in may equal out.
void rope_rows(const rope::Params& p, int64_t head_dim, const rope::Rotation* table,
               const float* in, float* out, int64_t n, bool back);

}  // namespace rotor::ops
