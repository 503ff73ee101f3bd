// Taught in step 22 (steps/22_aligned_copy/). Every Hopper step copies an operand TMA cannot
// describe at all (must_copy); step 22 adds the copy of an A that TMA can describe but reads
// slowly (should_copy_a). At the end, the same copy for FP8 operands, as bytes.
//
// TMA needs 16-byte-aligned rows (a 16-byte-aligned base and a row pitch that is a multiple of 16
// bytes): a bf16 matrix with an odd leading dimension has neither, so it is first copied, in the
// call's stream, into a workspace whose rows start 128-byte aligned. And a legal pitch that is not
// a multiple of 128 bytes (ld 4104) makes every 128-byte row of a TMA box straddle two 128-byte
// lines of memory: TMA reads such an operand, but slowly.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "cuda_check.h"
#include "device_helpers.cuh"
#include "workspace.h"

namespace gemm {

// The unsigned integer type of `kBytes` bytes.
template <int kBytes>
using Piece = std::conditional_t<
    kBytes == 16, uint4,
    std::conditional_t<kBytes == 8, uint2,
                       std::conditional_t<kBytes == 4, unsigned, unsigned short>>>;

// Copies rows x cols of `source` (any ld, any 2-byte alignment) to `destination`, whose rows are
// 128-byte aligned: each thread writes 8 elements with one 16-byte store. It reads them with the
// widest loads the source rows allow (kLoadBytes: 16, 8, 4 or 2): fewer load instructions, though
// the copy is bound by memory either way. The last chunk of a row is read element by element.
template <int kLoadBytes>
__global__ void copy_to_aligned_kernel(__nv_bfloat16 const* __restrict__ source,
                                       long long source_ld, __nv_bfloat16* __restrict__ destination,
                                       long long destination_ld, int rows, int cols) {
  constexpr int kLoads = 16 / kLoadBytes;
  int const col = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (col >= cols) return;
  for (int row = blockIdx.y; row < rows; row += gridDim.y) {
    __nv_bfloat16 const* in = source + row * source_ld + col;
    uint4 packed;
    if (col + 8 <= cols) {
      union {
        uint4 whole;
        Piece<kLoadBytes> pieces[kLoads];
      } chunk;
#pragma unroll
      for (int i = 0; i < kLoads; ++i)
        chunk.pieces[i] = reinterpret_cast<Piece<kLoadBytes> const*>(in)[i];
      packed = chunk.whole;
    } else {
      __nv_bfloat16 values[8];
#pragma unroll
      for (int i = 0; i < 8; ++i)
        values[i] = col + i < cols ? in[i] : __float2bfloat16(0.0f);
      packed = *reinterpret_cast<uint4 const*>(values);
    }
    *reinterpret_cast<uint4*>(destination + row * destination_ld + col) = packed;
  }
}

// An operand as the kernel reads it: the caller's matrix, or (copy) an aligned copy of it in a
// stream-ordered workspace (released, stream-ordered, with the operand).
class AlignedOperand {
 public:
  AlignedOperand(__nv_bfloat16 const* data, int rows, int cols, int ld, bool copy,
                 cudaStream_t stream)
      : data_(data), ld_(ld) {
    if (!copy) return;
    ld_ = (static_cast<long long>(cols) + 63) / 64 * 64;  // a 128-byte pitch
    copy_ = std::make_unique<StreamWorkspace>(static_cast<std::size_t>(rows) * ld_ * 2, stream);
    __nv_bfloat16* const destination = copy_->get<__nv_bfloat16>();
    constexpr int kCopyThreads = 128;
    dim3 const grid(ceil_div(ceil_div(cols, 8), kCopyThreads),
                    static_cast<unsigned>(std::min(rows, 65535)));
    auto const run = [&](auto kernel) {
      kernel<<<grid, kCopyThreads, 0, stream>>>(data, ld, destination, ld_, rows, cols);
    };
    if (rows_are_aligned<16>(data, ld)) {
      run(copy_to_aligned_kernel<16>);
    } else if (rows_are_aligned<8>(data, ld)) {
      run(copy_to_aligned_kernel<8>);
    } else if (rows_are_aligned<4>(data, ld)) {
      run(copy_to_aligned_kernel<4>);
    } else {
      run(copy_to_aligned_kernel<2>);
    }
    check_cuda(cudaGetLastError(), "bf16_gemm: operand copy");
    data_ = destination;
  }
  __nv_bfloat16 const* data() const { return data_; }
  long long ld() const { return ld_; }

