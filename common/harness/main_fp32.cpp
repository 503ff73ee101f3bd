// The executable of every FP32 step: the shared harness linked with one step's sgemm.
// GEMM_STEP_NAME is the step's directory name, set by meson.build.
#include "gemm.h"
#include "harness.h"
#include "precision.h"

int main(int argc, char** argv) {
  return gemm::run_harness<gemm::Fp32>(GEMM_STEP_NAME, argc, argv, gemm::sgemm);
}
