// Step 17: the instruction diet. Step 16's swizzled, multistage kernel with fewer instructions
// around each mma.sync: one pointer per operand for the copies, a k loop without bounds for whole
// blocks, copies spread among the mma.sync, and the stage as a compile-time constant. The kernel is
// a template (instruction_diet.cuh); this file names the configuration the sweep (sweep.cu) chose
// on an H100 SXM.
#include "gemm.h"
#include "instruction_diet.cuh"

namespace {

//                                  kBM  kBN kBK kWM kWN stages blocks/SM group
using Tile = diet::TileConfig<128, 128, 64, 64, 64, 3, 1, 16>;

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, __nv_bfloat16 const* A, int lda,
                     __nv_bfloat16 const* B, int ldb, float beta, __nv_bfloat16* C, int ldc,
                     cudaStream_t stream) {
  diet::launch<Tile>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
}
