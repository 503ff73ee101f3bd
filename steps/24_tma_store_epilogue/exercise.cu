// Exercise: step 21, every shape fast. One TODO block: where a consumer puts a value of C in
// the staging buffer that a TMA store then copies out with the 128-byte swizzle. The
// placeholder compiles and writes the buffer unswizzled, so the store scatters the 16-byte
// chunks of every row but the first of each 8 to the wrong columns, and every problem that
// takes the TMA-store epilogue (C's rows 16-byte aligned, n a multiple of 8) comes out wrong.
// The README's exercises take the tile-width choice and the operand copies apart.
// Build and test: docs/teaching.md ("Exercise mode").
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "async_copy.cuh"
#include "cuda_check.h"
#include "device_helpers.cuh"
#include "gemm.h"
#include "hopper.cuh"
#include "tensor_map.h"
#include "workspace.h"

namespace {

using bf16 = __nv_bfloat16;
using namespace gemm::hopper;

constexpr int kBM = 128;
constexpr int kBK = 64;
constexpr int kConsumers = 2;
constexpr int kClusterSize = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupM = 4;
constexpr int kBoxN = 64;  // B boxes, and the pieces of C the epilogue stores: 64 columns wide
constexpr int kWgmmaK = 16;
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
constexpr int kMaxSharedBytes = 227 * 1024;  // the most a block may opt in to on sm_90

constexpr std::uint32_t kABytes = kBM * kBK * 2;
constexpr std::uint32_t kBBoxBytes = kBK * kBoxN * 2;
constexpr std::uint32_t kCBoxBytes = 64 * kBoxN * 2;  // one 64 x 64 piece of C: 8 KB

// How C is written. kTmaStore needs C to be a legal TMA operand (16-byte-aligned rows); the
// others are step 20's direct stores, in pairs when C's rows are 4-byte aligned.
enum class Epilogue { kTmaStore, kPairStores, kSingleStores };

// Everything that follows from the tile width kBN.
template <int kBN>
struct Tile {
  static constexpr int kBoxes = kBN / kBoxN;
  static constexpr std::uint32_t kBBytes = kBBoxBytes * kBoxes;
  static constexpr std::uint32_t kStageBytes = kABytes + kBBytes;
  // Each consumer stages C in two 8 KB buffers: it fills one while TMA still reads the other.
  static constexpr std::uint32_t kStagingBytes = kConsumers * 2 * kCBoxBytes;
  // As many stages as fit beside the staging buffers.
  static constexpr int kStages = std::min<int>(
      6, (kMaxSharedBytes - 1024 - kStagingBytes - 6 * 16) / static_cast<int>(kStageBytes));
  static constexpr int kSharedBytes =
      1024 + kStages * kStageBytes + kStagingBytes + 2 * kStages * 8;
  static_assert(kBN % kBoxN == 0 && kBN >= 64 && kBN <= 256, "wgmma N: 64 .. 256");
  static_assert(kSharedBytes <= kMaxSharedBytes, "stages and staging must fit shared memory");
};

template <int kBN>
__device__ __forceinline__ void wgmma_bf16(float (&acc)[kBN / 2], std::uint64_t a,
                                           std::uint64_t b) {
  if constexpr (kBN == 256) wgmma_m64n256k16_bf16(acc, a, b);
  if constexpr (kBN == 192) wgmma_m64n192k16_bf16(acc, a, b);
  if constexpr (kBN == 128) wgmma_m64n128k16_bf16(acc, a, b);
}

__device__ __forceinline__ std::uint64_t a_descriptor(std::uint32_t a_stage, int half, int kk) {
  return swizzle128_descriptor(a_stage + half * 64 * 128 + kk * kWgmmaK * 2, 16, 1024);
}
__device__ __forceinline__ std::uint64_t b_descriptor(std::uint32_t b_stage, int kk) {
  return swizzle128_descriptor(b_stage + kk * kWgmmaK * 128, kBBoxBytes, 1024);
}

// c = alpha * acc + beta * c for C[row][col], C[row][col + 1], as bf16, reading C only when
// beta != 0 and only inside the matrix (the pieces of C staged for a TMA store may overhang it;
// TMA clips what lies outside).
__device__ __forceinline__ __nv_bfloat162 scaled_pair(bf16 const* C, int ldc, int row, int col,
                                                      int m, int n, float acc0, float acc1,
                                                      float alpha, float beta) {
  float2 value = make_float2(alpha * acc0, alpha * acc1);
  if (beta != 0.0f && row < m && col < n) {
    bf16 const* old = C + static_cast<size_t>(row) * ldc + col;
    if (col + 1 < n) {  // col is even and ldc a multiple of 8: a 4-byte aligned pair
      float2 const pair = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 const*>(old));
      value.x += beta * pair.x;
      value.y += beta * pair.y;
    } else {
      value.x += beta * __bfloat162float(old[0]);
    }
  }
  return __float22bfloat162_rn(value);
}

