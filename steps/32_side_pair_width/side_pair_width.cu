// Step 32: how wide a side-by-side pair's tiles are. Step 27 lets a cluster pair sit side by side
// (sharing A) so that a matrix one tile tall keeps every SM busy, and offers such pairs tiles of
// two consumers (128 columns) or three (192 columns). Step 26's model, rounds times the padded
// tile area, ranks plans by how well they fill the rounds; at 128 x 8192 x 8192 it prefers 128 x
// 192 tiles in 3 slices to 128 x 128 tiles in 2 slices by 1.5% (14,187 against 14,400).
//
// At such shapes the work is a stream: B is read once from memory (134 MB at N = K = 8192), and
// the time is its bytes over the rate at which the blocks pull them in. Both plans read the same
// bytes, the model sees neither the bytes nor the rate, and the measured rate decides: the
// two-consumer tiles stream B faster (see the README). So side-by-side pairs take two-consumer
// tiles only. The plan changes only where step 27 chose a three-consumer pair side by side.
//
// Everything else is step 27's, from common/pair_orientation.cuh: the pairs, the kernel, the
// split of the last round, the model (choose_tile) and the launch (gemm_with_tile).
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
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
    // Side by side, two consumers only: such a pair streams B, and the two-consumer tile streams
    // it faster than the three-consumer one (step 27 offered both; the model ranks them by how
    // they fill the rounds, not by how fast they read).
    {128, 2, Pairing::kSideBySide},
    {112, 2, Pairing::kSideBySide},
    {96, 2, Pairing::kSideBySide},
    {64, 2, Pairing::kSideBySide},
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
