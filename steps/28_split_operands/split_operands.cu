// Step 28: FP32 on the tensor cores, by splitting the operands. The FP32 track ends at step 13 on
// the CUDA cores; the tensor cores multiply bf16 many times faster, but a bf16 holds 8 of an
// FP32's 24 significant bits. Three bf16 hold all 24: a = a0 + a1 + a2 exactly, each part about
// 2^-8 of the one before. Of the nine products a_i * b_j, the six with i + j <= 2 are what an FP32
// product keeps; the other three lie below FP32's last bit. So this step computes the FP32
// contract, gemm::sgemm, as six bf16 products on the tensor cores ("BF16x6").
//
// Two kernels:
//   1. split_into_parts, once per operand: FP32 A (m x k) becomes three bf16 planes side by side,
//      A' = [a0 | a1 | a2] (m x 3 kp), and B (k x n) three planes stacked, B' = [b0; b1; b2]
//      (3 kp x n), each plane's k padded with zeros to kp, a multiple of the 64-deep k tile.
//   2. split_gemm_kernel, step 24's warp-specialized cluster kernel, whose stage holds the three
//      parts of one k tile of A and of B, and whose consumers run the six products on them.
//
// What is new in the kernel, besides six products per stage: promotion. A tensor core adds into
// its FP32 accumulators with truncation, not rounding, and one long sum of 6 k truncated
// additions drifts. So each k tile is summed into fresh accumulators (`chunk`), which are then
// added to the running sum (`total`) with ordinary FP32 adds, which round to nearest.
//
// The TMA-store epilogue of step 24 is not used: C is FP32 here and a tile's six products take six
// times as long as its stores, so the plain stores of step 23 cost little.
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "cluster.cuh"
#include "cuda_check.h"
#include "device_helpers.cuh"
#include "gemm.h"
#include "launch.h"
#include "mbarrier.cuh"
#include "tensor_map.h"
#include "tma.cuh"
#include "warp_specialization.cuh"
#include "wgmma.cuh"
#include "workspace.h"

namespace {

using bf16 = __nv_bfloat16;
using namespace gemm::hopper;

// --- splitting an FP32 matrix into three bf16 parts --------------------------------------------

constexpr int kParts = 3;

// x = part0 + part1 + part2 exactly, for every finite x below bf16's largest value (about 3.39e38,
// 0.4% below FP32's) whose parts stay normal. Each subtraction is exact: x - RN(x) is made of the
// bits of x below the 8 that RN(x) keeps, so it is an FP32 value; rounding it keeps the next 8,
// and what is left after that (at most the last 8 of x's 24 bits) is a bf16 already.
__device__ __forceinline__ void split_value(float x, bf16& part0, bf16& part1, bf16& part2) {
  part0 = __float2bfloat16_rn(x);
  float const rest = x - __bfloat162float(part0);
  part1 = __float2bfloat16_rn(rest);
  part2 = __float2bfloat16_rn(rest - __bfloat162float(part1));
}

// Writes the three parts of the rows x cols matrix `source` (leading dimension ld) as
// padded_rows x padded_cols planes, part p at parts + p * part_stride, row pitch parts_ld. Where
// the plane is larger than the matrix it holds zeros: that is what pads k to whole k tiles.
__global__ void split_into_parts(float const* __restrict__ source, int rows, int cols, int ld,
                                 int padded_rows, int padded_cols, bf16* __restrict__ parts,
                                 std::size_t parts_ld, std::size_t part_stride) {
  std::size_t const count = static_cast<std::size_t>(padded_rows) * padded_cols;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    int const row = static_cast<int>(i / padded_cols);
    int const col = static_cast<int>(i % padded_cols);
    float const x =
        row < rows && col < cols ? source[static_cast<std::size_t>(row) * ld + col] : 0.0f;
    bf16* const out = parts + static_cast<std::size_t>(row) * parts_ld + col;
    split_value(x, out[0], out[part_stride], out[2 * part_stride]);
  }
}

// --- the tile -----------------------------------------------------------------------------------

constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 64;
constexpr int kBoxN = 64;  // B is loaded in boxes 64 columns wide (128 bytes, the swizzle span)
constexpr int kBoxes = kBN / kBoxN;
constexpr int kConsumers = 2;  // each owns 64 rows of the 128
constexpr int kClusterSize = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupM = 4;
constexpr int kWgmmaK = 16;
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
constexpr int kMaxSharedBytes = 227 * 1024;
constexpr std::uint32_t kBBoxBytes = kBK * kBoxN * 2;  // 8 KB

