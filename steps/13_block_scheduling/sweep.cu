// The sweep of step 13: the step's tile with different launch plans (the number of K slices,
// the group size of the tile order), and the plan the step's wave model picks, each checked
// against the float64 reference and timed against cuBLAS. Meson builds it as
// build/sweep_13_block_scheduling:
//   build/sweep_13_block_scheduling [SIZE ...]
// (default: the progression's 4096, 8192, 4097, 1000x3000x2000, and 256x256x65536 and
// 1024x1024x16384, whose few tiles need split-K)
// README.md reads a run of it: where the model's pick lands among the fixed plans.
#include "block_scheduling.h"
#include "gemm.h"
#include "precision.h"
#include "sweep.h"

namespace {

gemm::SweepCandidate<gemm::Fp32> plan(int splits, int group_m) {
  std::string const name = "split " + std::to_string(splits) + ", group " +
                           std::to_string(group_m) +
                           (group_m == 1 ? " (row-major order, as step 12)" : "");
  return {name, [=](int m, int n, int k, float alpha, float const* A, int lda, float const* B,
                    int ldb, float beta, float* C, int ldc, cudaStream_t stream) {
            scheduling::launch_with_plan({splits, group_m}, m, n, k, alpha, A, lda, B, ldb, beta, C,
                                         ldc, stream);
          }};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<gemm::SweepCandidate<gemm::Fp32>> candidates = {
      {"the step: the wave model's plan, group 8", gemm::sgemm}};
  for (int group_m : {1, 4, 8, 16})
    candidates.push_back(plan(1, group_m));
  for (int splits : {2, 3, 4, 6, 16, 64})
    candidates.push_back(plan(splits, 8));
  // The four shapes of the progression table, and two whose few tiles leave most SMs idle
  // unless K is split.
  return gemm::run_sweep<gemm::Fp32>("step 13 launch-plan sweep", argc, argv, candidates,
                                     {{4096, 4096, 4096},
                                      {8192, 8192, 8192},
                                      {4097, 4097, 4097},
                                      {1000, 3000, 2000},
                                      {256, 256, 65536},
                                      {1024, 1024, 16384}});
}
