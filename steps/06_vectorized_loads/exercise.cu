// Exercise for step 06: 16-byte (float4) loads, and A transposed in shared memory. Read
// README.md first.
//
// The global loads are already vectorized (gemm::load_float4_or_zero). Fill in the two
// TODO(student) blocks: the transposing store of A into shared memory, and the float4 reads of
// the register fragments that the transpose makes possible. Then build and check your kernel:
//   meson setup build -Dexercises=true   (or: meson configure build -Dexercises=true)
//   meson test -C build exercise_06_vectorized_loads --print-errorlogs   the shared GPU suite
//   build/exercise_06_vectorized_loads 4096                                time it against cuBLAS
// The suite fails until both blocks are right. The solution is vectorized_loads.cu, beside this
// file.

#include "device_helpers.cuh"
#include "gemm.h"

namespace {

constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 8;
constexpr int kTM = 8;
constexpr int kTN = 8;
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);  // 256
static_assert(kBM * kBK / 4 == kThreads && kBK * kBN / 4 == kThreads,
              "each thread copies one float4 of each tile");

template <bool kVector>
__global__ void __launch_bounds__(kThreads)
    vectorized_sgemm_kernel(int m, int n, int k, float alpha, float const* A, int lda,
                            float const* B, int ldb, float beta, float* C, int ldc) {
  __shared__ float a_tile[kBK][kBM];  // transposed: (p, row)
  __shared__ float b_tile[kBK][kBN];  // (p, column)

  int const block_row = blockIdx.y * kBM;
  int const block_col = blockIdx.x * kBN;
  int const tid = threadIdx.x;

  // Copy pattern: one float4 of A (row a_r, k a_c .. a_c+3), one of B (row b_r, b_c .. +3).
  int const a_r = tid / (kBK / 4), a_c = (tid % (kBK / 4)) * 4;
  int const b_r = tid / (kBN / 4), b_c = (tid % (kBN / 4)) * 4;
  float4 const zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  int const thread_row = tid / (kBN / kTN);
  int const thread_col = tid % (kBN / kTN);

  float acc[kTM][kTN] = {};
  float a_reg[kTM];
  float b_reg[kTN];
  for (int k0 = 0; k0 < k; k0 += kBK) {
    int const a_row = block_row + a_r;
    float4 const a = a_row < m ? gemm::load_float4_or_zero<kVector>(
                                     A + static_cast<size_t>(a_row) * lda, k0 + a_c, k)
                               : zero;
    // TODO(student): store the float4 `a` into a_tile, transposed. `a` holds A(a_row, k0 + a_c)
    // .. A(a_row, k0 + a_c + 3): 4 consecutive k values of ONE row of A (tile row a_r, zeros
    // beyond the matrix). a_tile is laid out (p, row), so those 4 values go to 4 different rows
    // of a_tile, p = a_c .. a_c + 3, all in column a_r. That takes four scalar stores: the 4
    // destinations are kBM floats apart, so one float4 store cannot reach them. Mind the index
    // order: a_tile[p][row], the opposite of step 05's a_tile[row][p].
    (void)a;
    // END TODO
    int const b_row = k0 + b_r;
    float4 const b = b_row < k ? gemm::load_float4_or_zero<kVector>(
                                     B + static_cast<size_t>(b_row) * ldb, block_col + b_c, n)
                               : zero;
    *reinterpret_cast<float4*>(&b_tile[b_r][b_c]) = b;
    __syncthreads();

#pragma unroll
    for (int p = 0; p < kBK; ++p) {
      // TODO(student): fill the register fragments for this p with float4 reads from shared
      // memory, kTM / 4 = 2 for A and kTN / 4 = 2 for B (4 LDS.128 instead of step 05's 16
      // LDS.32):
      //   a_reg[i .. i+3] from a_tile[p][thread_row * kTM + i .. + 3], i = 0, 4: thanks to the
      //     transpose, the thread's 8 values of A for one p are contiguous in a row of a_tile;
      //   b_reg[j .. j+3] from b_tile[p][thread_col * kTN + j .. + 3], j = 0, 4.
      // Read each group as one float4 (reinterpret_cast<float4 const*> of the address of its
      // first float) and copy its x, y, z, w into the fragment. A float4 access must be 16-byte
      // aligned: a tile row is 512 bytes and each column index above is a multiple of 4, so
      // every group starts on a 16-byte boundary (a group starting at any other column would
      // not). Unroll the loops (#pragma unroll) so that a_reg and b_reg stay in registers.
      (void)a_tile[p][0];
      (void)b_tile[p][0];
      (void)a_reg;
      (void)b_reg;
      // END TODO
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
#pragma unroll
        for (int j = 0; j < kTN; ++j)
          acc[i][j] += a_reg[i] * b_reg[j];
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    int const row = block_row + thread_row * kTM + i;
    if (row >= m) break;
    float* const c_row = C + static_cast<size_t>(row) * ldc;
#pragma unroll
    for (int j = 0; j < kTN; j += 4) {
      float4 const v = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
      gemm::store_scaled_float4<kVector>(c_row, block_col + thread_col * kTN + j, n, v, alpha,
                                         beta);
    }
  }
}

}  // namespace

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 06_vectorized_loads)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const grid = make_grid(ceil_div(n, kBN), ceil_div(m, kBM), routine);
  bool const vector = rows_are_16_byte_aligned(A, lda) && rows_are_16_byte_aligned(B, ldb) &&
                      rows_are_16_byte_aligned(C, ldc);
  if (vector) {
    vectorized_sgemm_kernel<true>
        <<<grid, kThreads, 0, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  } else {
    vectorized_sgemm_kernel<false>
        <<<grid, kThreads, 0, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  check_launch(routine);
}
