// A development probe behind step 48's notebook (not built by meson): step 48's translation unit
// with every entry of kShapes callable by index. Per shape: cuBLAS, step 48's own call and each of
// its tiles of SW_MINH rows or more (default 128) with two or three consumers (or the kShapes
// indices listed in SW_ONLY, e.g. SW_ONLY=0,9,37), called round-robin (the order reversed every
// round), each call timed by CUDA events; medians of SW_ROUNDS rounds (default 15) after 3 warm-up
// rounds. Prints each one's % of cuBLAS, step 48's modeled_time and the largest difference from
// cuBLAS's C. From the repository root:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Icommon -Icommon/harness
//       docs/results/notebooks/tile_sweep_48.cu common/gemm_arguments.cpp common/workspace.cpp
//       common/tensor_map.cpp -lcublas -lcuda -o tile_sweep_48
//   SW_ROUNDS=21 ./tile_sweep_48 8192 4096x14336x4096 4104:ld+8
#include <cublas_v2.h>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>
#include "../../../steps/48_tiles_in_turn/tiles_in_turn.cu"

static char const* pairing_name(Pairing p) {
  return p == Pairing::kStacked ? "S" : p == Pairing::kSideBySide ? "X" : "T";
}
// The kShapes index of the tile gemm::bf16_gemm runs: its choice, line for line (the step keeps it
// inside bf16_gemm, so the probe repeats it; a change to the step's rule must be made here too).
static int chosen_index(int m, int n, int k, bf16 const* A, int lda, bf16 const* C, int ldc) {
  int const clusters = std::max(1, gemm::multiprocessor_count() / kClusterSize);
  TileShape const plan = choose_tile(kPlanShapes, m, n, k, clusters, [&](TileShape candidate) {
    return fits_one_round(candidate, m, n, clusters) && stacks_where_it_pays(candidate, m, n);
  });
  TileShape const in_turn = choose_tile(kInTurnShapes, m, n, k, clusters);
  bool const take_turns = tiles_in_turn_pay(plan, in_turn, m, n, k, A, lda, C, ldc, clusters);
  TileShape const s = run_shape(take_turns ? in_turn : plan, m, n, k, A, lda, clusters);
  for (std::size_t i = 0; i < kShapeCount; ++i)
    if (kShapes[i].height == s.height && kShapes[i].consumers == s.consumers &&
        kShapes[i].pairing == s.pairing && kShapes[i].work == s.work)
      return (int)i;
  return -1;
}
static double cost_of(TileShape s, int m, int n, int k) {
  int const clusters = std::max(1, gemm::multiprocessor_count() / kClusterSize);
  return modeled_time(s, m, n, k, clusters);
}

