// Step 10: asynchronous copies (cp.async) and a multi-stage pipeline.
//
// Step 09 prefetches the next k tile through registers: each thread issues its global loads,
// computes, then stores the registers to shared memory. The data takes a detour through the
// register file, the prefetch costs 8 registers, and only one tile is ever in flight.
// cp.async (sm_80 and later, written out below) copies global memory straight into
// shared memory without involving registers, and the issuing thread does not wait for it.
// That makes a deeper pipeline cheap: kStages = 4 shared buffers, up to 3 k tiles in flight
// while the fourth is computed, one barrier per k tile:
//
//   prologue: start tiles 0, 1, 2
//   tile t:   wait for tile t -> barrier -> start tile t + 3 (into t - 1's buffer) -> compute t
//
// The transpose of A needs 4-byte copies (each float of a row of A goes to a different row of
// a_tile); B is copied 16 bytes at a time when its rows are 16-byte aligned, else 4 bytes.
// Out-of-range elements are zero-filled by the copy itself (src size 0), so edge tiles need
// no separate code. The warp tiling is step 09's.
//
// Smaller things that are new here, each for a reason:
//   - The four stages live in DYNAMIC shared memory (extern __shared__, size given at launch),
//     carved into tiles by two small lambdas, a_tile(stage) and b_tile(stage): the stage is a
//     run-time index, and the layout stays in one place. 33 KB, under the 48 KB a block may
//     take without opting in (static_assert in the launcher).
//   - Two independent alignment choices, B's copies (16- or 4-byte) and C's stores: four
//     kernel instantiations, picked by gemm::dispatch_bool (common/device_helpers.cuh), which
//     does step 06's if/else once per flag.
//   - __restrict__ on the matrix pointers: a promise that A, B and C do not overlap, so the
//     compiler may keep values in registers across stores to C.
//   - fmaf(a, b, acc) instead of acc += a * b: the same single FFMA instruction nvcc already
//     emitted for steps 05-09, now spelled out.
#include "device_helpers.cuh"
#include "gemm.h"

namespace {

// --- cp.async, as PTX (later steps include these from common/async_copy.cuh) --------------------
//
// A cp.async is issued like a load, but its data goes straight into shared memory without passing
// through registers, and the issuing thread does not wait for it. Copies are grouped:
// commit_group closes the group of copies issued since the last commit, and wait_group<N> blocks
// until at most N of this thread's groups are still in flight; a __syncthreads() after the wait
// makes every thread's copies visible to the whole block. A source size below the copy size
// zero-fills the rest of the destination (0 copies nothing and writes zeros), which pads edge
// tiles without a branch; the source address must still be valid and aligned.

// The address of a shared-memory pointer in the shared state space, as PTX wants it.
__device__ __forceinline__ unsigned shared_address(void const* pointer) {
  return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// 4 bytes, through L1 (.ca: the only caching mode allowed below 16 bytes).
__device__ __forceinline__ void cp_async_4(float* dst, float const* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(valid ? 4 : 0));
}

// 16 bytes, bypassing L1 (.cg: the data is used once, from shared memory); dst and src 16-byte
// aligned; `src_bytes` of them copied, the rest zero-filled.
__device__ __forceinline__ void cp_async_16(float* dst, float const* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

template <int kGroupsStillInFlight>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kGroupsStillInFlight));
}

// --- the kernel ---------------------------------------------------------------------------------

constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 8;
constexpr int kStages = 4;  // shared buffers: up to 3 tiles in flight
constexpr int kWM = 64;
constexpr int kWN = 32;
constexpr int kWarpsN = kBN / kWN;                    // 4 (and 2 down)
constexpr int kThreads = (kBM / kWM) * kWarpsN * 32;  // 256
constexpr int kLanesM = 8;
constexpr int kLanesN = 32 / kLanesM;        // 4
constexpr int kIterM = kWM / (4 * kLanesM);  // 2
constexpr int kIterN = kWN / (4 * kLanesN);  // 2
constexpr int kTM = 4 * kIterM;              // 8
constexpr int kTN = 4 * kIterN;              // 8
constexpr int kAStride = kBM + 4;            // padded transposed A row: conflict-free copies
constexpr int kStageFloats = kBK * (kAStride + kBN);
constexpr int kSharedBytes = kStages * kStageFloats * static_cast<int>(sizeof(float));  // 33 KB
static_assert(kBM * kBK % kThreads == 0 && kBK * kBN / 4 == kThreads, "copy pattern");

// Starts the copies of one k tile (A transposed into a_tile, B into b_tile).
template <bool kAlignedB>
__device__ __forceinline__ void start_tile_copy(float* a_tile, float* b_tile, float const* A,
                                                int lda, float const* B, int ldb, int m, int n,
                                                int k, int block_row, int block_col, int k0,
                                                int tid) {
  // A: a warp copies 4 rows x 8 consecutive k (one 32-byte sector per row); the padded stride
  // sends the 32 writes to 32 different banks.
#pragma unroll
  for (int i = 0; i < kBM * kBK / kThreads; ++i) {
    int const idx = tid + i * kThreads;
    int const r = idx / kBK;
    int const c = idx % kBK;
    int const row = block_row + r;
    int const col = k0 + c;
    bool const valid = row < m && col < k;
    cp_async_4(&a_tile[c * kAStride + r], valid ? A + static_cast<size_t>(row) * lda + col : A,
               valid);
  }
  if constexpr (kAlignedB) {
    int const r = tid / (kBN / 4);
    int const c = (tid % (kBN / 4)) * 4;
    int const row = k0 + r;
    int const col = block_col + c;
    int const bytes = row < k ? 4 * max(0, min(4, n - col)) : 0;  // partial vector at the edge
    cp_async_16(&b_tile[r * kBN + c], bytes > 0 ? B + static_cast<size_t>(row) * ldb + col : B,
                bytes);
  } else {
#pragma unroll
    for (int i = 0; i < kBK * kBN / kThreads; ++i) {
      int const idx = tid + i * kThreads;
      int const r = idx / kBN;
      int const c = idx % kBN;
      int const row = k0 + r;
      int const col = block_col + c;
      bool const valid = row < k && col < n;
      cp_async_4(&b_tile[r * kBN + c], valid ? B + static_cast<size_t>(row) * ldb + col : B, valid);
    }
  }
}

