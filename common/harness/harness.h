// The benchmark harness every step executable runs: parse the command line, describe the GPU,
// then for each problem size check the step against a float64 reference, time it and cuBLAS
// in the same process, and print one line (or one CSV row).
#pragma once

#include <string>

#include "precision.h"

namespace gemm {

// `step_directory` is the step's directory name, e.g. "03_shared_tiling"; `step` its entry
// point. Returns the process exit code (see cli.h).
template <typename Precision>
int run_harness(std::string const& step_directory, int argc, char** argv,
                StepFunction<Precision> step);

}  // namespace gemm