// The six products, smallest first (a2 b0, a1 b1, a0 b2 are about 2^-16 of a0 b0): the small ones
// are summed while the chunk is still small, where truncation costs least.
struct Product {
  int a_part;
  int b_part;
};
constexpr int kProducts = 6;
__device__ constexpr Product kProductOrder[kProducts] = {{2, 0}, {1, 1}, {0, 2},
                                                         {1, 0}, {0, 1}, {0, 0}};

// One stage: the three parts of a 128 x 64 tile of A and of a 64 x 128 tile of B, 96 KB. Two
// stages fill shared memory; each feeds 6 x 4 = 24 wgmma per consumer, so two are enough to keep
// the next one loading while this one is multiplied.
struct Stage {
  alignas(1024) bf16 a[kParts][kBM * kBK];
  alignas(1024) bf16 b[kParts][kBK * kBN];
};
constexpr int kStages = 2;
struct SharedStorage {
  Stage stages[kStages];
  std::uint64_t full[kStages];
  std::uint64_t empty[kStages];
};
constexpr int kSharedBytes = shared_storage_bytes<SharedStorage>();

static_assert(kSharedBytes <= kMaxSharedBytes, "two stages must fit shared memory");
static_assert(kBoxes % kClusterSize == 0,
              "each block of the pair multicasts the same number of boxes");
static_assert(register_budgets_fit(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers),
              "the register budgets must fit what the block is given at launch");

__device__ __forceinline__ std::uint64_t a_descriptor(std::uint32_t a_part, int consumer, int kk) {
  return swizzle128_descriptor(a_part + consumer * 64 * 128 + kk * kWgmmaK * 2, 16, 1024);
}
__device__ __forceinline__ std::uint64_t b_descriptor(std::uint32_t b_part, int kk) {
  return swizzle128_descriptor(b_part + kk * kWgmmaK * 128, kBBoxBytes, 1024);
}

// --- the phases ---------------------------------------------------------------------------------

// The producer's loads of one output tile: for every k tile, the three parts of A's 128 x 64 tile
// (part p sits kp columns to the right of part p - 1 in A') and of B's 64 x 128 tile (kp rows below
// in B'). The blocks of the pair share B: block `rank` loads half of the boxes of each part and
// multicasts them to both.
__device__ __forceinline__ void produce_tile(SharedStorage& shared, CUtensorMap const* a_map,
                                             CUtensorMap const* b_map, int a_row, int b_col,
                                             int k_tiles, int kp, unsigned rank,
                                             PipelineState<kStages>& write) {
  for (int k_tile = 0; k_tile < k_tiles; ++k_tile, write.advance()) {
    Stage& stage = shared.stages[write.stage];
    std::uint32_t const full = gemm::shared_address(&shared.full[write.stage]);
    mbarrier_wait(gemm::shared_address(&shared.empty[write.stage]), write.phase ^ 1);
    mbarrier_arrive_expect_bytes(full, sizeof(Stage));
    for (int part = 0; part < kParts; ++part) {
      int const k = part * kp + k_tile * kBK;  // column of A', row of B'
      tma_load_2d(gemm::shared_address(stage.a[part]), a_map, k, a_row, full);
      for (int box = static_cast<int>(rank); box < kBoxes; box += kClusterSize) {
        tma_load_2d_multicast(gemm::shared_address(stage.b[part]) + box * kBBoxBytes, b_map,
                              b_col + box * kBoxN, k, full, (1u << kClusterSize) - 1);
      }
    }
  }
}

// A consumer's 64 x 128 block of one output tile, summed over all k tiles into `total`. Each k
// tile's 24 wgmma (6 products x 4 steps of 16) go into `chunk`; the consumer waits for them, hands
// the stage back to both blocks of the pair, then promotes: adds `chunk` to `total` in FP32 (round
// to nearest) and sets `chunk` to zero. While it does, the other consumer's wgmma keep the tensor
// cores busy.
__device__ __forceinline__ void consume_tile(SharedStorage& shared, int consumer, int k_tiles,
                                             PipelineState<kStages>& read,
                                             float (&total)[kBN / 2]) {
  float chunk[kBN / 2];
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i) {
    total[i] = 0.0f;
    chunk[i] = 0.0f;
  }
  for (int k_tile = 0; k_tile < k_tiles; ++k_tile, read.advance()) {
    Stage& stage = shared.stages[read.stage];
    mbarrier_wait(gemm::shared_address(&shared.full[read.stage]), read.phase);
    wgmma_fence();
#pragma unroll
    for (int product = 0; product < kProducts; ++product) {
      std::uint32_t const a_part = gemm::shared_address(stage.a[kProductOrder[product].a_part]);
      std::uint32_t const b_part = gemm::shared_address(stage.b[kProductOrder[product].b_part]);
#pragma unroll
      for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
        wgmma_m64n128k16_bf16(chunk, a_descriptor(a_part, consumer, kk), b_descriptor(b_part, kk));
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    if (threadIdx.x % 32 == 0) {  // one arrival per warp, on the barrier of every block
      for (unsigned rank = 0; rank < kClusterSize; ++rank) {
        mbarrier_arrive_cluster(gemm::shared_address(&shared.empty[read.stage]), rank);
      }
    }
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) {
      total[i] += chunk[i];
      chunk[i] = 0.0f;
    }
  }
}