template <int kBN, Epilogue kEpilogue>
__global__ void __cluster_dims__(kClusterSize, 1, 1) __launch_bounds__(kThreads, 1)
    every_shape_kernel(const __grid_constant__ CUtensorMap a_map,
                       const __grid_constant__ CUtensorMap b_map,
                       const __grid_constant__ CUtensorMap c_map, int m, int n, int k, float alpha,
                       float beta, bf16* __restrict__ C, int ldc) {
  using T = Tile<kBN>;
  constexpr int kStages = T::kStages;
  extern __shared__ unsigned char shared_bytes[];
  std::uint32_t const shared_base = (gemm::shared_address(shared_bytes) + 1023) & ~1023u;
  unsigned char* const shared_pointer =
      shared_bytes + (shared_base - gemm::shared_address(shared_bytes));
  auto a_stage = [&](int stage) { return shared_base + stage * T::kStageBytes; };
  auto b_stage = [&](int stage) { return shared_base + stage * T::kStageBytes + kABytes; };
  std::uint32_t const staging = shared_base + kStages * T::kStageBytes;  // 1024-byte aligned
  std::uint32_t const barriers = staging + T::kStagingBytes;
  auto full = [&](int stage) { return barriers + stage * 8; };
  auto empty = [&](int stage) { return barriers + (kStages + stage) * 8; };

  unsigned const rank = cluster_block_rank();
  int const tiles_m = gemm::ceil_div(m, kBM);
  int const pair_rows = gemm::ceil_div(tiles_m, kClusterSize);
  int const tiles_n = gemm::ceil_div(n, kBN);
  int const cluster_tiles = pair_rows * tiles_n;
  int const cluster = blockIdx.x / kClusterSize;
  int const clusters = gridDim.x / kClusterSize;
  int const k_tiles = gemm::ceil_div(k, kBK);
  int const warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(full(stage), 1);
      mbarrier_init(empty(stage), 4 * kConsumers * kClusterSize);
    }
    fence_barrier_init();
  }
  cluster_sync();

  if (warpgroup == 0) {
    // --- producer: step 20's ----------------------------------------------------------------
    release_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      int load = 0;
      for (int tile = cluster; tile < cluster_tiles; tile += clusters) {
        int pair_m = 0;
        int tile_n = 0;
        gemm::grouped_tile(tile, pair_rows, tiles_n, kGroupM, pair_m, tile_n);
        int const tile_m = pair_m * kClusterSize + static_cast<int>(rank);
        for (int k_tile = 0; k_tile < k_tiles; ++k_tile, ++load) {
          int const stage = load % kStages;
          mbarrier_wait(empty(stage), (load / kStages + 1) % 2);
          mbarrier_arrive_expect_bytes(full(stage), T::kStageBytes);
          tma_load_2d(a_stage(stage), &a_map, k_tile * kBK, tile_m * kBM, full(stage));
          for (int box = static_cast<int>(rank); box < T::kBoxes; box += kClusterSize) {
            tma_load_2d_multicast(b_stage(stage) + box * kBBoxBytes, &b_map,
                                  tile_n * kBN + box * kBoxN, k_tile * kBK, full(stage),
                                  (1u << kClusterSize) - 1);
          }
        }
      }
    }
  } else {
    // --- consumers --------------------------------------------------------------------------
    claim_registers<kConsumerRegisters>();
    int const consumer = warpgroup - 1;
    int const lane = threadIdx.x % 32;
    int const warp = (threadIdx.x / 32) % 4;
    int const g = lane / 4;
    int const t2 = (lane % 4) * 2;
    bool const store_leader = threadIdx.x % 128 == 0;  // issues and waits for the TMA stores
    auto release = [&](int stage) {
      for (unsigned block = 0; block < kClusterSize; ++block) {
        mbarrier_arrive_cluster(empty(stage), block);
      }
    };
    int load = 0;
    int pieces = 0;  // pieces of C this consumer has staged so far: picks the staging buffer
    for (int tile = cluster; tile < cluster_tiles; tile += clusters) {
      int pair_m = 0;
      int tile_n = 0;
      gemm::grouped_tile(tile, pair_rows, tiles_n, kGroupM, pair_m, tile_n);
      int const tile_m = pair_m * kClusterSize + static_cast<int>(rank);
      float acc[kBN / 2];
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i)
        acc[i] = 0.0f;
      for (int k_tile = 0; k_tile < k_tiles; ++k_tile, ++load) {
        int const stage = load % kStages;
        mbarrier_wait(full(stage), (load / kStages) % 2);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
          wgmma_bf16<kBN>(acc, a_descriptor(a_stage(stage), consumer, kk),
                          b_descriptor(b_stage(stage), kk));
        }
        wgmma_commit();
        wgmma_wait<1>();
        if (k_tile > 0 && lane == 0) release((load - 1) % kStages);
      }
      wgmma_wait<0>();
      if (lane == 0) release((load - 1) % kStages);

      int const first_row = tile_m * kBM + consumer * 64;  // this consumer's 64 rows
      int const row = warp * 16 + g;                       // and rows row, row + 8 of them
      if constexpr (kEpilogue == Epilogue::kTmaStore) {
        // Piece by piece (64 x 64): wait until TMA has finished reading the buffer (its store
        // two pieces ago), fill it, fence, and let one thread hand it to TMA. The 128-byte
        // swizzle (16-byte chunk c of row r at chunk c ^ r % 8) is what the C map expects, and
        // it spreads a warp's 32 four-byte writes over all 32 banks.
        int const barrier_id = 1 + consumer;
#pragma unroll
        for (int piece = 0; piece < T::kBoxes; ++piece, ++pieces) {
          std::uint32_t const buffer = staging + (consumer * 2 + pieces % 2) * kCBoxBytes;
          unsigned char* const buffer_pointer = shared_pointer + (buffer - shared_base);
          if (store_leader) bulk_wait_group_read<1>();
          named_barrier_sync(barrier_id, 128);
#pragma unroll
          for (int chunk = 0; chunk < kBoxN / 8; ++chunk) {
            int const j = piece * (kBoxN / 8) + chunk;  // the accumulators' 8-column block
            int const col = tile_n * kBN + j * 8 + t2;
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              int const r = row + 8 * half;
              __nv_bfloat162 const value =
                  scaled_pair(C, ldc, first_row + r, col, m, n, acc[4 * j + 2 * half],
                              acc[4 * j + 2 * half + 1], alpha, beta);
              // TODO(student): the byte offset of row r, columns 8 chunk + t2 and + 1, in the
              // buffer: rows of 128 bytes, 16-byte chunk c of row r stored at chunk c ^ r % 8
              int const offset = r * 128 + chunk * 16 + t2 * 2;  // placeholder
              // END TODO
              *reinterpret_cast<__nv_bfloat162*>(buffer_pointer + offset) = value;
            }
          }
          fence_proxy_async_shared();
          named_barrier_sync(barrier_id, 128);
          if (store_leader) {
            tma_store_2d(&c_map, buffer, tile_n * kBN + piece * kBoxN, first_row);
            bulk_commit_group();
          }
        }
      } else {
        constexpr bool kPairs = kEpilogue == Epilogue::kPairStores;
        int const out_row = first_row + row;
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) {
          int const col = tile_n * kBN + j * 8 + t2;
          if (out_row < m) {
            gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(out_row) * ldc, col, n,
                                                 acc[4 * j], acc[4 * j + 1], alpha, beta);
          }
          if (out_row + 8 < m) {
            gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(out_row + 8) * ldc, col, n,
                                                 acc[4 * j + 2], acc[4 * j + 3], alpha, beta);
          }
        }
      }
    }
    // The last stores must have landed before the kernel ends.
    if (kEpilogue == Epilogue::kTmaStore && store_leader) bulk_wait_group<0>();
  }
  cluster_sync();
}

