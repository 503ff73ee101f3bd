// Step 17: Hopper's own way to feed the tensor cores. TMA copies whole tiles into shared memory
// (one thread issues a copy, the copy engine does the rest, swizzled, with zeros outside the
// matrix), an mbarrier per stage says when a tile has landed, and wgmma multiplies 64 x 128 x 16
// blocks straight out of shared memory, asynchronously, from one warpgroup of 4 warps.
//
// Compared with step 16 nothing is loaded by the threads any more: no address arithmetic per
// copy, no ldmatrix, no fragments. 128 threads compute a 128 x 128 tile, and a ring of kStages
// shared buffers keeps kStages - 1 k tiles in flight while one is computed.
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "async_copy.cuh"
#include "device_helpers.cuh"
#include "gemm.h"
#include "hopper.cuh"
#include "tensor_map.h"
#include "tma_operand.cuh"

namespace {

using bf16 = __nv_bfloat16;
using namespace gemm::hopper;

constexpr int kBM = 128;       // block tile rows: two wgmma of 64 rows
constexpr int kBN = 128;       // block tile columns: the N of one wgmma
constexpr int kBK = 64;        // k tile: 64 bf16 = 128 bytes, one swizzle span per row of A
constexpr int kStages = 4;     // shared buffers in the ring
constexpr int kThreads = 128;  // one warpgroup
constexpr int kGroupM = 8;     // grouped block order (steps 13 and 16)
constexpr int kBoxN = 64;      // B is copied in boxes 64 columns (128 bytes) wide
constexpr int kWgmmaK = 16;    // k per wgmma

// Shared memory per stage. A's tile: kBM rows of 128 bytes, as TMA writes it (row r at
// r * 128 bytes, its 16-byte chunks swizzled within each group of 8 rows). B's tile: two boxes
// of kBK rows x 64 columns, one after the other (columns 0-63, then 64-127).
constexpr std::uint32_t kABytes = kBM * kBK * 2;               // 16 KB
constexpr std::uint32_t kBBoxBytes = kBK * kBoxN * 2;          // 8 KB
constexpr std::uint32_t kBBytes = kBBoxBytes * (kBN / kBoxN);  // 16 KB
constexpr std::uint32_t kStageBytes = kABytes + kBBytes;
// The stages, then one 8-byte mbarrier per stage, plus 1 KB to align the tiles to 1024 bytes.
constexpr int kSharedBytes = kStages * kStageBytes + kStages * 8 + 1024;

static_assert(kBK * 2 == 128, "a row of A's tile must be exactly one 128-byte swizzle span");
static_assert(kBN % kBoxN == 0, "B's tile is a whole number of 64-column boxes");

// The descriptors of the k step kk (16 deep) of a stage, for wgmma.
//
// A is K-major: row r of the tile is 128 contiguous bytes (64 k). A 64-row half of the tile
// starts 64 * 128 bytes further; k step kk starts kk * 32 bytes into each row (the hardware
// applies the swizzle to the final address). Groups of 8 rows are 1024 bytes apart (the
// "stride" offset); the "leading" offset is unused for a swizzled K-major operand.
//
// B is N-major: row k of a box is 64 contiguous columns (128 bytes). k step kk starts kk * 16
// rows = 2048 bytes further. Groups of 8 k rows are 1024 bytes apart (the stride offset), and
// the next 64 columns are in the next box, kBBoxBytes further (the leading offset).
__device__ __forceinline__ std::uint64_t a_descriptor(std::uint32_t a_stage, int half, int kk) {
  return swizzle128_descriptor(a_stage + half * 64 * 128 + kk * kWgmmaK * 2, 16, 1024);
}
__device__ __forceinline__ std::uint64_t b_descriptor(std::uint32_t b_stage, int kk) {
  return swizzle128_descriptor(b_stage + kk * kWgmmaK * 128, kBBoxBytes, 1024);
}

template <bool kPairs>
__global__ void __launch_bounds__(kThreads, 1)
    tma_wgmma_kernel(const __grid_constant__ CUtensorMap a_map,
                     const __grid_constant__ CUtensorMap b_map, int m, int n, int k, float alpha,
                     float beta, bf16* __restrict__ C, int ldc) {
  extern __shared__ unsigned char shared_bytes[];
  // 128-byte-swizzled tiles must start on a 1024-byte boundary; dynamic shared memory is only
  // guaranteed 16-byte alignment, so round up (kSharedBytes has the slack).
  std::uint32_t const shared_base = (gemm::shared_address(shared_bytes) + 1023) & ~1023u;
  auto a_stage = [&](int stage) { return shared_base + stage * kStageBytes; };
  auto b_stage = [&](int stage) { return shared_base + stage * kStageBytes + kABytes; };
  auto full = [&](int stage) { return shared_base + kStages * kStageBytes + stage * 8; };

  int tile_m = 0;
  int tile_n = 0;
  gemm::grouped_tile(blockIdx.x, gemm::ceil_div(m, kBM), gemm::ceil_div(n, kBN), kGroupM, tile_m,
                     tile_n);
  int const block_row = tile_m * kBM;
  int const block_col = tile_n * kBN;
  int const k_tiles = gemm::ceil_div(k, kBK);

  // One barrier per stage, "full": thread 0 arrives once (with the byte count) and TMA brings
  // the bytes; the phase completes when the whole k tile has landed.
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage)
      mbarrier_init(full(stage), 1);
    fence_barrier_init();
  }
  __syncthreads();

  // Thread 0 starts the copies of k tile `tile` into its stage: A's 128 x 64 box and B's two
  // 64 x 64 boxes. Boxes reaching past m, n or k are zero-filled by TMA and still deliver their
  // full byte count, so the expected count is always the same.
  auto start_tile = [&](int tile) {
    int const stage = tile % kStages;
    mbarrier_arrive_expect_bytes(full(stage), kStageBytes);
    tma_load_2d(a_stage(stage), &a_map, tile * kBK, block_row, full(stage));
    for (int box = 0; box < kBN / kBoxN; ++box) {
      tma_load_2d(b_stage(stage) + box * kBBoxBytes, &b_map, block_col + box * kBoxN, tile * kBK,
                  full(stage));
    }
  };
  if (threadIdx.x == 0) {
    for (int tile = 0; tile < kStages - 1 && tile < k_tiles; ++tile)
      start_tile(tile);
  }

  // Rows 0-63 and 64-127 of the tile: 64 floats per thread each (see hopper.cuh for the layout).
  float acc[2][64] = {};

  for (int tile = 0; tile < k_tiles; ++tile) {
    int const stage = tile % kStages;
    // The stage's phase flips once per pass around the ring: parity 0 on the first pass.
    mbarrier_wait(full(stage), (tile / kStages) % 2);

    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
      std::uint64_t const b = b_descriptor(b_stage(stage), kk);
      wgmma_m64n128k16_bf16(acc[0], a_descriptor(a_stage(stage), 0, kk), b);
      wgmma_m64n128k16_bf16(acc[1], a_descriptor(a_stage(stage), 1, kk), b);
    }
    wgmma_commit();
    // Let this tile's wgmma run while waiting for the previous tile's: once those are done (in
    // every warp: the barrier), the previous tile's stage is free and thread 0 refills it with
    // the tile kStages - 1 ahead.
    wgmma_wait<1>();
    __syncthreads();
    if (threadIdx.x == 0 && tile + kStages - 1 < k_tiles) start_tile(tile + kStages - 1);
  }
  wgmma_wait<0>();

  // Epilogue, straight from the accumulator registers: warp w holds rows 16 w .. 16 w + 15 of
  // each 64-row half; float 4 j + {0, 1} is (row g, columns 8 j + 2 t, +1), 4 j + {2, 3} the
  // same columns of row g + 8.
  int const warp = threadIdx.x / 32;
  int const lane = threadIdx.x % 32;
  int const g = lane / 4;
  int const t2 = (lane % 4) * 2;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    int const row = block_row + half * 64 + warp * 16 + g;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      int const col = block_col + j * 8 + t2;
      if (row < m) {
        gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(row) * ldc, col, n,
                                             acc[half][4 * j], acc[half][4 * j + 1], alpha, beta);
      }
      if (row + 8 < m) {
        gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(row + 8) * ldc, col, n,
                                             acc[half][4 * j + 2], acc[half][4 * j + 3], alpha,
                                             beta);
      }
    }
  }
}

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B,
                     int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  long long const tiles = static_cast<long long>(ceil_div(m, kBM)) * ceil_div(n, kBN);
  if (tiles > 0x7fffffffLL) throw std::invalid_argument("bf16_gemm: too many tiles for one grid");
  // Operands TMA cannot describe (odd leading dimension, unaligned base) are copied first.
  TmaOperand const a(A, m, k, lda, stream);
  TmaOperand const b(B, k, n, ldb, stream);
  CUtensorMap const a_map = make_bf16_tensor_map(a.data(), m, k, a.ld(), kBM, kBK);
  CUtensorMap const b_map = make_bf16_tensor_map(b.data(), k, n, b.ld(), kBK, kBoxN);
  bool const pairs = rows_are_aligned<4>(C, ldc);
  dispatch_bool(pairs, [&](auto kPairs) {
    auto const kernel = tma_wgmma_kernel<kPairs()>;
    static cudaError_t const opt_in =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
    if (opt_in != cudaSuccess) {
      throw std::runtime_error("bf16_gemm: this GPU cannot give a block " +
                               std::to_string(kSharedBytes) + " bytes of shared memory (" +
                               cudaGetErrorString(opt_in) + ")");
    }
    kernel<<<static_cast<unsigned>(tiles), kThreads, kSharedBytes, stream>>>(a_map, b_map, m, n, k,
                                                                             alpha, beta, C, ldc);
  });
  check_launch("bf16_gemm");
}
