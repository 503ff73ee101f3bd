// What the programs say about the GPU and the software: the header lines of every run, and a
// message a newcomer can act on when there is no GPU or no code for it. Used by the step
// executables, the sweeps, the GPU test suite and the demos.
#pragma once

#include <cuda_runtime.h>

#include <optional>
#include <string>

namespace gemm {

// One line naming the GPU, its SM count, clocks and memory; and one naming the CUDA runtime,
// driver and cuBLAS versions. Throws CudaError when there is no usable GPU.
std::string describe_gpu(int device);
std::string describe_software();

// nullopt when CUDA sees a GPU; otherwise what is missing, in words a newcomer can act on
// ("no NVIDIA driver or GPU found", "the driver is older than the CUDA runtime", ...).
std::optional<std::string> why_no_gpu();

// For the Hopper steps (17 and later, built for sm_90a only): nullopt when GPU 0 has compute
// capability 9.0 (H100, H200, GH200); otherwise why the step cannot run, naming the GPU. Call
// after why_no_gpu().
std::optional<std::string> why_not_sm90a();

// For the executables of the Hopper steps: true, after printing "<step>: <why_not_sm90a()>", when
// there is a GPU but not one of compute capability 9.0 (the caller then exits with kExitSkipped);
// false when there is none (the harness says so itself) or when it is a Hopper GPU.
bool skipped_for_not_sm90a(char const* step);

// For programs that need a GPU and have nothing to do without one (the demos): nullopt when
// there is a GPU; otherwise prints "<program>: <why_no_gpu()>" and returns 3, the exit code
// the step executables use for "no GPU".
std::optional<int> exit_code_without_gpu(char const* program);

// For a failed launch or call: a sentence on what to do when the error means that this build
// has no code for the GPU present (built for another architecture); empty otherwise.
std::string advice_for(cudaError_t status);

}  // namespace gemm
