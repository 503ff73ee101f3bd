// Exercise for step 11: the tuned kernel. Read README.md and the header of tuned.cu (the
// solution, beside this file) first.
//
// Three TODO(student) blocks: the pointer advance of the tile copier, the grouped block order,
// and the wave model that decides on split-K. Fill them in, then build and check your kernel:
//   meson setup build -Dexercises=true   (or: meson configure build -Dexercises=true)
//   meson test -C build exercise_11_tuned --print-errorlogs   the shared GPU suite
//   build/exercise_11_tuned 4096 4097                           time it against cuBLAS
// The suite fails until the first two blocks are right. The third only changes speed (every
// number of splits gives a correct C): compare your 4097^3 time with build/11_tuned's.
// The solution is tuned.cu, beside this file.

#include <algorithm>
#include <stdexcept>
#include <string>

#include "async_copy.cuh"
#include "cuda_check.h"
#include "device_helpers.cuh"
#include "gemm.h"

namespace tuned {

using gemm::ceil_div;

// One block tile configuration. Derived sizes are spelled out with what they come to for the
// configuration the launcher uses (64 x 128 x 16, warps 32 x 64, 4 x 8 lanes, 4 stages).
template <int kBM_, int kBN_, int kBK_, int kWM_, int kWN_, int kLanesM_, int kStages_,
          int kMinBlocksPerSM_>
struct TileConfig {
  static constexpr int kBM = kBM_;  // block tile rows (M)
  static constexpr int kBN = kBN_;  // block tile columns (N)
  static constexpr int kBK = kBK_;  // depth of one k tile
  static constexpr int kWM = kWM_;  // warp tile rows
  static constexpr int kWN = kWN_;  // warp tile columns
  static constexpr int kStages = kStages_;
  static constexpr int kMinBlocksPerSM = kMinBlocksPerSM_;

  static constexpr int kWarpsM = kBM / kWM;                // 2
  static constexpr int kWarpsN = kBN / kWN;                // 2
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;  // 128
  // Lanes of a warp as a kLanesM x kLanesN grid; each lane owns 4 x 4 sub-tiles spread over
  // the warp tile, so that a warp's 16-byte fragment loads touch contiguous shared memory.
  static constexpr int kLanesM = kLanesM_;            // 4
  static constexpr int kLanesN = 32 / kLanesM;        // 8
  static constexpr int kIterM = kWM / (4 * kLanesM);  // 2 sub-tiles down
  static constexpr int kIterN = kWN / (4 * kLanesN);  // 2 sub-tiles across
  static constexpr int kTM = 4 * kIterM;              // 8 rows of C per thread
  static constexpr int kTN = 4 * kIterN;              // 8 columns of C per thread

  // Shared memory per stage: A transposed (k-major, so a thread's column of A is contiguous)
  // with 4 floats of padding per row that spread the transposing writes over all 32 banks;
  // B as it is in memory.
  static constexpr int kAStride = kBM + 4;
  static constexpr int kBStride = kBN;
  static constexpr int kStageFloats = kBK * (kAStride + kBStride);
  static constexpr int kSharedBytes = kStages * kStageFloats * static_cast<int>(sizeof(float));

