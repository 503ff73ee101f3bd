// The benchmark harness every step executable runs: parse the command line, describe the GPU,
// then for each problem size check the step against a float64 reference, time it and cuBLAS
// in the same process, and print one line (or one CSV row).
#pragma once

#include <string>

namespace gemm {

// `step_directory` is the step's directory name, e.g. "03_shared_tiling".
// Returns the process exit code (see cli.h).
template <typename Precision>
int run_harness(std::string const& step_directory, int argc, char** argv);

// One line naming the GPU, its SM count, clocks and memory; and one naming the CUDA runtime,
// driver and cuBLAS versions. Throws CudaError when there is no usable GPU.
std::string describe_gpu(int device);
std::string describe_software();
// The GPU's name, for the CSV.
std::string gpu_name(int device);

}  // namespace gemm
