// The executable of every BF16 step: the shared harness linked with one step's bf16_gemm.
// GEMM_STEP_NAME is the step's directory name, set by meson.build; GEMM_NEEDS_SM90A marks the
// Hopper steps, which skip (exit 77) with a message on any other GPU.
#include "cli.h"
#include "gemm.h"
#include "gpu_info.h"
#include "harness.h"
#include "precision.h"

int main(int argc, char** argv) {
#ifdef GEMM_NEEDS_SM90A
  if (gemm::skipped_for_not_sm90a(GEMM_STEP_NAME)) return gemm::kExitSkipped;
#endif
  return gemm::run_harness<gemm::Bf16>(GEMM_STEP_NAME, argc, argv, gemm::bf16_gemm);
}
