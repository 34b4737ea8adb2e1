// The op API: every function dispatches on its tensors' device to the CPU
// implementation (src/ops/*.cpp) or the CUDA launcher (kernels/*.cu).
// Conventions: outputs are preallocated by the caller; input gradients are
// written, parameter gradients are accumulated (+=).
#pragma once

#include "ops/adamw.h"
#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/heads.h"
#include "ops/layer_norm.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
