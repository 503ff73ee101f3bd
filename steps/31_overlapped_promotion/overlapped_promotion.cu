// Step 31: overlapped promotion. Step 30 waits for a k tile's wgmma, then adds `chunk` into `total`
// with FP32 additions while its own tensor cores have nothing queued: the additions cost it 12-23%
// against step 29. Here each consumer keeps two chunks and alternates them: k tile t + 1 runs on
// the tensor cores into one while k tile t is added from the other. The loop body covers four k
// tiles, unrolled, so that each addition's chunk is known at compile time, and leaves no wgmma in
// flight at its back edge; the last chunk of each body is added with nothing queued.
//
// The price is a third set of accumulators: 128 x 128 tiles (64 + 64 + 64 per consumer thread),
// which need six stages of 32 KB to keep the producer ahead. The accuracy is step 30's, bit for
// bit: the same chunks, added in the same order.
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "aligned_operand.cuh"
#include "cluster.cuh"
#include "cuda_check.h"
#include "device_helpers.cuh"
#include "gemm.h"
#include "launch.h"
#include "mbarrier.cuh"
#include "pipeline_phases.cuh"
#include "tensor_map.h"
#include "tma.cuh"
#include "tma_store.cuh"
#include "warp_specialization.cuh"
#include "wgmma.cuh"
#include "workspace.h"

namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;
using namespace gemm::hopper;

// --- the tile -----------------------------------------------------------------------------------

constexpr int kBM = 128;
constexpr int kBN = 128;         // 64 + 64 + 64 accumulators per consumer thread: two chunks, total
constexpr int kBK = 128;         // one-byte elements: a 128-byte swizzled row
constexpr int kWgmmaK = 32;      // FP8 wgmma multiplies 32 deep (32 bytes, as bf16's 16)
constexpr int kConsumers = 2;    // each owns 64 rows of the 128
constexpr int kClusterSize = 2;  // stacked: the pair shares B, each block loads half its rows
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupM = 4;
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
constexpr int kMaxSharedBytes = 227 * 1024;
constexpr int kBHalfRows = kBN / kClusterSize;  // rows of B per block of the pair
constexpr int kChunkTiles = 4;  // k tiles per pass of the k loop: no wgmma in flight between passes

struct Stage {
  alignas(1024) std::uint8_t a[kBM * kBK];  // 16 KB: 128 rows of A, 128 bytes each
  alignas(1024) std::uint8_t b[kBN * kBK];  // kBN rows of B (columns of the product)
};
constexpr int kStages = 6;  // 32 KB each
// Step 24's epilogue: two 64 x 64 staging buffers of C per consumer for the TMA stores.
struct SharedStorage {
  Stage stages[kStages];
  alignas(1024) bf16 staging[kConsumers][2][64 * 64];
  std::uint64_t full[kStages];
  std::uint64_t empty[kStages];
};
constexpr int kSharedBytes = shared_storage_bytes<SharedStorage>();
static_assert(kSharedBytes <= kMaxSharedBytes, "the stages must fit shared memory");
static_assert(kBHalfRows % 8 == 0, "each multicast half starts on a whole 1024-byte swizzle atom");
static_assert(register_budgets_fit(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers),
              "the register budgets must fit what the block is given at launch");

// One FP8 wgmma: D (64 x 128, FP32) = A (64 x 32) * B (32 x 128), both E4M3, plus D if
// `accumulate` is not 0. The first wgmma of a k tile passes accumulate = 0 (wgmma's scale-d
// operand), so a chunk never has to be cleared: clearing it with moves would make ptxas wait for
// the other chunk's wgmma too.
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], std::uint64_t a_descriptor,
                                                      std::uint64_t b_descriptor, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{" GEMM_WGMMA_REGS_64
      "}, %64, %65, accumulate, 1, 1;\n"
      "}\n"
      : GEMM_WGMMA_D_64
      : "l"(a_descriptor), "l"(b_descriptor), "r"(accumulate));
}

