// The stand-in for a Hopper step (17 and later) in a build for another GPU architecture: those
// kernels use TMA and wgmma, which exist only on sm_90a, so meson.build does not compile them.
// This executable (and the step's test, which runs it) says so and exits 77, "skipped".
#include <cstdio>

int main() {
  std::fprintf(stderr,
               "%s: not built: this step uses Hopper-only instructions (TMA, wgmma; sm_90a) and "
               "this build targets %s. On an H100 or H200: meson setup build --wipe "
               "-Dgpu_arch=90a (or ./run_all.sh, which picks the GPU present).\n",
               GEMM_STEP_NAME, GEMM_BUILD_ARCH);
  return 77;
}
