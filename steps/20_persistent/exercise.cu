// Exercise: step 20, persistent blocks. One TODO block: the tiles the consumers walk. The
// placeholder compiles and stops the consumers after their block's first tile, while the producer
// goes on loading the block's next tiles and waits for stages nobody hands back: every problem with
// more tiles than the GPU has SMs hangs (the suite has one, 2048 x 4608 x 100 with 288 tiles;
// meson stops it at its timeout, and the debug build, -Ddebug_hangs=true, reports the producer's
// wait instead). The README's exercises take the barrier protocol across tiles apart.
// Build and test: docs/teaching.md ("Exercise mode").
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "aligned_operand.cuh"
#include "cuda_check.h"
#include "device_helpers.cuh"
#include "gemm.h"
#include "launch.h"
#include "mbarrier.cuh"
#include "tensor_map.h"
#include "tma.cuh"
#include "warp_specialization.cuh"
#include "wgmma.cuh"

namespace {

using bf16 = __nv_bfloat16;
using namespace gemm::hopper;

constexpr int kBM = 128;       // block tile rows: 64 per consumer warpgroup
constexpr int kBN = 256;       // block tile columns: the N of one wgmma
constexpr int kBK = 64;        // k tile: 64 bf16 = one 128-byte swizzle span
constexpr int kStages = 4;     // 4 x 48 KB of the 227 KB a block may have
constexpr int kConsumers = 2;  // consumer warpgroups
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupM = 8;
constexpr int kBoxN = 64;  // B is copied in boxes 64 columns (128 bytes) wide
constexpr int kWgmmaK = 16;
constexpr int kProducerRegisters = 40;  // 128 x 40 + 256 x 232 = 64,512: step 19's budgets
constexpr int kConsumerRegisters = 232;

static_assert(kBK * 2 == 128, "a row of A's tile must be exactly one 128-byte swizzle span");
static_assert(kBM == 64 * kConsumers, "each consumer warpgroup owns 64 rows of the tile");
static_assert(register_budgets_fit(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers),
              "the register budgets must fit what the block is given at launch");

// Step 19's shared memory.
struct SharedStorage {
  struct Stage {
    alignas(1024) bf16 a[kBM * kBK];  // 16 KB
    alignas(1024) bf16 b[kBK * kBN];  // 32 KB
  };
  Stage stages[kStages];
  std::uint64_t full[kStages];
  std::uint64_t empty[kStages];
};
constexpr std::uint32_t kStageBytes = sizeof(SharedStorage::Stage);
constexpr std::uint32_t kBBoxBytes = kBK * kBoxN * 2;  // 8 KB
constexpr int kSharedBytes = shared_storage_bytes<SharedStorage>();

// The descriptors, as in step 18.
__device__ __forceinline__ std::uint64_t a_descriptor(std::uint32_t a_tile, int half, int kk) {
  return swizzle128_descriptor(a_tile + half * 64 * 128 + kk * kWgmmaK * 2, 16, 1024);
}
__device__ __forceinline__ std::uint64_t b_descriptor(std::uint32_t b_tile, int kk) {
  return swizzle128_descriptor(b_tile + kk * kWgmmaK * 128, kBBoxBytes, 1024);
}

template <bool kPairs>
__global__ void __launch_bounds__(kThreads, 1)
    persistent_kernel(const __grid_constant__ CUtensorMap a_map,
                      const __grid_constant__ CUtensorMap b_map, int m, int n, int k, float alpha,
                      float beta, bf16* __restrict__ C, int ldc) {
  extern __shared__ unsigned char shared_bytes[];
  SharedStorage& shared = shared_storage<SharedStorage>(shared_bytes);
  auto a_tile = [&](int stage) { return gemm::shared_address(shared.stages[stage].a); };
  auto b_tile = [&](int stage) { return gemm::shared_address(shared.stages[stage].b); };
  auto full = [&](int stage) { return gemm::shared_address(&shared.full[stage]); };
  auto empty = [&](int stage) { return gemm::shared_address(&shared.empty[stage]); };

  int const tiles_m = gemm::ceil_div(m, kBM);
  int const tiles_n = gemm::ceil_div(n, kBN);
  int const tiles = tiles_m * tiles_n;
  int const k_tiles = gemm::ceil_div(k, kBK);
  int const warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(full(stage), 1);
      mbarrier_init(empty(stage), 4 * kConsumers);
    }
    fence_barrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    // --- producer ---------------------------------------------------------------------------
    release_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      // One walk around the ring for all of this block's tiles: the ring, and the barriers'
      // phases, run on from one output tile to the next.
      PipelineState<kStages> write;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int tile_m = 0;
        int tile_n = 0;
        gemm::grouped_tile(tile, tiles_m, tiles_n, kGroupM, tile_m, tile_n);
        for (int k_tile = 0; k_tile < k_tiles; ++k_tile, write.advance()) {
          mbarrier_wait(empty(write.stage), write.phase ^ 1);
          mbarrier_arrive_expect_bytes(full(write.stage), kStageBytes);
          tma_load_2d(a_tile(write.stage), &a_map, k_tile * kBK, tile_m * kBM, full(write.stage));
          for (int box = 0; box < kBN / kBoxN; ++box) {
            tma_load_2d(b_tile(write.stage) + box * kBBoxBytes, &b_map, tile_n * kBN + box * kBoxN,
                        k_tile * kBK, full(write.stage));
          }
        }
      }
    }
    return;
  }

  // --- consumers ----------------------------------------------------------------------------
  claim_registers<kConsumerRegisters>();
  int const consumer = warpgroup - 1;
  int const lane = threadIdx.x % 32;
  PipelineState<kStages> read;     // the same walk as the producer's
  PipelineState<kStages> release;  // one behind
  // TODO(student): the tiles this block computes: the same sequence the producer loads
  for (int tile = blockIdx.x; tile < tiles && tile < static_cast<int>(gridDim.x);
       tile += gridDim.x) {  // placeholder
                             // END TODO
    int tile_m = 0;
    int tile_n = 0;
    gemm::grouped_tile(tile, tiles_m, tiles_n, kGroupM, tile_m, tile_n);
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i)
      acc[i] = 0.0f;
    for (int k_tile = 0; k_tile < k_tiles; ++k_tile, read.advance()) {
      mbarrier_wait(full(read.stage), read.phase);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
        wgmma_m64n256k16_bf16(acc, a_descriptor(a_tile(read.stage), consumer, kk),
                              b_descriptor(b_tile(read.stage), kk));
      }
      wgmma_commit();
      wgmma_wait<1>();
      if (k_tile > 0) {
        if (lane == 0) mbarrier_arrive(empty(release.stage));
        release.advance();
      }
    }
    // The tile's last stage is handed back once its wgmma are done: the producer is already
    // filling the other stages with the next tile's k tiles while this epilogue runs.
    wgmma_wait<0>();
    if (lane == 0) mbarrier_arrive(empty(release.stage));
    release.advance();

    // Step 19's epilogue, from the tile's corner (common/wgmma.cuh).
    store_accumulators<kBN, kPairs>(C, ldc, m, n, alpha, beta, tile_m * kBM + consumer * 64,
                                    tile_n * kBN, acc);
  }
}

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B,
                     int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  long long const tiles = static_cast<long long>(ceil_div(m, kBM)) * ceil_div(n, kBN);
  if (tiles > 0x7fffffffLL) throw std::invalid_argument("bf16_gemm: too many tiles");
  // One block per SM (each needs 193 KB of shared memory, so one is all an SM holds), or one
  // per tile when there are fewer tiles than SMs.
  int const sms = multiprocessor_count();
  unsigned const blocks = static_cast<unsigned>(std::min<long long>(tiles, sms));
  AlignedOperand const a(A, m, k, lda, must_copy(A, lda), stream);
  AlignedOperand const b(B, k, n, ldb, must_copy(B, ldb), stream);
  CUtensorMap const a_map = make_bf16_tensor_map(a.data(), m, k, a.ld(), kBM, kBK);
  CUtensorMap const b_map = make_bf16_tensor_map(b.data(), k, n, b.ld(), kBK, kBoxN);
  bool const pairs = rows_are_aligned<4>(C, ldc);
  dispatch_bool(pairs, [&](auto kPairs) {
    constexpr auto kernel = persistent_kernel<kPairs()>;
    opt_in_shared_memory<kernel>(kSharedBytes);
    check_register_budgets<kernel>(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers);
    kernel<<<blocks, kThreads, kSharedBytes, stream>>>(a_map, b_map, m, n, k, alpha, beta, C, ldc);
  });
  check_launch("bf16_gemm");
}