// Both operands K-major with the 128-byte swizzle: the next 32 k are 32 bytes further along the
// rows, a consumer's 64 rows of A 64 x 128 bytes further down; rows come in 8-row atoms of 1024
// bytes (the stride), and the leading offset is unused.
__device__ __forceinline__ std::uint64_t a_descriptor(std::uint32_t a_tile, int consumer, int kk) {
  return swizzle128_descriptor(a_tile + consumer * 64 * kBK + kk * kWgmmaK, 16, 1024);
}
__device__ __forceinline__ std::uint64_t b_descriptor(std::uint32_t b_tile, int kk) {
  return swizzle128_descriptor(b_tile + kk * kWgmmaK, 16, 1024);
}

// --- the phases ---------------------------------------------------------------------------------

// The producer's loads of one output tile: A's 128 x 128-byte box, and this block's half of B's
// kBN rows, multicast to both blocks of the pair.
__device__ __forceinline__ void produce_tile(StageRing<SharedStorage> const& ring,
                                             CUtensorMap const* a_map, CUtensorMap const* b_map,
                                             int a_row, int b_row, int k_tiles, unsigned rank,
                                             PipelineState<kStages>& write) {
  for (int k_tile = 0; k_tile < k_tiles; ++k_tile, write.advance()) {
    mbarrier_wait(ring.empty(write.stage), write.phase ^ 1);
    mbarrier_arrive_expect_bytes(ring.full(write.stage), sizeof(Stage));
    tma_load_2d(ring.a_tile(write.stage), a_map, k_tile * kBK, a_row, ring.full(write.stage));
    tma_load_2d_multicast(ring.b_tile(write.stage) + rank * kBHalfRows * kBK, b_map, k_tile * kBK,
                          b_row + static_cast<int>(rank) * kBHalfRows, ring.full(write.stage),
                          (1u << kClusterSize) - 1);
  }
}

// Issues one k tile's 4 wgmma into `chunk` as one commit group and returns its stage.
__device__ __forceinline__ int issue_k_tile(StageRing<SharedStorage> const& ring, int consumer,
                                            PipelineState<kStages>& read, float (&chunk)[kBN / 2]) {
  int const stage = read.stage;
  mbarrier_wait(ring.full(stage), read.phase);
  wgmma_fence();  // the adds that last read `chunk` come before these wgmma
#pragma unroll
  for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
    wgmma_m64n128k32_e4m3(chunk, a_descriptor(ring.a_tile(stage), consumer, kk),
                          b_descriptor(ring.b_tile(stage), kk), kk);
  }
  wgmma_commit();
  read.advance();
  return stage;
}

// Hands a stage back to both blocks of the pair: one arrival per warp on each block's barrier.
__device__ __forceinline__ void release_stage(StageRing<SharedStorage> const& ring, int stage) {
  if (threadIdx.x % 32 == 0) {
    for (unsigned rank = 0; rank < kClusterSize; ++rank)
      mbarrier_arrive_cluster(ring.empty(stage), rank);
  }
}

// Promotion: FP32 additions, rounded to nearest.
__device__ __forceinline__ void promote(float (&total)[kBN / 2], float const (&chunk)[kBN / 2]) {
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i)
    total[i] += chunk[i];
}