  static_assert(kBM % kWM == 0 && kBN % kWN == 0, "warp tiles must cover the block tile");
  static_assert(32 % kLanesM == 0, "lanes must form a grid");
  static_assert(kWM % (4 * kLanesM) == 0 && kWN % (4 * kLanesN) == 0,
                "warp tile must be a whole number of 4 x 4 sub-tiles per lane");
  static_assert(kBK % 8 == 0, "A tiles are copied in groups of 8 k (one 32-byte sector per row)");
  static_assert((kBM * kBK) % kThreads == 0, "A tile copies must divide evenly among threads");
  static_assert((kBK * kBN / 4) % kThreads == 0, "B tile copies must divide evenly among threads");
  static_assert(kStages >= 2, "a pipeline needs at least two stages");
};

// The cp.async copies of one thread, with everything that does not change from one k tile to
// the next worked out once: source pointers, which copies fall outside B, shared-memory
// offsets. Per k tile a copy then costs one LDGSTS and a pointer increment.
//
// A (kBM x kBK per tile) is copied 4 bytes at a time and transposed: element (r, c) of the
// tile goes to As[c][r]. A warp copies 4 rows x 8 consecutive k, one 32-byte sector per row,
// and its 32 shared-memory writes hit 32 different banks (bank = (4 c + r) % 32, thanks to
// the padding of 4 floats per row of As). Rows past the bottom of A are CLAMPED to the last
// row instead of predicated: they only feed rows of C that are never stored.
//
// B (kBK x kBN per tile) is copied 16 bytes at a time when its rows are 16-byte aligned, else
// 4 bytes at a time. Columns past the right edge of B are zero-filled by the copy (src size
// < 16), since a row of B may end exactly at n.
template <class Cfg, bool kAlignedB>
struct TileCopier {
  static constexpr int kARowsPerPass = Cfg::kThreads / 8;            // 16 rows per pass
  static constexpr int kAPassesPerGroup = Cfg::kBM / kARowsPerPass;  // passes per 8 k columns
  static constexpr int kAGroups = Cfg::kBK / 8;                      // groups of 8 k columns
  static constexpr int kBVectorsPerRow = Cfg::kBN / 4;
  static constexpr int kBRowsPerPass =
      kAlignedB ? Cfg::kThreads / kBVectorsPerRow : Cfg::kThreads / Cfg::kBN;
  static constexpr int kBPasses = Cfg::kBK / kBRowsPerPass;
  static_assert(Cfg::kBM % kARowsPerPass == 0, "A copy passes must tile kBM");
  static_assert(Cfg::kBK % kBRowsPerPass == 0, "B copy passes must tile kBK");

  float const* a_src[kAPassesPerGroup];  // row of pass j, at column a_col of the current tile
  float const* b_src;                    // first row of this thread's B copies
  float const* a_origin;                 // valid addresses for the zero-filling copies of the
  float const* b_origin;                 // K tail (the sources may point past the matrix there)
  std::size_t b_pass_step;               // elements between passes: kBRowsPerPass rows of B
  int a_col;                             // k offset of this thread's A copies within a group
  int a_row;                             // tile row of pass 0
  int b_row;                             // tile row of pass 0
  int b_col;                             // tile column of this thread's B copies
  int b_bytes;                           // bytes of the B copy inside B (16, 4, or fewer)

  __device__ TileCopier(float const* A, int lda, float const* B, int ldb, int m, int n,
                        int block_row, int block_col, int k_begin, int tid) {
    a_origin = A;
    b_origin = B;
    a_col = tid % 8;
    a_row = tid / 8;
#pragma unroll
    for (int j = 0; j < kAPassesPerGroup; ++j) {
      int const row = min(block_row + a_row + j * kARowsPerPass, m - 1);  // clamped, see above
      a_src[j] = A + static_cast<std::size_t>(row) * lda + k_begin + a_col;
    }
    if constexpr (kAlignedB) {
      b_row = tid / kBVectorsPerRow;
      b_col = (tid % kBVectorsPerRow) * 4;
      b_bytes = 4 * max(0, min(4, n - (block_col + b_col)));
    } else {
      b_row = tid / Cfg::kBN;
      b_col = tid % Cfg::kBN;
      b_bytes = block_col + b_col < n ? 4 : 0;
    }
    // A zero-byte copy still needs a valid source address: point those at B itself.
    b_src =
        b_bytes > 0 ? B + static_cast<std::size_t>(k_begin + b_row) * ldb + block_col + b_col : B;
    b_pass_step = b_bytes > 0 ? static_cast<std::size_t>(kBRowsPerPass) * ldb : 0;
  }

