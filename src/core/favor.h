// The random projection of FAVOR+ (Performer: Choromanski et al., "Rethinking
// Attention with Performers", ICLR 2021), the feature map of linear attention
// that approximates the softmax kernel (ops/linear_attention.h). M rows
// w_j in R^D are drawn in orthogonal blocks of D rows: each block is a D x D
// Gaussian matrix orthonormalized by Gram-Schmidt (in double), and each row
// is then rescaled by the norm of an independent Gaussian D-vector (a chi
// variable with D degrees of freedom), so that every row has the length
// distribution of a Gaussian row while the rows of a block stay orthogonal.
// The last block keeps its first M mod D rows.
//
// A draw is a pure function of (seed, draw, layer): the numbers come from the
// Philox stream rng_stream(draw, layer, FavorProjection, rank 0), so every
// rank, a resumed run and a redraw at the same index get the same matrix; the
// caller decides when to redraw (a new draw index) and keeps it out of the
// parameters (the projection is never trained).
#pragma once

#include <cstdint>
#include <vector>

namespace rotor::favor {

// Row-major [features, dim] (features >= 1, dim >= 1, draw < 2^32).
std::vector<float> projection(uint64_t seed, uint64_t draw, uint32_t layer, int64_t features,
                              int64_t dim);

}  // namespace rotor::favor