// A consumer's 64 x kBN block of one output tile, summed over all k tiles into `total`. Chunks
// `even` and `odd` take turns: while the tensor cores run one k tile into one of them, the
// consumer adds the other, whose group `wgmma_wait<1>` has just seen finish (groups finish in
// order). Each pass covers kChunkTiles k tiles, fully unrolled, and ends with `wgmma_wait<0>`, so
// the chunk each addition reads is fixed at compile time and no group is in flight at the loop's
// back edge (step 31's README weighs this against a loop that carries one across). Leftover k
// tiles go one at a time.
__device__ __forceinline__ void consume_tile(StageRing<SharedStorage> const& ring, int consumer,
                                             int k_tiles, PipelineState<kStages>& read,
                                             float (&total)[kBN / 2]) {
  float even[kBN / 2];
  float odd[kBN / 2];
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i) {
    total[i] = 0.0f;
    even[i] = 0.0f;  // never read (each k tile's first wgmma overwrites), but defined
    odd[i] = 0.0f;
  }
  int k_tile = 0;
  for (; k_tile + kChunkTiles <= k_tiles; k_tile += kChunkTiles) {
    int stages[kChunkTiles];
    stages[0] = issue_k_tile(ring, consumer, read, even);
#pragma unroll
    for (int t = 1; t < kChunkTiles; ++t) {
      stages[t] = issue_k_tile(ring, consumer, read, t % 2 == 0 ? even : odd);
      wgmma_wait<1>();  // k tile t - 1 is done, k tile t runs
      release_stage(ring, stages[t - 1]);
      promote(total, (t - 1) % 2 == 0 ? even : odd);
    }
    wgmma_wait<0>();  // the last k tile is done; nothing is in flight at the back edge
    release_stage(ring, stages[kChunkTiles - 1]);
    promote(total, (kChunkTiles - 1) % 2 == 0 ? even : odd);
  }
  for (; k_tile < k_tiles; ++k_tile) {
    int const stage = issue_k_tile(ring, consumer, read, even);
    wgmma_wait<0>();
    release_stage(ring, stage);
    promote(total, even);
  }
}

// --- the kernel ---------------------------------------------------------------------------------

// How C is written, as in step 24: TMA stores where C is a legal TMA operand (16-byte-aligned rows
// and n a multiple of 8), else direct stores, in pairs where C's rows are 4-byte aligned.
enum class Epilogue { kTmaStore, kPairStores, kSingleStores };

template <Epilogue kEpilogue>
__global__ void __cluster_dims__(kClusterSize, 1, 1) __launch_bounds__(kThreads, 1)
    overlapped_promotion_kernel(const __grid_constant__ CUtensorMap a_map,
                                const __grid_constant__ CUtensorMap b_map,
                                const __grid_constant__ CUtensorMap c_map, int m, int n, int k,
                                float alpha, float const* __restrict__ a_scale,
                                float const* __restrict__ b_scale, float beta, bf16* __restrict__ C,
                                int ldc) {
  extern __shared__ unsigned char shared_bytes[];
  auto& shared = shared_storage<SharedStorage>(shared_bytes);
  StageRing<SharedStorage> const ring{shared};
  unsigned const rank = cluster_block_rank();
  int const pair_rows = gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize);
  int const tiles_n = gemm::ceil_div(n, kBN);
  int const cluster = blockIdx.x / kClusterSize;
  int const clusters = gridDim.x / kClusterSize;
  int const k_tiles = gemm::ceil_div(k, kBK);
  int const warpgroup = threadIdx.x / 128;
  auto tile_of = [&](int tile, int& tile_m, int& tile_n) {
    int pair_m = 0;
    gemm::grouped_tile(tile, pair_rows, tiles_n, kGroupM, pair_m, tile_n);
    tile_m = pair_m * kClusterSize + static_cast<int>(rank);
  };

  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(ring.full(stage), 1);
      mbarrier_init(ring.empty(stage), 4 * kConsumers * kClusterSize);
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
        produce_tile(ring, &a_map, &b_map, tile_m * kBM, tile_n * kBN, k_tiles, rank, write);
      }
    }
  } else {
    claim_registers<kConsumerRegisters>();
    int const consumer = warpgroup - 1;
    // The scales are read once: the product's scale joins alpha.
    float const scaled_alpha = alpha * (*a_scale * *b_scale);
    PipelineState<kStages> read;
    int pieces = 0;  // pieces of C this consumer has staged so far: picks the staging buffer
    for (int tile = cluster; tile < pair_rows * tiles_n; tile += clusters) {
      int tile_m = 0;
      int tile_n = 0;
      tile_of(tile, tile_m, tile_n);
      float total[kBN / 2];
      consume_tile(ring, consumer, k_tiles, read, total);
      int const first_row = tile_m * kBM + consumer * 64;
      if constexpr (kEpilogue == Epilogue::kTmaStore) {
        store_tile<kBN>(&c_map, shared.staging[consumer], pieces, 1 + consumer, C, ldc, m, n,
                        scaled_alpha, beta, first_row, tile_n * kBN, total);
      } else {
        store_accumulators<kBN, kEpilogue == Epilogue::kPairStores>(
            C, ldc, m, n, scaled_alpha, beta, first_row, tile_n * kBN, total);
      }
    }
    // The last stores must have landed before the kernel ends.
    if (kEpilogue == Epilogue::kTmaStore && threadIdx.x % 128 == 0) bulk_wait_group<0>();
  }
  cluster_sync();
}

