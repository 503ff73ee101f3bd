// The executable of every BF16 step: the shared harness linked with one step's bf16_gemm.
// GEMM_STEP_NAME is the step's directory name, set by meson.build.
#include "gemm.h"
#include "harness.h"
#include "precision.h"

int main(int argc, char** argv) {
  return gemm::run_harness<gemm::Bf16>(GEMM_STEP_NAME, argc, argv, gemm::bf16_gemm);
}
