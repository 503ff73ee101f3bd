// Exercise: step 32, how wide a side-by-side pair's tiles are. One TODO block: the side-by-side
// entries of kShapes, the tiles the plan may give a pair that shares A. The placeholder is step
// 27's list (two- and three-consumer tiles), so the skeleton computes the right C at every shape
// and passes the GPU suite as given: a plan decides speed, never correctness. What the TODO
// changes is measured, not tested: run build/exercise_32_side_pair_width and
// build/32_side_pair_width at 128x8192x8192, 64x8192x8192 and 128x4096x14336 and compare the
// times (docs/teaching.md, "Exercise mode"; the README's exercise 1 says what to predict first).
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>

#include "cuda_check.h"
#include "gemm.h"
#include "launch.h"
#include "pair_orientation.cuh"

namespace {

using namespace gemm::hopper::pairs;

// Step 26's tiles, stacked, then side by side: tiles of at most 128 rows, down to 64, for
// matrices of one or two tile rows. Stacked comes first: of two plans that cost the same, the
// model keeps the first.
constexpr TileShape kShapes[] = {
    {256, 2, Pairing::kStacked},
    {240, 2, Pairing::kStacked},
    {224, 2, Pairing::kStacked},
    {208, 2, Pairing::kStacked},
    {192, 2, Pairing::kStacked},
    {176, 2, Pairing::kStacked},
    {160, 2, Pairing::kStacked},
    {144, 2, Pairing::kStacked},
    {128, 2, Pairing::kStacked},
    {192, 3, Pairing::kStacked},
    {176, 3, Pairing::kStacked},
    {160, 3, Pairing::kStacked},
    {144, 3, Pairing::kStacked},
    {128, 3, Pairing::kStacked},
    // TODO(student): the side-by-side tiles (at most 128 rows, down to 64: wgmma's N) and how many
    // consumers each may have. Which of step 27's eight does a pair that streams B want?
    {128, 2, Pairing::kSideBySide},
    {128, 3, Pairing::kSideBySide},
    {112, 2, Pairing::kSideBySide},
    {112, 3, Pairing::kSideBySide},
    {96, 2, Pairing::kSideBySide},
    {96, 3, Pairing::kSideBySide},
    {64, 2, Pairing::kSideBySide},
    {64, 3, Pairing::kSideBySide},
    // END TODO
};

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, __nv_bfloat16 const* A, int lda,
                     __nv_bfloat16 const* B, int ldb, float beta, __nv_bfloat16* C, int ldc,
                     cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  if (static_cast<long long>(ceil_div(m, 64)) * ceil_div(n, 128) > 0x3fffffffLL) {
    throw std::invalid_argument("bf16_gemm: too many tiles");
  }
  int const sms = multiprocessor_count();
  // The model assumes every SM pair can hold a cluster (66 on the H100); the launch then builds
  // the schedule from the occupancy query of the kernel it picked, which may find fewer.
  TileShape const shape = choose_tile(kShapes, m, n, k, std::max(1, sms / kClusterSize));
  gemm_with_tile<kShapes>(shape, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
  check_launch("bf16_gemm");
}
