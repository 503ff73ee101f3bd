// The launcher of step 13 with an explicit launch plan, for the sweep (sweep.cu): the step's
// own entry point, gemm::sgemm, picks the plan with its wave model (block_scheduling.cu).
#pragma once

#include <cuda_runtime.h>

namespace scheduling {

// How one call is launched: how many slices K is cut into, and how many tile rows a group of
// the tile order spans (1: plain row-major order, as in steps 01-12).
struct LaunchPlan {
  int splits = 1;
  int group_m = 8;
};

// C = alpha * A * B + beta * C with the step's tile and `plan`; the arguments as in
// gemm::sgemm (common/gemm.h).
void launch_with_plan(LaunchPlan const& plan, int m, int n, int k, float alpha, float const* A,
                      int lda, float const* B, int ldb, float beta, float* C, int ldc,
                      cudaStream_t stream);

}  // namespace scheduling
