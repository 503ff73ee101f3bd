// Step 06: 16-byte (float4) loads, and A transposed in shared memory.
//
// Step 05 moves data one float at a time: 4 + 4 global loads and 4 + 4 shared stores per
// thread per k tile, and 16 scalar shared loads per thread per p. Two changes:
//   1. Global -> shared copies use float4: each thread copies one float4 of A and one of B per
//      k tile (256 threads x 4 floats = 128 x 8). Four times fewer load instructions.
//   2. A is stored TRANSPOSED in shared memory (a_tile[p][row]), so the 8 values of A a thread
//      needs for one p are contiguous, like those of B, and the source reads each register
//      fragment with two float4 (LDS.128) loads instead of 8 scalar ones. (The SASS shows
//      that nvcc had already merged step 05's scalar fragment reads into LDS.128: README.md
//      measures what this step really changes.)
// The transpose happens on the way in: a thread loads 4 consecutive k of one row of A as a
// float4 and writes them to 4 different rows of a_tile.
//
// float4 accesses need 16-byte aligned addresses. The fast path requires A, B and C to start
// 16-byte aligned with leading dimensions that are multiples of 4 (then every row does);
// otherwise the same kernel is instantiated with scalar accesses (kVector = false). Partial
// vectors at the right edge and the K tail are read element by element with zeros beyond
// the matrix (load_float4_or_zero in common/device_helpers.cuh).
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
    a_tile[a_c + 0][a_r] = a.x;  // the transpose: 4 k values go to 4 rows of a_tile
    a_tile[a_c + 1][a_r] = a.y;
    a_tile[a_c + 2][a_r] = a.z;
    a_tile[a_c + 3][a_r] = a.w;
    int const b_row = k0 + b_r;
    float4 const b = b_row < k ? gemm::load_float4_or_zero<kVector>(
                                     B + static_cast<size_t>(b_row) * ldb, block_col + b_c, n)
                               : zero;
    *reinterpret_cast<float4*>(&b_tile[b_r][b_c]) = b;
    __syncthreads();

#pragma unroll
    for (int p = 0; p < kBK; ++p) {
#pragma unroll
      for (int i = 0; i < kTM; i += 4) {
        float4 const v = *reinterpret_cast<float4 const*>(&a_tile[p][thread_row * kTM + i]);
        a_reg[i] = v.x, a_reg[i + 1] = v.y, a_reg[i + 2] = v.z, a_reg[i + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < kTN; j += 4) {
        float4 const v = *reinterpret_cast<float4 const*>(&b_tile[p][thread_col * kTN + j]);
        b_reg[j] = v.x, b_reg[j + 1] = v.y, b_reg[j + 2] = v.z, b_reg[j + 3] = v.w;
      }
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
