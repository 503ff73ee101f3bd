// Exercise for step 02: coalesced global memory access. Read README.md first.
//
// The kernel is step 01's with its thread-to-element mapping turned around. Fill in the two
// TODO(student) blocks, then build and check your kernel:
//   meson setup build -Dexercises=true   (or: meson configure build -Dexercises=true)
//   meson test -C build exercise_02_coalesced --print-errorlogs   the shared GPU suite
//   build/exercise_02_coalesced 4096                                time it against cuBLAS
// The suite fails until both blocks are right; a correct kernel that still runs at step 01's
// speed has the mapping backwards. The solution is coalesced.cu, beside this file.

#include "device_helpers.cuh"
#include "gemm.h"

namespace {

constexpr int kBlockSide = 32;  // 32 x 32 = 1024 threads, one per element of a 32 x 32 tile of C

__global__ void coalesced_sgemm_kernel(int m, int n, int k, float alpha, float const* A, int lda,
                                       float const* B, int ldb, float beta, float* C, int ldc) {
  // TODO(student): give this thread its element (row, col) of C. This time map the x dimension
  // of the grid and block to COLUMNS of C and y to ROWS: the launcher below sizes the grid as
  // make_grid(ceil_div(n, 32), ceil_div(m, 32)), so blockIdx.x counts 32-column strips. Then the
  // 32 lanes of a warp (consecutive threadIdx.x) own 32 consecutive columns of one row, and
  // their loads of B and stores of C touch 128 contiguous bytes. Swapping only the grid and not
  // the indices (or the other way round) leaves parts of C unwritten.
  int const col = 0;
  int const row = 0;
  // END TODO
  if (row >= m || col >= n) return;

  float const* a_row = A + static_cast<size_t>(row) * lda;
  float acc = 0.0f;
  // TODO(student): accumulate into acc the dot product of row `row` of A and column `col` of B,
  // over p = 0 .. k-1. Element p of the row of A is a_row[p]; element (p, col) of B is at
  // B[p * ldb + col]. Compute that offset in size_t (static_cast<size_t>(p) * ldb): p * ldb in
  // int overflows past 2^31 for large matrices. With the mapping above, a_row[p] is the same
  // address for the whole warp (a broadcast) and the B reads are consecutive floats.
  (void)a_row[0];
  // END TODO
  gemm::store_scaled(&C[static_cast<size_t>(row) * ldc + col], acc, alpha, beta);
}

}  // namespace

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 02_coalesced)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const block(kBlockSide, kBlockSide);
  dim3 const grid = make_grid(ceil_div(n, kBlockSide), ceil_div(m, kBlockSide), routine);
  coalesced_sgemm_kernel<<<grid, block, 0, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  check_launch(routine);
}
