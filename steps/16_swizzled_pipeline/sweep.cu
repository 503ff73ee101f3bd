// The tuning sweep of step 16: builds tile configurations from the kernel template
// (swizzled_pipeline.cuh), checks each against the float64 reference and times it against
// cuBLAS BF16 on the GPU present. Meson builds it as build/sweep_16_swizzled_pipeline:
//   build/sweep_16_swizzled_pipeline [SIZE ...]      default: 4096 8192
// To try a configuration of your own, add a line below; an invalid one fails a static_assert
// in TileConfig that names the rule it broke.
#include "precision.h"
#include "sweep.h"
#include "swizzled_pipeline.cuh"

namespace {

using swizzled::TileConfig;

template <class Cfg>
gemm::SweepCandidate<gemm::Bf16> candidate(std::string name) {
  std::string const details = " (" + std::to_string(Cfg::kThreads) + " thr, " +
                              std::to_string(Cfg::kSharedBytes / 1024) + " KB)";
  return {std::move(name) + details, swizzled::launch<Cfg>};
}

}  // namespace

int main(int argc, char** argv) {
  //                                  kBM  kBN kBK kWM kWN stages
  return gemm::run_sweep<gemm::Bf16>(
      "step 16 tile sweep", argc, argv,
      {
          candidate<TileConfig<128, 128, 32, 64, 64, 2, 1>>("128x128x32 w64x64 s2"),
          candidate<TileConfig<128, 128, 32, 64, 64, 3, 1>>("128x128x32 w64x64 s3 (step 15's)"),
          candidate<TileConfig<128, 128, 32, 64, 64, 4, 1>>("128x128x32 w64x64 s4"),
          candidate<TileConfig<128, 128, 32, 64, 64, 5, 1>>("128x128x32 w64x64 s5"),
          candidate<TileConfig<128, 128, 32, 64, 64, 6, 1>>("128x128x32 w64x64 s6"),
          candidate<TileConfig<128, 128, 64, 64, 64, 3, 1>>("128x128x64 w64x64 s3"),
          candidate<TileConfig<128, 256, 32, 64, 64, 4, 1>>("128x256x32 w64x64 s4"),
          candidate<TileConfig<128, 256, 64, 64, 64, 3, 1>>("128x256x64 w64x64 s3"),
          candidate<TileConfig<256, 128, 64, 64, 64, 3, 1>>("256x128x64 w64x64 s3"),
          // Smaller warp tiles under a 128-register cap: twice the warps per SM.
          candidate<TileConfig<128, 128, 32, 64, 32, 4, 2>>("128x128x32 w64x32 s4 2/SM"),
          candidate<TileConfig<128, 128, 32, 32, 64, 4, 2>>("128x128x32 w32x64 s4 2/SM"),
          // The block order: row-major, and groups of 4 or 16 tile rows instead of 8.
          candidate<TileConfig<128, 128, 32, 64, 64, 4, 1, 1>>("128x128x32 w64x64 s4 row order"),
          candidate<TileConfig<128, 128, 32, 64, 64, 4, 1, 4>>("128x128x32 w64x64 s4 group 4"),
          candidate<TileConfig<128, 128, 32, 64, 64, 4, 1, 16>>("128x128x32 w64x64 s4 group 16"),
      },
      {{4096, 4096, 4096}, {8192, 8192, 8192}});
}
