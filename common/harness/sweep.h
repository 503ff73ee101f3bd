// A tuning sweep: many variants of one step's kernel template (tile shapes, stages, launch
// plans), each checked against the float64 reference and timed against cuBLAS in the same
// process, exactly as the step executables do. A step with a templated kernel gets a sweep by
// listing its candidates in a small sweep.cu (steps/12_autotuned_tile/sweep.cu):
//
//   int main(int argc, char** argv) {
//     return gemm::run_sweep<gemm::Fp32>("step 12 tile sweep", argc, argv,
//                                        {{"64x128x16 s4", launch<TileConfig<...>>}, ...});
//   }
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "cli.h"

namespace gemm {

template <typename Precision>
struct SweepCandidate {
  std::string name;
  // Called like the step's entry point (common/gemm.h).
  std::function<void(int, int, int, float, typename Precision::Input const*, int,
                     typename Precision::Input const*, int, float, typename Precision::Output*, int,
                     cudaStream_t)>
      gemm;
};

// Command line: [--warmup N] [--repeats N] [--seed S] [--alpha X] [--beta X] [SIZE ...];
// without sizes, `default_shapes`. Prints one line per candidate and size, then the three
// fastest correct candidates per size. Returns the exit code (1 if any candidate was wrong).
template <typename Precision>
int run_sweep(std::string const& title, int argc, char** argv,
              std::vector<SweepCandidate<Precision>> const& candidates,
              std::vector<Shape> const& default_shapes = {
                  {4096, 4096, 4096}, {8192, 8192, 8192}, {4097, 4097, 4097}, {1000, 3000, 2000}});

}  // namespace gemm
