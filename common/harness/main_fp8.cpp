// The executable of the FP8 steps (29 on): the harness in its third precision, scaled E4M3 in and
// BF16 out against cuBLASLt (precision.h), with the bound of promoted sums where meson.build sets
// GEMM_FP8_PROMOTED (step 30 on). GEMM_STEP_NAME is the step's directory name, set by
// meson.build; these steps run on Hopper's tensor cores (GEMM_NEEDS_SM90A) and skip (exit 77)
// with a message on any other GPU.
#include "cli.h"
#include "gemm.h"
#include "gpu_info.h"
#include "harness.h"
#include "precision.h"

int main(int argc, char** argv) {
#ifdef GEMM_NEEDS_SM90A
  if (gemm::skipped_for_not_sm90a(GEMM_STEP_NAME)) return gemm::kExitSkipped;
#endif
#ifdef GEMM_FP8_PROMOTED
  return gemm::run_harness<gemm::Fp8Promoted>(GEMM_STEP_NAME, argc, argv, gemm::fp8_gemm);
#else
  return gemm::run_harness<gemm::Fp8>(GEMM_STEP_NAME, argc, argv, gemm::fp8_gemm);
#endif
}
