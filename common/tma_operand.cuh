// An operand the TMA steps (17-20) can describe with a tensor map. TMA needs a 16-byte-
// aligned base and a row pitch that is a multiple of 16 bytes (rows_are_16_byte_aligned in
// device_helpers.cuh); a bf16 matrix with an odd leading dimension (4097 x 4097, say) has
// neither. Such an operand is first copied, in the call's stream, into a workspace whose rows
// start 16-byte aligned (ld rounded up to a multiple of 8). The copy reads and writes the
// operand once: for k x n of B that is 4 k n bytes, small next to the 2 m n k FLOPs when m is
// large, and it counts in the call's time.
//
// Step 21 makes this copy its lesson and keeps its own version (AlignedOperand in
// every_shape.cu): 16 bytes per thread, a 128-byte pitch, and a copy also where TMA could read the
// operand but slowly; steps 22 and 23 share its successor (aligned_operand.cuh). Steps 17-20 keep
// this simpler one, which their measured results used.
#pragma once

#include <cuda_bf16.h>

#include <memory>

#include "cuda_check.h"
#include "device_helpers.cuh"
#include "tensor_map.h"
#include "workspace.h"

namespace gemm {

template <class T>
__global__ void copy_rows_kernel(T const* __restrict__ source, long long source_ld,
                                 T* __restrict__ destination, long long destination_ld, int rows,
                                 int cols) {
  long long const count = static_cast<long long>(rows) * cols;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    long long const row = i / cols;
    long long const col = i % cols;
    destination[row * destination_ld + col] = source[row * source_ld + col];
  }
}

class TmaOperand {
 public:
  // rows x cols of the row-major matrix at `data` with leading dimension `ld`.
  TmaOperand(__nv_bfloat16 const* data, int rows, int cols, int ld, cudaStream_t stream)
      : data_(data), ld_(ld) {
    if (rows_are_16_byte_aligned(data, ld)) return;
    ld_ = (static_cast<long long>(cols) + 7) / 8 * 8;
    copy_ = std::make_unique<StreamWorkspace>(static_cast<std::size_t>(rows) * ld_ * 2, stream);
    __nv_bfloat16* const destination = copy_->get<__nv_bfloat16>();
    copy_rows_kernel<<<1024, 256, 0, stream>>>(data, ld, destination, ld_, rows, cols);
    check_cuda(cudaGetLastError(), "TmaOperand copy");
    data_ = destination;
  }

  __nv_bfloat16 const* data() const { return data_; }
  long long ld() const { return ld_; }
  bool copied() const { return copy_ != nullptr; }

 private:
  __nv_bfloat16 const* data_;
  long long ld_;
  std::unique_ptr<StreamWorkspace> copy_;  // released (stream-ordered) with the operand
};

}  // namespace gemm
