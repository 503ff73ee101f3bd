// Demo: how fast TMA brings a tile of A into shared memory, by the row pitch and by how many boxes
// the tile is cut into (steps/47_half_boxes_off_pitch/README.md).
//
// A tile is R rows of 64 bf16 (128 bytes a row, 128-byte swizzle), loaded as P boxes of R / P rows
// each, from a matrix whose row pitch is 8,192 bytes (lda 4096: every row starts on a 128-byte
// line) or 8,208 bytes (lda 4104: most rows straddle two lines). The L2 promotion is the one the
// steps from 37 on set: 256 bytes at the aligned pitch, 128 at the other. Three measurements:
//
//   latency      one block, one thread, 256 tiles one after the other: cycles (clock64) from the
//                first load's issue to the barrier's completion, for the tile's first load (cold)
//                and for the same tile again (warm, from the L2); medians, and the warm 10th
//                percentile
//   throughput   132 blocks of one thread, each streaming 8 x 64 tiles through a ring of 4 stages:
//                GB/s of box bytes, with the tile rows drawn from 8 (they stay in the L2) or from
//                132 (mostly from DRAM)
//   producer     the GEMM's producer without the math: clusters of two, each block loading its own
//                A tile (1 or 2 boxes) and its share of B's three 64 x 64 boxes, multicast to both
//                blocks; a stage is refilled once both blocks have seen it full; 1,024 k tiles per
//                block; GB/s of A and B bytes landed
//
//   build/demo_tma_box_probe
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "async_copy.cuh"  // gemm::shared_address
#include "cluster.cuh"
#include "cuda_check.h"
#include "mbarrier.cuh"
#include "tensor_map.h"
#include "timer.h"
#include "tma.cuh"

namespace {

using namespace gemm::hopper;
using gemm::shared_address;

constexpr int kStages = 4;      // the ring of the two streaming kernels
constexpr int kRowBytes = 128;  // 64 bf16
constexpr int kBBoxes = 3;      // B's boxes per stage in the producer kernel (three consumers)
constexpr int kBBoxBytes = 64 * kRowBytes;

// Issues the P boxes of one tile: rows first_row .. + tile_rows - 1, columns k0 .. k0 + 63.
__device__ __forceinline__ void load_tile(std::uint32_t destination, CUtensorMap const* map,
                                          int tile_rows, int pieces, int k0, int first_row,
                                          std::uint32_t barrier) {
  int const box_rows = tile_rows / pieces;
  for (int piece = 0; piece < pieces; ++piece) {
    tma_load_2d(destination + piece * box_rows * kRowBytes, map, k0, first_row + piece * box_rows,
                barrier);
  }
}

__global__ void latency_kernel(const __grid_constant__ CUtensorMap map, int tile_rows, int pieces,
                               int tiles, long long* cycles) {
  extern __shared__ __align__(1024) unsigned char shared[];
  __shared__ alignas(8) std::uint64_t full;
  if (threadIdx.x != 0) return;
  std::uint32_t const barrier = shared_address(&full);
  mbarrier_init(barrier, 1);
  fence_barrier_init();
  std::uint32_t const tile = (shared_address(shared) + 1023) & ~1023u;
  unsigned phase = 0;
  for (int t = 0; t < tiles; ++t) {
    for (int pass = 0; pass < 2; ++pass) {  // cold, then warm
      long long const start = clock64();
      mbarrier_arrive_expect_bytes(barrier, tile_rows * kRowBytes);
      load_tile(tile, &map, tile_rows, pieces, (t % 64) * 64, (t / 64) * tile_rows, barrier);
      mbarrier_wait(barrier, phase);
      phase ^= 1;
      cycles[2 * t + pass] = clock64() - start;
    }
  }
}

__global__ void throughput_kernel(const __grid_constant__ CUtensorMap map, int tile_rows,
                                  int pieces, int groups, int distinct_rows) {
  extern __shared__ __align__(1024) unsigned char shared[];
  __shared__ alignas(8) std::uint64_t full[kStages];
  if (threadIdx.x != 0) return;
  for (int stage = 0; stage < kStages; ++stage)
    mbarrier_init(shared_address(&full[stage]), 1);
  fence_barrier_init();
  std::uint32_t const ring = (shared_address(shared) + 1023) & ~1023u;
  int const stage_bytes = tile_rows * kRowBytes;
  int issued = 0;
  for (int group = 0; group < groups; ++group) {
    int const first_row = ((group * 7 + blockIdx.x) % distinct_rows) * tile_rows;
    for (int k_tile = 0; k_tile < 64; ++k_tile, ++issued) {
      int const stage = issued % kStages;
      std::uint32_t const barrier = shared_address(&full[stage]);
      if (issued >= kStages) mbarrier_wait(barrier, ((issued / kStages) - 1) & 1);
      mbarrier_arrive_expect_bytes(barrier, stage_bytes);
      load_tile(ring + stage * stage_bytes, &map, tile_rows, pieces, k_tile * 64, first_row,
                barrier);
    }
  }
  for (int last = issued; last < issued + kStages; ++last) {  // the ring's last loads
    if (last >= kStages) {
      mbarrier_wait(shared_address(&full[last % kStages]), ((last / kStages) - 1) & 1);
    }
  }
}

__global__ void __cluster_dims__(2, 1, 1)
    producer_kernel(const __grid_constant__ CUtensorMap a_map,
                    const __grid_constant__ CUtensorMap b_map, int tile_rows, int pieces,
                    int k_tiles, int distinct_rows) {
  extern __shared__ __align__(1024) unsigned char shared[];
  __shared__ alignas(8) std::uint64_t full[kStages];
  __shared__ alignas(8) std::uint64_t empty[kStages];
  unsigned const rank = cluster_block_rank();
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(shared_address(&full[stage]), 1);
      mbarrier_init(shared_address(&empty[stage]), 2);  // both blocks hand the stage back
    }
    fence_barrier_init();
  }
  cluster_arrive_relaxed();  // the partner's barriers exist before any multicast lands there
  cluster_wait();
  if (threadIdx.x == 0) {
    std::uint32_t const ring = (shared_address(shared) + 1023) & ~1023u;
    int const a_bytes = tile_rows * kRowBytes;
    int const stage_bytes = a_bytes + kBBoxes * kBBoxBytes;
    int const cluster = static_cast<int>(blockIdx.x) / 2;
    int const a_row = ((cluster * 2 + static_cast<int>(rank)) % distinct_rows) * tile_rows;
    int const b_col = (cluster % 16) * kBBoxes * 64;
    // One thread plays producer and consumer: it issues k tile i, then waits for k tile
    // i - (kStages - 1) and hands that stage back to both blocks.
    for (int i = 0; i < k_tiles + kStages; ++i) {
      if (i < k_tiles) {
        int const stage = i % kStages;
        if (i >= kStages) mbarrier_wait(shared_address(&empty[stage]), ((i / kStages) - 1) & 1);
        std::uint32_t const destination = ring + stage * stage_bytes;
        std::uint32_t const barrier = shared_address(&full[stage]);
        mbarrier_arrive_expect_bytes(barrier, stage_bytes);
        int const k0 = (i % 64) * 64;
        load_tile(destination, &a_map, tile_rows, pieces, k0, a_row, barrier);
        for (int box = static_cast<int>(rank); box < kBBoxes; box += 2) {
          tma_load_2d_multicast(destination + a_bytes + box * kBBoxBytes, &b_map, b_col + box * 64,
                                k0, barrier, 0b11);
        }
      }
      int const done = i - (kStages - 1);
      if (done >= 0 && done < k_tiles) {
        int const stage = done % kStages;
        mbarrier_wait(shared_address(&full[stage]), (done / kStages) & 1);
        mbarrier_arrive(shared_address(&empty[stage]));
        mbarrier_arrive_cluster(shared_address(&empty[stage]), rank ^ 1);
      }
    }
  }
  cluster_arrive_relaxed();  // no block leaves while its partner's loads may still land in it
  cluster_wait();
}