// c = alpha * total + beta * c for a consumer's 64 x 128 block at (first_row, first_col), straight
// from the registers (the accumulator layout of wgmma.cuh), two floats at a time where kPairs (C's
// rows 8-byte aligned). C is read only when beta != 0, and only inside the matrix.
template <bool kPairs>
__device__ __forceinline__ void store_tile(float* C, int ldc, int m, int n, float alpha, float beta,
                                           int first_row, int first_col,
                                           float const (&total)[kBN / 2]) {
  int const lane = threadIdx.x % 32;
  int const row0 = first_row + (threadIdx.x / 32) % 4 * 16 + lane / 4;
  int const t2 = (lane % 4) * 2;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    int const col = first_col + j * 8 + t2;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      int const row = row0 + 8 * half;
      if (row >= m || col >= n) continue;
      float* const out = C + static_cast<std::size_t>(row) * ldc + col;
      float2 value =
          make_float2(alpha * total[4 * j + 2 * half], alpha * total[4 * j + 2 * half + 1]);
      if (kPairs && col + 1 < n) {
        if (beta != 0.0f) {
          float2 const old = *reinterpret_cast<float2 const*>(out);
          value.x = fmaf(beta, old.x, value.x);
          value.y = fmaf(beta, old.y, value.y);
        }
        *reinterpret_cast<float2*>(out) = value;
      } else {
        out[0] = beta != 0.0f ? fmaf(beta, out[0], value.x) : value.x;
        if (col + 1 < n) out[1] = beta != 0.0f ? fmaf(beta, out[1], value.y) : value.y;
      }
    }
  }
}

// --- the kernel ---------------------------------------------------------------------------------

template <bool kPairs>
__global__ void __cluster_dims__(kClusterSize, 1, 1) __launch_bounds__(kThreads, 1)
    split_gemm_kernel(const __grid_constant__ CUtensorMap a_map,
                      const __grid_constant__ CUtensorMap b_map, int m, int n, int kp, float alpha,
                      float beta, float* __restrict__ C, int ldc) {
  extern __shared__ unsigned char shared_bytes[];
  auto& shared = shared_storage<SharedStorage>(shared_bytes);
  unsigned const rank = cluster_block_rank();
  int const pair_rows = gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize);
  int const tiles_n = gemm::ceil_div(n, kBN);
  int const cluster = blockIdx.x / kClusterSize;
  int const clusters = gridDim.x / kClusterSize;
  int const k_tiles = kp / kBK;
  int const warpgroup = threadIdx.x / 128;
  auto tile_of = [&](int tile, int& tile_m, int& tile_n) {
    int pair_m = 0;
    gemm::grouped_tile(tile, pair_rows, tiles_n, kGroupM, pair_m, tile_n);
    tile_m = pair_m * kClusterSize + static_cast<int>(rank);
  };

  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(gemm::shared_address(&shared.full[stage]), 1);
      mbarrier_init(gemm::shared_address(&shared.empty[stage]), 4 * kConsumers * kClusterSize);
    }
    fence_barrier_init();
  }
  cluster_sync();

  if (warpgroup == 0) {
    release_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      PipelineState<kStages> write;
      for (int tile = cluster; tile < pair_rows * tiles_n; tile += clusters) {
        int tile_m = 0;
        int tile_n = 0;
        tile_of(tile, tile_m, tile_n);
        produce_tile(shared, &a_map, &b_map, tile_m * kBM, tile_n * kBN, k_tiles, kp, rank, write);
      }
    }
  } else {
    claim_registers<kConsumerRegisters>();
    int const consumer = warpgroup - 1;
    PipelineState<kStages> read;
    for (int tile = cluster; tile < pair_rows * tiles_n; tile += clusters) {
      int tile_m = 0;
      int tile_n = 0;
      tile_of(tile, tile_m, tile_n);
      float total[kBN / 2];
      consume_tile(shared, consumer, k_tiles, read, total);
      store_tile<kPairs>(C, ldc, m, n, alpha, beta, tile_m * kBM + consumer * 64, tile_n * kBN,
                         total);
    }
  }
  cluster_sync();
}

