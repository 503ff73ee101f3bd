// Step 16: swizzled shared memory, a multistage cp.async pipeline, grouped block order, and a
// tile picked by a sweep. The kernel is a template (swizzled_pipeline.cuh); this file names
// the configuration the sweep (sweep.cu) chose on an H100 SXM.
#include "gemm.h"
#include "swizzled_pipeline.cuh"

namespace {

//                                  kBM  kBN kBK kWM kWN stages
using Tile = swizzled::TileConfig<128, 128, 32, 64, 64, 4>;

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, __nv_bfloat16 const* A, int lda,
                     __nv_bfloat16 const* B, int ldb, float beta, __nv_bfloat16* C, int ldc,
                     cudaStream_t stream) {
  swizzled::launch<Tile>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
}