// --- operands ----------------------------------------------------------------------------------

// Copies rows x cols of `source` (any ld, any 2-byte alignment) to `destination`, whose rows are
// 128-byte aligned: each thread writes 8 elements with one 16-byte store, reading them with one
// 16-byte load when the source rows allow it (kVectorSource) and with 8 two-byte loads
// otherwise. Columns past `cols` (up to the padded ld) are written as zeros.
template <bool kVectorSource>
__global__ void copy_to_aligned_kernel(bf16 const* __restrict__ source, long long source_ld,
                                       bf16* __restrict__ destination, long long destination_ld,
                                       int rows, int cols) {
  int const col = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (col >= cols) return;
  for (int row = blockIdx.y; row < rows; row += gridDim.y) {
    bf16 const* in = source + row * source_ld + col;
    uint4 packed;
    if (kVectorSource && col + 8 <= cols) {
      packed = *reinterpret_cast<uint4 const*>(in);
    } else {
      bf16 values[8];
#pragma unroll
      for (int i = 0; i < 8; ++i)
        values[i] = col + i < cols ? in[i] : __float2bfloat16(0.0f);
      packed = *reinterpret_cast<uint4 const*>(values);
    }
    *reinterpret_cast<uint4*>(destination + row * destination_ld + col) = packed;
  }
}