// --- the host -----------------------------------------------------------------------------------

template <bool kPairs>
void launch(CUtensorMap const& a_map, CUtensorMap const& b_map, int m, int n, int kp, float alpha,
            float beta, float* C, int ldc, cudaStream_t stream) {
  constexpr auto kernel = split_gemm_kernel<kPairs>;
  gemm::opt_in_shared_memory<kernel>(kSharedBytes);
  check_register_budgets<kernel>(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers);
  static int const resident = resident_clusters(kernel, kClusterSize, kThreads, kSharedBytes);
  long long const cluster_tiles =
      static_cast<long long>(gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize)) *
      gemm::ceil_div(n, kBN);
  long long const clusters = std::min<long long>(cluster_tiles, resident);
  kernel<<<static_cast<unsigned>(clusters * kClusterSize), kThreads, kSharedBytes, stream>>>(
      a_map, b_map, m, n, kp, alpha, beta, C, ldc);
}

// A grid of a few blocks per SM covers any matrix; each thread splits one element at a time.
void split(float const* source, int rows, int cols, int ld, int padded_rows, int padded_cols,
           bf16* parts, std::size_t parts_ld, std::size_t part_stride, cudaStream_t stream) {
  constexpr int kSplitThreads = 256;
  std::size_t const count = static_cast<std::size_t>(padded_rows) * padded_cols;
  std::size_t const blocks =
      std::min<std::size_t>((count + kSplitThreads - 1) / kSplitThreads,
                            static_cast<std::size_t>(8 * gemm::multiprocessor_count()));
  split_into_parts<<<static_cast<unsigned>(blocks), kSplitThreads, 0, stream>>>(
      source, rows, cols, ld, padded_rows, padded_cols, parts, parts_ld, part_stride);
}

}  // namespace

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("sgemm", m, n, k, A, lda, B, ldb, C, ldc);
  // Each plane's k padded to whole k tiles; B' rows padded to 64 elements (128 bytes), the pitch
  // TMA reads best (step 22).
  long long const kp = static_cast<long long>(ceil_div(k, kBK)) * kBK;
  long long const np = static_cast<long long>(ceil_div(n, 64)) * 64;
  if (kParts * kp > 0x7fffffffLL ||
      static_cast<long long>(ceil_div(m, kBM)) * ceil_div(n, kBN) > 0x3fffffffLL) {
    throw std::invalid_argument("sgemm: the problem is too large for this step");
  }
  // The workspace: A' (m x 3 kp) then B' (3 kp x np), bf16, A' rounded up to 1024 bytes so that
  // B' starts where TMA wants it (16-byte aligned at least).
  std::size_t const a_elements = static_cast<std::size_t>(m) * kParts * kp;
  std::size_t const a_bytes = (a_elements * sizeof(bf16) + 1023) / 1024 * 1024;
  std::size_t const b_elements = static_cast<std::size_t>(kParts * kp) * np;
  StreamWorkspace const workspace(a_bytes + b_elements * sizeof(bf16), stream);
  bf16* const a_parts = workspace.get<bf16>();
  bf16* const b_parts = reinterpret_cast<bf16*>(workspace.get<unsigned char>() + a_bytes);

  split(A, m, k, lda, m, static_cast<int>(kp), a_parts, kParts * kp, kp, stream);
  split(B, k, n, ldb, static_cast<int>(kp), n, b_parts, np, kp * np, stream);
  check_launch("sgemm");

  CUtensorMap const a_map =
      make_bf16_tensor_map(a_parts, m, static_cast<int>(kParts * kp), kParts * kp, kBM, kBK);
  CUtensorMap const b_map =
      make_bf16_tensor_map(b_parts, static_cast<int>(kParts * kp), n, np, kBK, kBoxN);
  dispatch_bool(rows_are_aligned<8>(C, ldc), [&](auto kPairs) {
    launch<kPairs()>(a_map, b_map, m, n, static_cast<int>(kp), alpha, beta, C, ldc, stream);
  });
  check_launch("sgemm");
}
