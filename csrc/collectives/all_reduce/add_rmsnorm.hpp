// The all-reduce's residual-add + RMSNorm epilogue (docs/codec-spec.md, "Add + RMSNorm epilogue").
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/numerics.hpp"

namespace qr {

enum class Fp8Out : int { kNone = 0, kPerToken = 1, kPerTensor = 2 };

struct AddRmsNormArgs {
  const void* sum;       // [rows, hidden] T: the all-reduce's output; null: `residual` already holds
                         // r = sum + residual (the two-shot added it): only the norm, residual_out unused
  const void* residual;  // [rows, hidden] T
  const void* weight;    // [hidden] T
  void* out;             // [rows, hidden] T: the normed rows (may be `sum`)
  void* residual_out;    // [rows, hidden] T: sum + residual (may be `residual`)
  uint8_t* fp8;          // [rows, hidden] e4m3 codes of out, or null
  float* fp8_scales;     // kPerToken: [rows] written; kPerTensor: [1] read
  size_t rows, hidden;
  float eps;
  Fp8Out fp8_mode;
  bool pdl;              // launched as a programmatic dependent of the all-reduce before it
};

// One CTA a row; with pdl the launch overlaps the all-reduce's tail and waits for its writes.
cudaError_t launch_add_rmsnorm(const AddRmsNormArgs& args, DType dtype, cudaStream_t stream);

}  // namespace qr