CUtensorMapL2promotion promotion_for(int ld) {
  return ld * 2 % 128 == 0 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                           : CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
}

struct Cut {
  int tile_rows;
  int pieces;
};

}  // namespace

int main() {
  int const rows = 32768;
  int const lds[] = {4096, 4104};
  int const distinct[] = {8, 132};
  int const tiles = 256;
  gemm::check_cuda(
      cudaFuncSetAttribute(latency_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024),
      "cudaFuncSetAttribute");
  gemm::check_cuda(cudaFuncSetAttribute(throughput_kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024),
                   "cudaFuncSetAttribute");
  gemm::check_cuda(cudaFuncSetAttribute(producer_kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, 220 * 1024),
                   "cudaFuncSetAttribute");
  gemm::EventTimer timer(nullptr);  // the default stream, where every launch below goes
  long long* cycles = nullptr;
  gemm::check_cuda(cudaMalloc(&cycles, 2 * tiles * sizeof(long long)), "cudaMalloc");
  void* flush = nullptr;  // 256 MB written before each latency run, to empty the L2
  gemm::check_cuda(cudaMalloc(&flush, 256 << 20), "cudaMalloc");

  std::printf(
      "pitch_bytes tile_rows pieces box_rows | latency cycles: cold median, warm median, "
      "warm p10 | throughput: 132 blocks, GB/s (tile rows from 8 distinct, L2-resident; "
      "from 132, mostly DRAM)\n");
  std::vector<Cut> const cuts = {{176, 1}, {176, 2}, {176, 11}, {256, 1},
                                 {256, 2}, {256, 4}, {128, 1},  {64, 1}};
  for (int ld : lds) {
    __nv_bfloat16* A = nullptr;
    std::size_t const a_bytes = static_cast<std::size_t>(rows) * ld * 2;
    gemm::check_cuda(cudaMalloc(&A, a_bytes), "cudaMalloc");
    gemm::check_cuda(cudaMemset(A, 0, a_bytes), "cudaMemset");
    for (Cut const cut : cuts) {
      int const box_rows = cut.tile_rows / cut.pieces;
      CUtensorMap const map =
          gemm::make_bf16_tensor_map(A, rows, 4096, ld, box_rows, 64, promotion_for(ld));
      gemm::check_cuda(cudaMemset(flush, 1, 256 << 20), "cudaMemset");
      latency_kernel<<<1, 32, 64 * 1024>>>(map, cut.tile_rows, cut.pieces, tiles, cycles);
      std::vector<long long> measured(2 * tiles);
      gemm::check_cuda(cudaMemcpy(measured.data(), cycles, measured.size() * sizeof(long long),
                                  cudaMemcpyDeviceToHost),
                       "latency_kernel");
      std::vector<long long> cold;
      std::vector<long long> warm;
      for (int t = 0; t < tiles; ++t) {
        cold.push_back(measured[2 * t]);
        warm.push_back(measured[2 * t + 1]);
      }
      std::sort(cold.begin(), cold.end());
      std::sort(warm.begin(), warm.end());
      double gb_per_s[2] = {};
      for (int i = 0; i < 2; ++i) {
        int const groups = 8;
        double const ms = gemm::median_time_ms(
            timer,
            [&] {
              throughput_kernel<<<132, 32, kStages * cut.tile_rows * kRowBytes + 1024>>>(
                  map, cut.tile_rows, cut.pieces, groups, distinct[i]);
            },
            /*warmup=*/0, /*repeats=*/7);
        double const bytes = 132.0 * groups * 64 * cut.tile_rows * kRowBytes;
        gb_per_s[i] = bytes / (ms * 1e-3) / 1e9;
      }
      std::printf("%5d %4d %3d %4d | %7lld %7lld %7lld | %8.0f %8.0f\n", ld * 2, cut.tile_rows,
                  cut.pieces, box_rows, cold[tiles / 2], warm[tiles / 2], warm[tiles / 10],
                  gb_per_s[0], gb_per_s[1]);
    }
    gemm::check_cuda(cudaFree(A), "cudaFree");
  }

  std::printf(
      "\nGEMM producer pattern (clusters of 2, A own + 3 B boxes multicast), 132 blocks, "
      "1024 k tiles each: GB/s landed (A and B), tile rows from 8 distinct / from 132\n");
  std::vector<Cut> const producer_cuts = {{176, 1}, {176, 2}, {192, 1},
                                          {192, 2}, {128, 1}, {128, 2}};
  for (int ld : lds) {
    __nv_bfloat16* A = nullptr;
    __nv_bfloat16* B = nullptr;
    std::size_t const a_bytes = static_cast<std::size_t>(rows) * ld * 2;
    std::size_t const b_bytes = static_cast<std::size_t>(4096) * ld * 2;
    gemm::check_cuda(cudaMalloc(&A, a_bytes), "cudaMalloc");
    gemm::check_cuda(cudaMalloc(&B, b_bytes), "cudaMalloc");
    gemm::check_cuda(cudaMemset(A, 0, a_bytes), "cudaMemset");
    gemm::check_cuda(cudaMemset(B, 0, b_bytes), "cudaMemset");
    CUtensorMap const b_map =
        gemm::make_bf16_tensor_map(B, 4096, 4096, ld, 64, 64, promotion_for(ld));
    for (Cut const cut : producer_cuts) {
      int const box_rows = cut.tile_rows / cut.pieces;
      CUtensorMap const a_map =
          gemm::make_bf16_tensor_map(A, rows, 4096, ld, box_rows, 64, promotion_for(ld));
      double gb_per_s[2] = {};
      for (int i = 0; i < 2; ++i) {
        int const k_tiles = 1024;
        int const stage_bytes = cut.tile_rows * kRowBytes + kBBoxes * kBBoxBytes;
        double const ms = gemm::median_time_ms(
            timer,
            [&] {
              producer_kernel<<<132, 32, kStages * stage_bytes + 1024>>>(
                  a_map, b_map, cut.tile_rows, cut.pieces, k_tiles, distinct[i]);
            },
            /*warmup=*/0, /*repeats=*/7);
        gb_per_s[i] = 132.0 * k_tiles * stage_bytes / (ms * 1e-3) / 1e9;
      }
      std::printf("%5d %4d %3d %4d | %8.0f %8.0f\n", ld * 2, cut.tile_rows, cut.pieces, box_rows,
                  gb_per_s[0], gb_per_s[1]);
    }
    gemm::check_cuda(cudaFree(A), "cudaFree");
    gemm::check_cuda(cudaFree(B), "cudaFree");
  }
  gemm::check_cuda(cudaFree(cycles), "cudaFree");
  gemm::check_cuda(cudaFree(flush), "cudaFree");
  return 0;
}