// --- the host -----------------------------------------------------------------------------------

template <Epilogue kEpilogue>
void launch(CUtensorMap const& a_map, CUtensorMap const& b_map, CUtensorMap const& c_map, int m,
            int n, int k, float alpha, float const* a_scale, float const* b_scale, float beta,
            bf16* C, int ldc, cudaStream_t stream) {
  constexpr auto kernel = overlapped_promotion_kernel<kEpilogue>;
  gemm::opt_in_shared_memory<kernel>(kSharedBytes);
  check_register_budgets<kernel>(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers);
  static int const resident = resident_clusters(kernel, kClusterSize, kThreads, kSharedBytes);
  long long const cluster_tiles =
      static_cast<long long>(gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize)) *
      gemm::ceil_div(n, kBN);
  long long const clusters = std::min<long long>(cluster_tiles, resident);
  kernel<<<static_cast<unsigned>(clusters * kClusterSize), kThreads, kSharedBytes, stream>>>(
      a_map, b_map, c_map, m, n, k, alpha, a_scale, b_scale, beta, C, ldc);
}

}  // namespace

void gemm::fp8_gemm(int m, int n, int k, float alpha, fp8 const* A, int lda, fp8 const* B, int ldb,
                    float const* a_scale, float const* b_scale, float beta, bf16* C, int ldc,
                    cudaStream_t stream) {
  check_fp8_gemm_arguments("fp8_gemm", m, n, k, A, lda, B, ldb, a_scale, b_scale, C, ldc);
  if (static_cast<long long>(ceil_div(m, kBM)) * ceil_div(n, kBN) > 0x3fffffffLL) {
    throw std::invalid_argument("fp8_gemm: too many tiles");
  }
  AlignedFp8Operand const a(A, m, k, lda, stream);
  AlignedFp8Operand const b(B, n, k, ldb, stream);
  check_launch("fp8_gemm");
  CUtensorMap const a_map = make_fp8_tensor_map(a.data(), m, k, a.ld(), kBM, kBK);
  CUtensorMap const b_map = make_fp8_tensor_map(b.data(), n, k, b.ld(), kBHalfRows, kBK);
  Epilogue epilogue = Epilogue::kSingleStores;
  CUtensorMap c_map{};  // unused by the direct stores
  if (rows_are_16_byte_aligned(C, ldc) && n % 8 == 0) {
    epilogue = Epilogue::kTmaStore;
    c_map = make_bf16_tensor_map(C, m, n, ldc, 64, 64);
  } else if (rows_are_aligned<4>(C, ldc)) {
    epilogue = Epilogue::kPairStores;
  }
  dispatch_value<Epilogue::kTmaStore, Epilogue::kPairStores, Epilogue::kSingleStores>(
      epilogue, [&](auto kEpilogue) {
        launch<kEpilogue()>(a_map, b_map, c_map, m, n, k, alpha, a_scale, b_scale, beta, C, ldc,
                            stream);
      });
  check_launch("fp8_gemm");
}
