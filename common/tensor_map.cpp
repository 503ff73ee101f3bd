#include "tensor_map.h"

#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace gemm {

namespace {

// cuTensorMapEncodeTiled is a driver API function. Asking the runtime for its address spares
// every executable a link against libcuda.
PFN_cuTensorMapEncodeTiled_v12000 encode_function() {
  static PFN_cuTensorMapEncodeTiled_v12000 const function = [] {
    void* address = nullptr;
    cudaDriverEntryPointQueryResult found{};
    cudaError_t const status = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &address,
                                                                12000, cudaEnableDefault, &found);
    if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || address == nullptr) {
      throw std::runtime_error("the CUDA driver does not provide cuTensorMapEncodeTiled");
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(address);
  }();
  return function;
}

// The map of a row-major matrix of `element_bytes`-byte elements (see the header).
CUtensorMap make_tensor_map(CUtensorMapDataType type, int element_bytes, void const* data, int rows,
                            int cols, long long ld, int box_rows, int box_cols,
                            CUtensorMapL2promotion promotion, CUtensorMapSwizzle swizzle) {
  CUtensorMap map{};
  // Dimension 0 is the contiguous one (columns), dimension 1 the rows.
  cuuint64_t const sizes[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  cuuint64_t const row_pitch_bytes[1] = {static_cast<cuuint64_t>(ld) * element_bytes};
  cuuint32_t const box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  cuuint32_t const element_strides[2] = {1, 1};
  CUresult const result = encode_function()(
      &map, type, 2, const_cast<void*>(data), sizes, row_pitch_bytes, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    throw std::runtime_error("cuTensorMapEncodeTiled failed with CUresult " +
                             std::to_string(static_cast<int>(result)) +
                             " (TMA needs a 16-byte-aligned base and a row pitch that is a "
                             "multiple of 16 bytes)");
  }
  return map;
}

}  // namespace

CUtensorMap make_bf16_tensor_map(void const* data, int rows, int cols, long long ld, int box_rows,
                                 int box_cols, CUtensorMapL2promotion promotion,
                                 CUtensorMapSwizzle swizzle) {
  return make_tensor_map(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, data, rows, cols, ld, box_rows,
                         box_cols, promotion, swizzle);
}

CUtensorMap make_fp8_tensor_map(void const* data, int rows, int cols, long long ld, int box_rows,
                                int box_cols) {
  return make_tensor_map(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, data, rows, cols, ld, box_rows, box_cols,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_SWIZZLE_128B);
}

}  // namespace gemm