// An operand as the kernel reads it: the caller's matrix, or an aligned copy of it in a
// stream-ordered workspace (released, stream-ordered, with the operand).
class AlignedOperand {
 public:
  AlignedOperand(bf16 const* data, int rows, int cols, int ld, bool copy, cudaStream_t stream)
      : data_(data), ld_(ld) {
    if (!copy) return;
    ld_ = (static_cast<long long>(cols) + 63) / 64 * 64;  // a 128-byte pitch
    copy_ =
        std::make_unique<gemm::StreamWorkspace>(static_cast<std::size_t>(rows) * ld_ * 2, stream);
    bf16* const destination = copy_->get<bf16>();
    constexpr int kCopyThreads = 128;
    dim3 const grid(gemm::ceil_div(gemm::ceil_div(cols, 8), kCopyThreads),
                    static_cast<unsigned>(std::min(rows, 65535)));
    gemm::dispatch_bool(gemm::rows_are_16_byte_aligned(data, ld), [&](auto kVector) {
      copy_to_aligned_kernel<kVector()>
          <<<grid, kCopyThreads, 0, stream>>>(data, ld, destination, ld_, rows, cols);
    });
    gemm::check_cuda(cudaGetLastError(), "bf16_gemm: operand copy");
    data_ = destination;
  }
  bf16 const* data() const { return data_; }
  long long ld() const { return ld_; }

 private:
  bf16 const* data_;
  long long ld_;
  std::unique_ptr<gemm::StreamWorkspace> copy_;
};

// TMA must have 16-byte-aligned rows: an operand without them is always copied. A legal pitch
// that is not a multiple of 128 bytes (ld 4104) costs little with 256-column tiles but up to 30%
// with narrower ones (measured at 4096^3 with lda 4104: 98% of the aligned speed with 256
// columns, 77% with 192; docs/results). Copying A then pays when the copy, which reads and
// writes m k elements, is small next to the 2 m n k FLOPs: n >= 4096 keeps it near a tenth.
// B's pitch cost 5% at most in the same measurements: never worth its copy.
bool must_copy(bf16 const* data, int ld) {
  return !gemm::rows_are_16_byte_aligned(data, ld);
}
bool should_copy_a(bf16 const* A, int lda, int n, int width) {
  bool const pitch_128 = static_cast<long long>(lda) * 2 % 128 == 0;
  return must_copy(A, lda) || (!pitch_128 && width < 256 && n >= 4096);
}

// --- tile width ---------------------------------------------------------------------------------

// Rounds of the persistent grid times the tile width, plus a per-tile overhead worth 32 columns
// (the epilogue, and the lower efficiency of narrower wgmma): the smallest estimate wins.
int choose_tile_width(int m, int n, int clusters) {
  int best_width = 256;
  long long best_cost = -1;
  for (int width : {256, 192, 128}) {
    long long const tiles =
        static_cast<long long>(gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize)) *
        gemm::ceil_div(n, width);
    long long const rounds = (tiles + clusters - 1) / clusters;
    long long const cost = rounds * (width + 32);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best_width = width;
    }
  }
  return best_width;
}