  // Starts the copies of the next k tile into As/Bs and moves the sources one tile down K.
  // kFullTile: all kBK columns of the tile lie before k_end (every tile but the last one),
  // so no K check is needed; `k_left` is how many do otherwise.
  template <bool kFullTile>
  __device__ __forceinline__ void copy_and_advance(float* As, float* Bs, int k_left, int ldb) {
#pragma unroll
    for (int g = 0; g < kAGroups; ++g) {
      bool const k_ok = kFullTile || g * 8 + a_col < k_left;
#pragma unroll
      for (int j = 0; j < kAPassesPerGroup; ++j) {
        gemm::cp_async_4(&As[(g * 8 + a_col) * Cfg::kAStride + a_row + j * kARowsPerPass],
                         k_ok ? a_src[j] + g * 8 : a_origin, k_ok);
      }
    }
#pragma unroll
    for (int p = 0; p < kBPasses; ++p) {
      int const r = b_row + p * kBRowsPerPass;
      bool const k_ok = kFullTile || r < k_left;
      float const* src = b_src + p * b_pass_step;
      float* dst = &Bs[r * Cfg::kBStride + b_col];
      if constexpr (kAlignedB) {
        gemm::cp_async_16(dst, k_ok ? src : b_origin, k_ok ? b_bytes : 0);
      } else {
        gemm::cp_async_4(dst, k_ok ? src : b_origin, k_ok && b_bytes > 0);
      }
    }
    // TODO(student): move this thread's sources one k tile (Cfg::kBK) down K, ready for the
    // next call. Each a_src[j] points into a row of A, where consecutive k are consecutive
    // floats; b_src points at the first row of this thread's B copies, where consecutive k are
    // rows, ldb floats apart (do that product in std::size_t, like every row offset here).
    // Pitfall: a thread whose B column lies right of the matrix (b_bytes == 0) has b_src
    // pointing at B itself, only because even a zero-byte cp.async needs a valid source
    // address. Its b_src must stay there: advanced, it would walk off the end of B.
    (void)ldb;
    // END TODO
  }
};

// Maps a linear tile index to (tile_m, tile_n) in groups of `group_m` block rows: the blocks
// running at the same time cover a compact patch of C, so they reuse A and B panels in L2.
__device__ __forceinline__ void grouped_tile(int tile, int tiles_m, int tiles_n, int group_m,
                                             int& tile_m, int& tile_n) {
  // TODO(student): map the linear block index `tile` (0 .. tiles_m * tiles_n - 1) to the block
  // tile (tile_m, tile_n) it computes. The block rows are cut into groups of group_m; inside
  // a group, consecutive indices walk DOWN the group's rows first, then move one block column
  // right; the next group starts after all tiles_n columns of this one. The blocks resident at
  // the same time then cover a patch about group_m tall, and share its A and B panels in L2.
  // Pitfall: when tiles_m is not a multiple of group_m, the last group is shorter (4097 rows:
  // 65 block rows, 8 groups of 8 and one of 1), and every tile must still come out exactly
  // once: the walk down a column wraps after the rows the group really has.
  tile_m = 0;
  tile_n = 0;
  (void)tile, (void)tiles_m, (void)tiles_n, (void)group_m;
  // END TODO
}

// grid.x: tiles (grouped order), grid.y: K splits. With more than one split, each block adds
// alpha * (its partial product) into C atomically; C was scaled by beta beforehand.
template <class Cfg, bool kAlignedB, bool kAlignedC>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSM)
    tuned_sgemm_kernel(int m, int n, int k, float alpha, float const* __restrict__ A, int lda,
                       float const* __restrict__ B, int ldb, float beta, float* __restrict__ C,
                       int ldc, int tiles_m, int tiles_n, int group_m, int k_per_split) {
  extern __shared__ float4 shared_storage[];  // float4: 16-byte alignment for cp.async
  float* const shared = reinterpret_cast<float*>(shared_storage);

  int tile_m, tile_n;
  grouped_tile(blockIdx.x, tiles_m, tiles_n, group_m, tile_m, tile_n);
  int const block_row = tile_m * Cfg::kBM;
  int const block_col = tile_n * Cfg::kBN;
  int const k_begin = blockIdx.y * k_per_split;
  int const k_end = min(k, k_begin + k_per_split);
  int const k_tiles = ceil_div(k_end - k_begin, Cfg::kBK);

  int const tid = threadIdx.x;
  int const warp = tid / 32;
  int const lane = tid % 32;
  int const warp_row = (warp / Cfg::kWarpsN) * Cfg::kWM;  // warp tile origin in the block tile
  int const warp_col = (warp % Cfg::kWarpsN) * Cfg::kWN;
  int const lane_row = (lane / Cfg::kLanesN) * 4;  // lane's first 4 x 4 sub-tile in the warp tile
  int const lane_col = (lane % Cfg::kLanesN) * 4;

  auto stage_a = [&](int stage) { return shared + stage * Cfg::kStageFloats; };
  auto stage_b = [&](int stage) {
    return shared + stage * Cfg::kStageFloats + Cfg::kBK * Cfg::kAStride;
  };
  TileCopier<Cfg, kAlignedB> copier(A, lda, B, ldb, m, n, block_row, block_col, k_begin, tid);
  int tiles_started = 0;
  int write_stage = 0;
  auto start_next_tile = [&] {
    int const k_left = k_end - (k_begin + tiles_started * Cfg::kBK);
    if (k_left >= Cfg::kBK) {
      copier.template copy_and_advance<true>(stage_a(write_stage), stage_b(write_stage), k_left,
                                             ldb);
    } else {
      copier.template copy_and_advance<false>(stage_a(write_stage), stage_b(write_stage), k_left,
                                              ldb);
    }
    ++tiles_started;
    write_stage = write_stage + 1 == Cfg::kStages ? 0 : write_stage + 1;
  };

  // Prologue: start kStages - 1 tiles. Every iteration commits exactly one group (empty ones
  // past the end), so "wait until kStages - 2 groups are in flight" always means "the oldest
  // tile has landed".
#pragma unroll
  for (int s = 0; s < Cfg::kStages - 1; ++s) {
    if (s < k_tiles) start_next_tile();
    gemm::cp_async_commit();
  }

  // Fragments are double-buffered in registers: the loads for step kk + 1 are issued before
  // the FMAs of step kk, so shared-memory latency hides behind 64 FMAs.
  float acc[Cfg::kTM][Cfg::kTN] = {};
  float a[2][Cfg::kTM];
  float b[2][Cfg::kTN];
  auto load_fragments = [&](float const* As, float const* Bs, int kk, int buffer) {
#pragma unroll
    for (int im = 0; im < Cfg::kIterM; ++im) {
      float4 const v = *reinterpret_cast<float4 const*>(
          &As[kk * Cfg::kAStride + warp_row + im * 4 * Cfg::kLanesM + lane_row]);
      a[buffer][4 * im + 0] = v.x;
      a[buffer][4 * im + 1] = v.y;
      a[buffer][4 * im + 2] = v.z;
      a[buffer][4 * im + 3] = v.w;
    }
#pragma unroll
    for (int in = 0; in < Cfg::kIterN; ++in) {
      float4 const v = *reinterpret_cast<float4 const*>(
          &Bs[kk * Cfg::kBStride + warp_col + in * 4 * Cfg::kLanesN + lane_col]);
      b[buffer][4 * in + 0] = v.x;
      b[buffer][4 * in + 1] = v.y;
      b[buffer][4 * in + 2] = v.z;
      b[buffer][4 * in + 3] = v.w;
    }
  };

  int read_stage = 0;
  for (int t = 0; t < k_tiles; ++t) {
    gemm::cp_async_wait<Cfg::kStages - 2>();
    // Tile t is in shared memory for everyone, and everyone has finished tile t - 1, whose
    // stage the next copy overwrites.
    __syncthreads();
    if (tiles_started < k_tiles) start_next_tile();
    gemm::cp_async_commit();

    float const* As = stage_a(read_stage);
    float const* Bs = stage_b(read_stage);
    load_fragments(As, Bs, 0, 0);
#pragma unroll
    for (int kk = 0; kk < Cfg::kBK; ++kk) {
      if (kk + 1 < Cfg::kBK) load_fragments(As, Bs, kk + 1, (kk + 1) % 2);
#pragma unroll
      for (int i = 0; i < Cfg::kTM; ++i) {
#pragma unroll
        for (int j = 0; j < Cfg::kTN; ++j)
          acc[i][j] = fmaf(a[kk % 2][i], b[kk % 2][j], acc[i][j]);
      }
    }
    read_stage = read_stage + 1 == Cfg::kStages ? 0 : read_stage + 1;
  }
  gemm::cp_async_wait<0>();  // no copy may still target shared memory when the block exits

  bool const split_k = gridDim.y > 1;
#pragma unroll
  for (int im = 0; im < Cfg::kIterM; ++im) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int const row = block_row + warp_row + im * 4 * Cfg::kLanesM + lane_row + i;
      if (row >= m) continue;
      float* const c_row = C + static_cast<size_t>(row) * ldc;
#pragma unroll
      for (int in = 0; in < Cfg::kIterN; ++in) {
        int const col = block_col + warp_col + in * 4 * Cfg::kLanesN + lane_col;
        float const* v = &acc[4 * im + i][4 * in];
        if (split_k) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            if (col + j < n) atomicAdd(c_row + col + j, alpha * v[j]);
          }
        } else {
          gemm::store_scaled_float4<kAlignedC>(c_row, col, n, make_float4(v[0], v[1], v[2], v[3]),
                                               alpha, beta);
        }
      }
    }
  }
}