int main(int argc, char** argv) {
  int rounds_n = std::getenv("SW_ROUNDS") ? std::atoi(std::getenv("SW_ROUNDS")) : 15;
  int min_h = std::getenv("SW_MINH") ? std::atoi(std::getenv("SW_MINH")) : 128;
  cublasHandle_t handle;
  cublasCreate(&handle);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int a = 1; a < argc; ++a) {
    int m, n, k, pad = 0;
    std::string arg = argv[a];
    auto colon = arg.find(":ld+");
    if (colon != std::string::npos) {
      pad = std::atoi(arg.c_str() + colon + 4);
      arg = arg.substr(0, colon);
    }
    if (std::sscanf(arg.c_str(), "%dx%dx%d", &m, &n, &k) != 3) m = n = k = std::atoi(arg.c_str());
    int const lda = k + pad, ldb = n + pad, ldc = n + pad;
    std::vector<bf16> ha((size_t)m * lda), hb((size_t)k * ldb);
    for (auto& x : ha)
      x = bf16(u(rng));
    for (auto& x : hb)
      x = bf16(u(rng));
    bf16 *A, *B, *C, *Cref;
    cudaMalloc(&A, ha.size() * 2);
    cudaMalloc(&B, hb.size() * 2);
    cudaMalloc(&C, (size_t)m * ldc * 2);
    cudaMalloc(&Cref, (size_t)m * ldc * 2);
    cudaMemcpy(A, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(B, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice);
    float alpha = 1.f, beta = 0.f;
    auto cublas_call = [&] {
      cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, CUDA_R_16BF, ldb, A,
                   CUDA_R_16BF, lda, &beta, Cref, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
    };
    std::vector<int> cand;
    if (char const* only = std::getenv("SW_ONLY")) {  // a comma-separated list of kShapes indices
      for (char const* p = only; *p;) {
        cand.push_back(std::atoi(p));
        while (*p && *p != ',')
          ++p;
        if (*p) ++p;
      }
    } else {
      for (std::size_t i = 0; i < kShapeCount; ++i)
        if (kShapes[i].height >= min_h && kShapes[i].consumers >= 2) cand.push_back((int)i);
    }
    int const chosen = chosen_index(m, n, k, A, lda, C, ldc);
    // -1 = cuBLAS, -2 = bf16_gemm (the step's own choice)
    std::vector<int> order = {-1, -2};
    for (int c : cand)
      order.push_back(c);
    auto call = [&](int which) {
      if (which == -1)
        cublas_call();
      else if (which == -2)
        gemm::bf16_gemm(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, 0);
      else
        gemm_with_tile<kShapes, RelaxedClusterSync, ZeroingHandOver, PromotionByPitch,
                       UniformDescriptors, TmaLoadsOfC>(kShapes[which], m, n, k, alpha, A, lda, B,
                                                        ldb, beta, C, ldc, 0);
    };
    // correctness: each candidate's C against cuBLAS's, max abs diff
    cublas_call();
    std::vector<bf16> ref((size_t)m * ldc), got((size_t)m * ldc);
    cudaMemcpy(ref.data(), Cref, ref.size() * 2, cudaMemcpyDeviceToHost);
    std::vector<float> maxdiff(order.size());
    for (std::size_t j = 1; j < order.size(); ++j) {
      cudaMemset(C, 0xff, (size_t)m * ldc * 2);
      call(order[j]);
      cudaMemcpy(got.data(), C, got.size() * 2, cudaMemcpyDeviceToHost);
      float md = 0;
      for (int r = 0; r < m; ++r)
        for (int c = 0; c < n; ++c) {
          float d = std::fabs(float(got[(size_t)r * ldc + c]) - float(ref[(size_t)r * ldc + c]));
          if (!(d <= md)) md = d;  // NaN propagates
        }
      maxdiff[j] = md;
    }
    for (int w = 0; w < 3; ++w)
      for (int o : order)
        call(o);
    std::vector<std::vector<float>> t(order.size());
    for (int r = 0; r < rounds_n; ++r)
      for (std::size_t j = 0; j < order.size(); ++j) {
        std::size_t jj = (r % 2) ? order.size() - 1 - j : j;  // alternate direction
        cudaEventRecord(e0);
        call(order[jj]);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        t[jj].push_back(ms);
      }
    auto med = [](std::vector<float> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    double const cb = med(t[0]);
    double const flops = 2.0 * m * n * k;
    std::printf("== %s  (pad %d)  cuBLAS %.1f us %.1f TFLOP/s   err=%s\n", argv[a], pad, cb * 1e3,
                flops / cb / 1e9, cudaGetErrorString(cudaDeviceSynchronize()));
    for (std::size_t j = 1; j < order.size(); ++j) {
      double const ms = med(t[j]);
      if (order[j] == -2) {
        TileShape s = kShapes[chosen];
        std::printf("  step48 choice %3d x %d %s %s  %8.1f us  %6.1f%%  maxdiff %.3g\n", s.height,
                    s.consumers, pairing_name(s.pairing),
                    s.work == ConsumerWork::kTilesInTurn ? "turn" : "coop", ms * 1e3, 100 * cb / ms,
                    maxdiff[j]);
      } else {
        TileShape s = kShapes[order[j]];
        std::printf("  [%2d]  %3d x %d %s %s  %8.1f us  %6.1f%%  model %.4g  maxdiff %.3g%s\n",
                    order[j], s.height, s.consumers, pairing_name(s.pairing),
                    s.work == ConsumerWork::kTilesInTurn ? "turn" : "coop", ms * 1e3, 100 * cb / ms,
                    cost_of(s, m, n, k) / 1e6, maxdiff[j], order[j] == chosen ? "  <= chosen" : "");
      }
    }
    std::fflush(stdout);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    cudaFree(Cref);
  }
}
