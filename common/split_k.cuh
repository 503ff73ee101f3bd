// Taught in step 25 (steps/25_split_k_tail/), which writes this code inline.
//
// The last round split along K: the cluster tiles that fill whole rounds of the persistent grid
// are done whole, one cluster per tile; the tiles left over are each cut into equal slices of K,
// one cluster per slice, and the slice that finishes last adds the partial sums up in slice
// order, so that C is bitwise the same on every run. Compiles only for sm_90a.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "tma_store.cuh"  // named_barrier_sync

namespace gemm::hopper {

// --- the schedule ------------------------------------------------------------------------------

// Which k tiles of which cluster tile each cluster computes. Cluster tiles 0 .. dp_tiles - 1 are
// done whole, tile t by cluster t % G (G clusters). Each of the tail_tiles tiles after them is cut
// into `splits` slices of K: slice j of tail tile r is done by cluster r x splits + j. Without a
// split, tail_tiles is 0 and splits 1.
struct Schedule {
  int clusters;    // G
  int k_tiles;     // k tiles per tile
  int dp_tiles;    // tiles done whole, by one cluster each
  int tail_tiles;  // R: tiles cut into slices
  int splits;      // s: slices per tail tile
};

// One piece of work: k tiles [k_begin, k_end) of cluster tile `tile`; `tail_tile` is the tile's
// index among the tail tiles for a slice, -1 for a whole tile.
struct Unit {
  int tile;
  int k_begin;
  int k_end;
  int tail_tile;
};

// The index-th unit of `cluster`, or false when it has no more: its data-parallel tiles first,
// then at most one slice. Producer and consumers walk the same list.
__device__ __forceinline__ bool unit_of(Schedule const& s, int cluster, int index, Unit& unit) {
  int const dp_units =
      cluster < s.dp_tiles ? (s.dp_tiles - cluster + s.clusters - 1) / s.clusters : 0;
  if (index < dp_units) {
    unit = {cluster + index * s.clusters, 0, s.k_tiles, -1};
    return true;
  }
  if (index > dp_units || cluster >= s.tail_tiles * s.splits) return false;
  int const r = cluster / s.splits;
  int const j = cluster % s.splits;
  unit = {s.dp_tiles + r, j * s.k_tiles / s.splits, (j + 1) * s.k_tiles / s.splits, r};
  return true;
}

// A slice shorter than this many k tiles would spend more on handing its partial sums on than it
// saves.
constexpr int kMinSliceKTiles = 4;

// What a split costs beyond its share of the work, in k tiles: the writes of a slice's partial
// sums, the reads of every slice by the one that finishes last, and its epilogue after them.
// 8 k tiles fitted the shapes measured on the H100.
constexpr double kSplitOverheadKTiles = 8.0;

// The time of a schedule in rounds (one tile's k loop on every cluster): the data-parallel rounds,
// plus a round of 1 / splits of the k loop and the split's overhead if there is a tail.
inline double rounds(Schedule const& s) {
  if (s.tail_tiles == 0) return (s.dp_tiles + s.clusters - 1) / s.clusters;
  return static_cast<double>(s.dp_tiles) / s.clusters + 1.0 / s.splits +
         kSplitOverheadKTiles / s.k_tiles;
}

// How `tiles` cluster tiles of `k_tiles` k tiles each are shared among `clusters` resident
// clusters: the tiles that fill whole rounds data-parallel, and the rest split along K where the
// model says that is faster than a last round of whole tiles.
inline Schedule make_schedule(long long tiles, int k_tiles, int clusters) {
  Schedule const data_parallel{static_cast<int>(std::min<long long>(tiles, clusters)), k_tiles,
                               static_cast<int>(tiles), 0, 1};
  int const left_over = static_cast<int>(tiles % clusters);
  if (left_over == 0) return data_parallel;
  int const splits = std::min(clusters / left_over, k_tiles / kMinSliceKTiles);
  if (splits < 2) return data_parallel;
  Schedule const split{clusters, k_tiles, static_cast<int>(tiles - left_over), left_over, splits};
  return rounds(split) < rounds(data_parallel) ? split : data_parallel;
}

// --- the hand-over -----------------------------------------------------------------------------

// Counts one more finished slice on a tail tile's counter and returns how many had finished
// before. The thread that calls it has just passed a named barrier with its warpgroup, after the
// warpgroup stored its partial sums: the first fence makes those stores visible at GPU scope
// before the count; the second makes what the other slices stored before their counts visible
// to this warpgroup's loads after its next named barrier (CUTLASS's generic barrier works the
// same way).
__device__ __forceinline__ int count_finished_slice(int* counter) {
  int before = 0;
  asm volatile(
      "fence.acq_rel.gpu;\n"
      "atom.relaxed.gpu.global.add.s32 %0, [%1], 1;\n"
      "fence.acq_rel.gpu;\n"
      : "=r"(before)
      : "l"(counter)
      : "memory");
  return before;
}

// The slot of partial sums of warpgroup `slot` (numbered over cluster, block and consumer): kFloats
// floats per thread, stored as float4s, the i-th float4 of every thread side by side, so that a
// warp's 16-byte stores and loads cover 512 contiguous bytes.
template <int kFloats>
__device__ __forceinline__ float4* partial_slot(float* partials, std::size_t slot) {
  return reinterpret_cast<float4*>(partials + slot * 128 * kFloats);
}

// Stores the warpgroup's partial sums to slot `slot`, laid out as partial_slot says.
template <int kFloats>
__device__ __forceinline__ void store_partial_sums(float* partials, std::size_t slot,
                                                   float const (&acc)[kFloats]) {
  int const thread = threadIdx.x % 128;
  float4* const out = partial_slot<kFloats>(partials, slot);
#pragma unroll
  for (int i = 0; i < kFloats / 4; ++i) {
    __stcg(out + i * 128 + thread,
           make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
  }
}

// A slice of a tail tile is done: store the warpgroup's partial sums to slot `own_slot` and count
// the slice on `counter`. Returns true in the warpgroup of the last slice to finish, with acc then
// holding the whole tile's sums, added in slice order from slots first_slot, first_slot +
// slot_stride, ... (own slot included, so that the sum is the same expression whoever adds it
// up); false in the others, which have nothing more to do for this tile. `last_slice` is a shared
// int of the warpgroup's, `barrier_id` its named barrier. With kResetCounter the last slice sets
// the counter back to 0 once it has counted, which leaves it ready for the next kernel (step 36).
template <int kFloats, bool kResetCounter = false>
__device__ __forceinline__ bool reduce_tail_slices(float* partials, std::size_t own_slot,
                                                   std::size_t first_slot, std::size_t slot_stride,
                                                   int splits, int* counter, int& last_slice,
                                                   int barrier_id, float (&acc)[kFloats]) {
  int const thread = threadIdx.x % 128;
  store_partial_sums<kFloats>(partials, own_slot, acc);
  named_barrier_sync(barrier_id, 128);
  if (thread == 0) {
    bool const last = count_finished_slice(counter) == splits - 1;
    if (kResetCounter && last) atomicExch(counter, 0);  // no slice counts on it any more
    last_slice = last;
  }
  named_barrier_sync(barrier_id, 128);
  if (!last_slice) return false;
  float4 const* const first = partial_slot<kFloats>(partials, first_slot);
#pragma unroll
  for (int i = 0; i < kFloats / 4; ++i) {
    float4 const part = __ldcg(first + i * 128 + thread);
    acc[4 * i] = part.x;
    acc[4 * i + 1] = part.y;
    acc[4 * i + 2] = part.z;
    acc[4 * i + 3] = part.w;
  }
  for (int j = 1; j < splits; ++j) {
    float4 const* const in = partial_slot<kFloats>(partials, first_slot + j * slot_stride);
#pragma unroll
    for (int i = 0; i < kFloats / 4; ++i) {
      float4 const part = __ldcg(in + i * 128 + thread);
      acc[4 * i] += part.x;
      acc[4 * i + 1] += part.y;
      acc[4 * i + 2] += part.z;
      acc[4 * i + 3] += part.w;
    }
  }
  return true;
}

}  // namespace gemm::hopper
