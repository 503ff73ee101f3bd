// The tuning sweep of step 12: builds a set of tile configurations from the step's kernel
// template (autotuned_tile.cuh), checks each against the float64 reference and times it
// against cuBLAS, on the GPU present. Meson builds it as build/sweep_12_autotuned_tile:
//   build/sweep_12_autotuned_tile [SIZE ...]      default: 4096 8192 4097 1000x3000x2000
// README.md reads a run of it. To try a configuration of your own, add a line below: an
// invalid one fails a static_assert in TileConfig and names the rule it broke.
#include "autotuned_tile.cuh"
#include "precision.h"
#include "sweep.h"

namespace {

using autotuned::TileConfig;

template <class Cfg>
gemm::SweepCandidate<gemm::Fp32> candidate(std::string name) {
  std::string const details = " (" + std::to_string(Cfg::kThreads) + " thr, " +
                              std::to_string(Cfg::kTM) + "x" + std::to_string(Cfg::kTN) + "/thr, " +
                              std::to_string(Cfg::kSharedBytes / 1024) + " KB, " +
                              std::to_string(Cfg::kMinBlocksPerSM) + "/SM)";
  return {std::move(name) + details, autotuned::launch<Cfg>};
}

}  // namespace

int main(int argc, char** argv) {
  //                  kBM  kBN  kBK kWM kWN lanesM stages blocks/SM
  return gemm::run_sweep<gemm::Fp32>(
      "step 12 tile sweep", argc, argv,
      {
          // Step 11's tile, as the baseline.
          candidate<TileConfig<128, 128, 16, 64, 32, 8, 4, 2>>("128x128x16 w64x32 s4 (step 11)"),
          candidate<TileConfig<128, 128, 16, 64, 32, 8, 3, 2>>("128x128x16 w64x32 s3"),
          candidate<TileConfig<128, 128, 16, 32, 64, 4, 4, 2>>("128x128x16 w32x64 s4"),
          candidate<TileConfig<128, 128, 32, 32, 64, 4, 2, 2>>("128x128x32 w32x64 s2"),
          candidate<TileConfig<128, 128, 32, 32, 64, 4, 3, 2>>("128x128x32 w32x64 s3"),
          candidate<TileConfig<128, 256, 16, 64, 64, 4, 3, 1>>("128x256x16 w64x64 s3"),
          candidate<TileConfig<128, 64, 16, 32, 64, 4, 4, 4>>("128x64x16 w32x64 s4"),
          candidate<TileConfig<64, 128, 16, 32, 64, 4, 3, 4>>("64x128x16 w32x64 s3"),
          candidate<TileConfig<64, 128, 16, 32, 64, 4, 4, 4>>("64x128x16 w32x64 s4 (kept)"),
          candidate<TileConfig<64, 128, 32, 32, 64, 4, 2, 4>>("64x128x32 w32x64 s2"),
          candidate<TileConfig<64, 64, 16, 32, 32, 4, 4, 5>>("64x64x16 w32x32 s4"),
          // 16 x 8 results per thread, like cuBLAS's 256 x 128 tile: more FFMAs per shared load.
          candidate<TileConfig<128, 128, 16, 64, 64, 4, 4, 2>>("128x128x16 w64x64 l4x8 s4"),
          candidate<TileConfig<128, 128, 16, 64, 64, 8, 4, 2>>("128x128x16 w64x64 l8x4 s4"),
          candidate<TileConfig<128, 128, 16, 64, 64, 4, 3, 2>>("128x128x16 w64x64 l4x8 s3"),
      });
}
