// An operand as the kernels of steps 22 and 23 read it: the caller's matrix, or an aligned copy.
// TMA needs 16-byte-aligned rows, so an operand without them is always copied; and a legal row
// pitch that is not a multiple of 128 bytes is read slowly, so A is copied then too where the
// copy is cheap next to the product (should_copy_a). Step 22's write-up measures both rules and
// the copy kernel's loads ("The copy of A, whatever the width", "Wider loads in the copy
// kernel"). Step 21 makes the first version of this copy its lesson and keeps its own
// (AlignedOperand in every_shape.cu); steps 17-20 use the simpler TmaOperand (tma_operand.cuh).
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstddef>
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
// widest loads the source rows allow (kLoadBytes: 16, 8, 4 or 2; step 21 had only 16 or 2). At
// 4096x4100x4096 B's rows are 8-byte aligned: 2 loads per thread instead of 8 took the copy from
// 21.5-22.3 us to 20.2-21.7 us (Nsight Compute, docs/results), a little, as it is bound by
// memory either way. The last chunk of a row is read element by element.
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

// TMA must have 16-byte-aligned rows: an operand without them is always copied. A legal pitch
// that is not a multiple of 128 bytes (ld 4104) is read slowly. Step 21 copied such an A only for
// tiles narrower than 256 columns (with lda 4104 alone, 256-column tiles kept 98% of the aligned
// speed); at 4104^3, where B and C have that pitch too, 256-column tiles ran 0.306 ms without the
// copy and 0.264 ms with it (step 22's development file), so steps 22 and 23 copy A whatever the
// tile. The copy, which reads and writes m k elements, pays when it is small next to the
// 2 m n k FLOPs: n >= 4096 keeps it near a tenth. B's pitch cost 5% at most in step 21's
// measurements: never worth its copy. (In steps 22 and 23 the cost of a slow pitch follows the
// operand each block loads alone, step 22's development file, section 9: A; the cluster pair
// multicasts B.)
inline bool must_copy(__nv_bfloat16 const* data, int ld) {
  return !rows_are_16_byte_aligned(data, ld);
}
inline bool should_copy_a(__nv_bfloat16 const* A, int lda, int n) {
  bool const pitch_128 = static_cast<long long>(lda) * 2 % 128 == 0;
  return must_copy(A, lda) || (!pitch_128 && n >= 4096);
}

}  // namespace gemm