// C = beta * C (C = 0 when beta == 0, without reading C): the first half of split-K.
__global__ void scale_c_kernel(int m, int n, float beta, float* C, int ldc) {
  int const col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= n) return;
  for (int row = blockIdx.y; row < m; row += gridDim.y) {
    float* const c = C + static_cast<size_t>(row) * ldc + col;
    *c = beta == 0.0f ? 0.0f : beta * *c;
  }
}

// How one call is launched: which configuration, how many K splits, which group size.
struct LaunchPlan {
  int splits = 1;
  int group_m = 8;
};

template <class Cfg, bool kAlignedB, bool kAlignedC>
void launch_variant(LaunchPlan const& plan, int m, int n, int k, float alpha, float const* A,
                    int lda, float const* B, int ldb, float beta, float* C, int ldc,
                    cudaStream_t stream) {
  auto* const kernel = tuned_sgemm_kernel<Cfg, kAlignedB, kAlignedC>;
  // Above 48 KB of dynamic shared memory a kernel must opt in, once.
  static cudaError_t const opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSharedBytes);
  if (opt_in != cudaSuccess) {
    throw std::runtime_error(std::string("sgemm (step 11_tuned): cannot reserve shared memory: ") +
                             cudaGetErrorString(opt_in));
  }
  int const tiles_m = ceil_div(m, Cfg::kBM);
  int const tiles_n = ceil_div(n, Cfg::kBN);
  // Each split covers a whole number of k tiles.
  int const k_per_split = ceil_div(ceil_div(k, plan.splits), Cfg::kBK) * Cfg::kBK;
  int const splits = ceil_div(k, k_per_split);
  if (splits > 1) {
    dim3 const scale_grid(ceil_div(n, 256), std::min(m, 1024));
    scale_c_kernel<<<scale_grid, 256, 0, stream>>>(m, n, beta, C, ldc);
  }
  dim3 const grid(tiles_m * tiles_n, splits);
  kernel<<<grid, Cfg::kThreads, Cfg::kSharedBytes, stream>>>(
      m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, tiles_m, tiles_n, plan.group_m, k_per_split);
}