 private:
  __nv_bfloat16 const* data_;
  long long ld_;
  std::unique_ptr<StreamWorkspace> copy_;
};

// An operand TMA cannot describe is always copied.
inline bool must_copy(__nv_bfloat16 const* data, int ld) {
  return !rows_are_16_byte_aligned(data, ld);
}
// True where TMA reads the matrix where it lies (rows 16-byte aligned) but each 128-byte row of a
// box straddles two 128-byte lines: a pitch that is a multiple of 16 bytes and not of 128.
inline bool rows_straddle_lines(__nv_bfloat16 const* data, int ld) {
  return !must_copy(data, ld) && static_cast<long long>(ld) * 2 % 128 != 0;
}
// A is copied also where TMA can read it but its pitch is not a multiple of 128 bytes, when the
// copy is cheap next to the product: it reads and writes m k elements against the 2 m n k FLOPs,
// so n >= 4096 keeps it near a tenth of the work or less. Each block of the cluster steps loads its
// own A tiles (B is shared by multicast), so A's pitch is the one that costs; B is copied only when
// it must be.
inline bool should_copy_a(__nv_bfloat16 const* A, int lda, int n) {
  return must_copy(A, lda) || (rows_straddle_lines(A, lda) && n >= 4096);
}

// --- FP8 operands (steps 29 on) -----------------------------------------------------------------

// Copies rows x cols bytes of `source` (any ld, any alignment) into rows of `destination` whose
// pitch is a multiple of 128 bytes, byte by byte: the path of an FP8 operand TMA cannot describe,
// an exception (a base or a leading dimension that is not a multiple of 16 bytes).
// static: a kernel defined in a header that several translation units may include.
static __global__ void copy_bytes_to_aligned_kernel(std::uint8_t const* __restrict__ source,
                                                    long long source_ld,
                                                    std::uint8_t* __restrict__ destination,
                                                    long long destination_ld, int rows, int cols) {
  std::size_t const count = static_cast<std::size_t>(rows) * cols;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::size_t const row = i / cols;
    std::size_t const col = i % cols;
    destination[row * destination_ld + col] = source[row * source_ld + col];
  }
}

// An FP8 operand as TMA can read it, as bytes: the caller's rows where they are 16-byte aligned,
// else a copy in a stream-ordered workspace (released, stream-ordered, with the operand).
class AlignedFp8Operand {
 public:
  AlignedFp8Operand(__nv_fp8_e4m3 const* data, int rows, int cols, int ld, cudaStream_t stream)
      : data_(reinterpret_cast<std::uint8_t const*>(data)), ld_(ld) {
    if (rows_are_16_byte_aligned(data_, ld)) return;
    ld_ = (static_cast<long long>(cols) + 127) / 128 * 128;  // a 128-byte pitch
    copy_ = std::make_unique<StreamWorkspace>(static_cast<std::size_t>(rows) * ld_, stream);
    copy_bytes_to_aligned_kernel<<<1024, 256, 0, stream>>>(data_, ld, copy_->get<std::uint8_t>(),
                                                           ld_, rows, cols);
    check_cuda(cudaGetLastError(), "fp8_gemm: operand copy");
    data_ = copy_->get<std::uint8_t>();
  }
  std::uint8_t const* data() const { return data_; }
  long long ld() const { return ld_; }

 private:
  std::uint8_t const* data_;
  long long ld_;
  std::unique_ptr<StreamWorkspace> copy_;
};

}  // namespace gemm
