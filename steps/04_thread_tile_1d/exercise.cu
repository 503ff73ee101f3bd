// Exercise for step 04: more work per thread, in one dimension. Read README.md first.
//
// Each thread now owns a column of kTM = 8 elements of C. Fill in the two TODO(student)
// blocks: the compute loop that reuses one value of B for 8 FMAs, and the epilogue that writes
// the thread's 8 results. Then build and check your kernel:
//   meson setup build -Dexercises=true   (or: meson configure build -Dexercises=true)
//   meson test -C build exercise_04_thread_tile_1d --print-errorlogs   the shared GPU suite
//   build/exercise_04_thread_tile_1d 4096                                time it against cuBLAS
// The suite fails until both blocks are right. The solution is thread_tile_1d.cu, beside this
// file.

#include "device_helpers.cuh"
#include "gemm.h"

namespace {

constexpr int kBM = 64;                    // block tile rows
constexpr int kBN = 64;                    // block tile columns
constexpr int kBK = 8;                     // k tile depth
constexpr int kTM = 8;                     // rows of C per thread
constexpr int kThreads = kBM * kBN / kTM;  // 512
static_assert(kBM * kBK == kThreads && kBK * kBN == kThreads,
              "each thread copies exactly one element of each tile");

__global__ void __launch_bounds__(kThreads)
    thread_tile_1d_sgemm_kernel(int m, int n, int k, float alpha, float const* A, int lda,
                                float const* B, int ldb, float beta, float* C, int ldc) {
  __shared__ float a_tile[kBM][kBK];  // (row, p)
  __shared__ float b_tile[kBK][kBN];  // (p, column)

  int const block_row = blockIdx.y * kBM;
  int const block_col = blockIdx.x * kBN;
  int const tid = threadIdx.x;

  // The element of each tile this thread copies. A warp reads 4 rows x 8 consecutive floats
  // of A (4 full 32-byte sectors) and 32 consecutive floats of one row of B.
  int const a_r = tid / kBK, a_c = tid % kBK;
  int const b_r = tid / kBN, b_c = tid % kBN;

  // The column of kTM results this thread owns: rows thread_row * 8 .. + 7, one column.
  // Consecutive threads take consecutive columns, so the 32 threads of a warp share
  // thread_row and read the same a_tile values (broadcasts).
  int const thread_row = tid / kBN;
  int const thread_col = tid % kBN;

  float acc[kTM] = {};
  for (int k0 = 0; k0 < k; k0 += kBK) {
    int const a_row = block_row + a_r, a_col = k0 + a_c;
    int const b_row = k0 + b_r, b_col = block_col + b_c;
    a_tile[a_r][a_c] =
        (a_row < m && a_col < k) ? A[static_cast<size_t>(a_row) * lda + a_col] : 0.0f;
    b_tile[b_r][b_c] =
        (b_row < k && b_col < n) ? B[static_cast<size_t>(b_row) * ldb + b_col] : 0.0f;
    __syncthreads();

    // TODO(student): add this k tile's contribution to the thread's 8 accumulators:
    //   acc[i] += A(thread_row * kTM + i, p) * B(p, thread_col)  for p < kBK, i < kTM,
    // reading A from a_tile[row][p] and B from b_tile[p][column] (tile coordinates). This is
    // the point of the step: for each p, load the B value from shared memory ONCE into a
    // register (float const b = ...) before an inner loop over i, so 8 FMAs share it; reading
    // b_tile inside the i loop is correct but throws the gain away. Unroll both loops
    // (#pragma unroll): acc must stay in registers, which needs constant indices.
    (void)a_tile[thread_row][0];
    (void)b_tile[0][thread_col];
    // END TODO
    __syncthreads();
  }

  int const col = block_col + thread_col;
  if (col >= n) return;
  // TODO(student): write the thread's kTM results to C with gemm::store_scaled (it applies
  // alpha and beta): acc[i] belongs to row block_row + thread_row * kTM + i, column col. The
  // column was checked above, but each row must be checked against m on its own: in the last
  // block row of C, a thread's 8 rows can straddle the bottom edge, so some are stored and the
  // rest are not (nothing outside the m x n block of C may be written). Offsets in size_t.
  (void)acc[0];
  // END TODO
}

}  // namespace

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 04_thread_tile_1d)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const grid = make_grid(ceil_div(n, kBN), ceil_div(m, kBM), routine);
  thread_tile_1d_sgemm_kernel<<<grid, kThreads, 0, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta,
                                                             C, ldc);
  check_launch(routine);
}