// Picks the aligned or unaligned instantiation for these pointers and leading dimensions.
template <class Cfg>
void launch(LaunchPlan const& plan, int m, int n, int k, float alpha, float const* A, int lda,
            float const* B, int ldb, float beta, float* C, int ldc, cudaStream_t stream) {
  bool const aligned_b = gemm::rows_are_16_byte_aligned(B, ldb);
  bool const aligned_c = gemm::rows_are_16_byte_aligned(C, ldc);
  if (aligned_b && aligned_c) {
    launch_variant<Cfg, true, true>(plan, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
  } else if (aligned_b) {
    launch_variant<Cfg, true, false>(plan, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
  } else if (aligned_c) {
    launch_variant<Cfg, false, true>(plan, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
  } else {
    launch_variant<Cfg, false, false>(plan, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
  }
}

// The configuration the sweep kept (README.md, "Tuning"): 64 x 128 x 16 tiles, 4 warps of
// 32 x 64, 8 x 8 results per thread, 4 stages (49 KB), FOUR blocks per SM. Smaller than the
// 128 x 256 tile the sweep also tried, but 16 resident warps per SM hide latency that 8 big
// ones cannot.
using Tile = TileConfig<64, 128, 16, 32, 64, 4, 4, 4>;

// A last, partial wave that leaves q < kMinBlocksPerSM blocks on each SM finishes sooner than
// a full one, but the SM does not get q / 4 of the time: its throughput drops with fewer
// warps. Modeled as max(q / kMinBlocksPerSM, kLoneWaveFloor), fitted to the sweep.
constexpr double kLoneWaveFloor = 0.4;

// Estimated time of a plan with `splits` K splits, in units of "one full wave of blocks, each
// over all of K". Split-K pays a small surcharge per split for the beta pass and the atomic
// adds into C.
double estimated_time(int m, int n, int splits, int sms) {
  // TODO(student): the wave model. Count the blocks of the launch (tiles of Tile::kBM x
  // Tile::kBN, times splits; in long long) and the slots (sms x Tile::kMinBlocksPerSM blocks
  // resident at once). Every full set of slots is one wave. The blocks left over, if any, form
  // a last wave; spread as evenly as the scheduler can, the busiest SM runs ceil(rest / sms) of
  // them, so that wave costs ceil(rest / sms) / kMinBlocksPerSM of a full one, but never less
  // than kLoneWaveFloor (see above). Each block only covers 1 / splits of K: divide the waves
  // by splits, then add the surcharge of 3% per split beyond the first.
  // Check (132 SMs): 4096^3 gives 4 waves with 1 split; 4097^3 has 2145 tiles, 4.4 waves with
  // 1 split, about 4.33 with 2, so choose_splits must pick 2. Pitfall: integer division
  // (blocks_per_sm / kMinBlocksPerSM is 0 for a partial wave); switch to double in time.
  (void)m, (void)n, (void)splits, (void)sms, (void)kLoneWaveFloor;
  return 1.0;  // every plan looks the same: choose_splits always keeps 1 split
  // END TODO
}

// The number of K splits (1 to 8, each at least 256 deep) with the smallest estimate.
// On 132 SMs: 4096^3, 8192^3 and 1000x3000x2000: 1; 4097^3: 2 (its 2145 tiles fill 4.06
// waves of 528 slots, and the last one is nearly empty).
int choose_splits(int m, int n, int k, int sms) {
  int best = 1;
  double best_time = estimated_time(m, n, 1, sms);
  for (int splits = 2; splits <= 8 && k / splits >= 256; ++splits) {
    double const t = estimated_time(m, n, splits, sms);
    if (t < best_time) {
      best = splits;
      best_time = t;
    }
  }
  return best;
}

int sm_count() {
  int device = 0;
  int count = 0;
  gemm::check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  gemm::check_cuda(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
                   "cudaDeviceGetAttribute");
  return count;
}

}  // namespace tuned

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 11_tuned)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  tuned::LaunchPlan plan;
  plan.splits = tuned::choose_splits(m, n, k, tuned::sm_count());
  tuned::launch<tuned::Tile>(plan, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
  check_launch(routine);
}