template <int kBN, Epilogue kEpilogue>
void launch(CUtensorMap const& a_map, CUtensorMap const& b_map, CUtensorMap const& c_map, int m,
            int n, int k, float alpha, float beta, bf16* C, int ldc, cudaStream_t stream) {
  constexpr int kSharedBytes = Tile<kBN>::kSharedBytes;
  auto const kernel = every_shape_kernel<kBN, kEpilogue>;
  static cudaError_t const opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  if (opt_in != cudaSuccess) {
    throw std::runtime_error("bf16_gemm: this GPU cannot give a block " +
                             std::to_string(kSharedBytes) + " bytes of shared memory (" +
                             cudaGetErrorString(opt_in) + ")");
  }
  static int const resident = [&] {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(kClusterSize, 1, 1);
    config.blockDim = dim3(kThreads, 1, 1);
    config.dynamicSmemBytes = kSharedBytes;
    int clusters = 0;
    gemm::check_cuda(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config),
                     "cudaOccupancyMaxActiveClusters");
    if (clusters < 1) throw std::runtime_error("bf16_gemm: no cluster of 2 blocks fits this GPU");
    return clusters;
  }();
  long long const cluster_tiles =
      static_cast<long long>(gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize)) *
      gemm::ceil_div(n, kBN);
  long long const clusters = std::min<long long>(cluster_tiles, resident);
  kernel<<<static_cast<unsigned>(clusters * kClusterSize), kThreads, kSharedBytes, stream>>>(
      a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc);
}

template <int kBN>
void launch_width(Epilogue epilogue, CUtensorMap const& a_map, CUtensorMap const& b_map,
                  CUtensorMap const& c_map, int m, int n, int k, float alpha, float beta, bf16* C,
                  int ldc, cudaStream_t stream) {
  switch (epilogue) {
    case Epilogue::kTmaStore:
      return launch<kBN, Epilogue::kTmaStore>(a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc,
                                              stream);
    case Epilogue::kPairStores:
      return launch<kBN, Epilogue::kPairStores>(a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc,
                                                stream);
    case Epilogue::kSingleStores:
      return launch<kBN, Epilogue::kSingleStores>(a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc,
                                                  stream);
  }
}

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B,
                     int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  if (static_cast<long long>(ceil_div(m, kBM)) * ceil_div(n, 128) > 0x3fffffffLL) {
    throw std::invalid_argument("bf16_gemm: too many tiles");
  }
  int device = 0;
  int sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute");
  // The model assumes every SM pair can hold a cluster (66 on the H100); the launch then sizes the
  // grid from the occupancy query of the kernel it picked, which may find fewer.
  int const width = choose_tile_width(m, n, std::max(1, sms / kClusterSize));

  AlignedOperand const a(A, m, k, lda, should_copy_a(A, lda, n, width), stream);
  AlignedOperand const b(B, k, n, ldb, must_copy(B, ldb), stream);
  CUtensorMap const a_map = make_bf16_tensor_map(a.data(), m, k, a.ld(), kBM, kBK);
  CUtensorMap const b_map = make_bf16_tensor_map(b.data(), k, n, b.ld(), kBK, kBoxN);
  Epilogue epilogue = Epilogue::kSingleStores;
  CUtensorMap c_map{};  // unused by the direct-store kernels
  // TMA stores need C's rows 16-byte aligned, and n a multiple of 8: at the right edge they
  // write whole 16-byte units (with n = 33 and ldc = 40, columns 33-39 too: the GPU suite caught
  // it), and those columns are not C's.
  if (rows_are_16_byte_aligned(C, ldc) && n % 8 == 0) {
    epilogue = Epilogue::kTmaStore;
    c_map = make_bf16_tensor_map(C, m, n, ldc, 64, kBoxN);
  } else if (rows_are_aligned<4>(C, ldc)) {
    epilogue = Epilogue::kPairStores;
  }
  if (width == 256)
    launch_width<256>(epilogue, a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc, stream);
  if (width == 192)
    launch_width<192>(epilogue, a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc, stream);
  if (width == 128)
    launch_width<128>(epilogue, a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc, stream);
  check_launch("bf16_gemm");
}
