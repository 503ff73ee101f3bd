// The executable of the split-operand FP32 steps (28 on): the FP32 harness with the error bound of
// BF16x6 instead of plain FP32's (precision.h). GEMM_STEP_NAME is the step's directory name, set by
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
  return gemm::run_harness<gemm::Fp32Split>(GEMM_STEP_NAME, argc, argv, gemm::sgemm);
}