// Two blocks per SM (registers capped at 128 per thread), as in step 09.
template <bool kAlignedB, bool kAlignedC>
__global__ void __launch_bounds__(kThreads, 2)
    async_copy_sgemm_kernel(int m, int n, int k, float alpha, float const* __restrict__ A, int lda,
                            float const* __restrict__ B, int ldb, float beta, float* __restrict__ C,
                            int ldc) {
  extern __shared__ float4 shared_storage[];  // float4: 16-byte alignment for cp.async
  float* const shared = reinterpret_cast<float*>(shared_storage);
  auto a_tile = [&](int stage) { return shared + stage * kStageFloats; };
  auto b_tile = [&](int stage) { return shared + stage * kStageFloats + kBK * kAStride; };

  int const block_row = blockIdx.y * kBM;
  int const block_col = blockIdx.x * kBN;
  int const tid = threadIdx.x;
  int const warp = tid / 32;
  int const lane = tid % 32;
  int const warp_row = (warp / kWarpsN) * kWM;
  int const warp_col = (warp % kWarpsN) * kWN;
  int const lane_row = (lane / kLanesN) * 4;
  int const lane_col = (lane % kLanesN) * 4;
  int const k_tiles = gemm::ceil_div(k, kBK);

  auto start_copy = [&](int tile) {
    int const stage = tile % kStages;
    start_tile_copy<kAlignedB>(a_tile(stage), b_tile(stage), A, lda, B, ldb, m, n, k, block_row,
                               block_col, tile * kBK, tid);
  };

  // Prologue. Every step commits exactly one group, empty or not, so that
  // "wait until at most kStages - 2 groups are pending" always means "tile t has landed".
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) start_copy(s);
    cp_async_commit();
  }

  float acc[kTM][kTN] = {};
  float a_reg[kTM];
  float b_reg[kTN];
  for (int t = 0; t < k_tiles; ++t) {
    cp_async_wait<kStages - 2>();  // this thread's copies of tile t are done
    __syncthreads();               // everyone's are; and everyone finished tile t - 1
    if (t + kStages - 1 < k_tiles) start_copy(t + kStages - 1);  // refills t - 1's buffer
    cp_async_commit();

    float const* as = a_tile(t % kStages);
    float const* bs = b_tile(t % kStages);
#pragma unroll
    for (int p = 0; p < kBK; ++p) {
#pragma unroll
      for (int im = 0; im < kIterM; ++im) {
        float4 const v = *reinterpret_cast<float4 const*>(
            &as[p * kAStride + warp_row + im * 4 * kLanesM + lane_row]);
        a_reg[4 * im + 0] = v.x, a_reg[4 * im + 1] = v.y;
        a_reg[4 * im + 2] = v.z, a_reg[4 * im + 3] = v.w;
      }
#pragma unroll
      for (int in = 0; in < kIterN; ++in) {
        float4 const v =
            *reinterpret_cast<float4 const*>(&bs[p * kBN + warp_col + in * 4 * kLanesN + lane_col]);
        b_reg[4 * in + 0] = v.x, b_reg[4 * in + 1] = v.y;
        b_reg[4 * in + 2] = v.z, b_reg[4 * in + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
#pragma unroll
        for (int j = 0; j < kTN; ++j)
          acc[i][j] = fmaf(a_reg[i], b_reg[j], acc[i][j]);
      }
    }
  }
  cp_async_wait<0>();  // nothing may still be copying into shared memory at exit

#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    int const row = block_row + warp_row + (i / 4) * 4 * kLanesM + lane_row + i % 4;
    if (row >= m) continue;
    float* const c_row = C + static_cast<size_t>(row) * ldc;
#pragma unroll
    for (int in = 0; in < kIterN; ++in) {
      float const* v = &acc[i][4 * in];
      gemm::store_scaled_float4<kAlignedC>(c_row,
                                           block_col + warp_col + in * 4 * kLanesN + lane_col, n,
                                           make_float4(v[0], v[1], v[2], v[3]), alpha, beta);
    }
  }
}

}  // namespace

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 10_async_copy)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const grid = make_grid(ceil_div(n, kBN), ceil_div(m, kBM), routine);
  // Two independent choices, B's copies and C's stores, each a template argument: the
  // generic lambdas of dispatch_bool instantiate the four kernels.
  static_assert(kSharedBytes <= 48 * 1024, "no opt-in needed below 48 KB");
  dispatch_bool(rows_are_16_byte_aligned(B, ldb), [&](auto kAlignedB) {
    dispatch_bool(rows_are_16_byte_aligned(C, ldc), [&](auto kAlignedC) {
      async_copy_sgemm_kernel<kAlignedB(), kAlignedC()>
          <<<grid, kThreads, kSharedBytes, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    });
  });
  check_launch(routine);
}
