// What the harness prints: one measurement per problem, as a human-readable line or a CSV row.
// The CSV is read back in one place, by column name: common/harness/results.py (the progress
// lines, the progression tables and the plot of run_all.sh, and its shape atlas).
#pragma once

#include <string>
#include <utility>

#include "cli.h"

namespace gemm {

struct Measurement {
  std::string step;       // "03"
  std::string name;       // "shared_tiling"
  std::string precision;  // "fp32"
  Shape shape;            // with its ld_pad: the CSV's last column, and the human row's ":ld+P"
  float alpha = 1.0f;
  float beta = 0.0f;
  double step_ms = 0.0;    // median kernel time
  double cublas_ms = 0.0;  // median cuBLAS time, same process, same inputs
  bool check_passed = false;
  double max_error_over_bound = 0.0;
  double relative_error = 0.0;
  bool cublas_ran = true;  // false where the baseline offers nothing at this shape
  bool cublas_check_passed = false;
  std::string gpu;

  double gflops() const { return shape.flops() / (step_ms * 1e-3) / 1e9; }
  double cublas_gflops() const { return shape.flops() / (cublas_ms * 1e-3) / 1e9; }
  double percent_of_cublas() const { return 100.0 * cublas_ms / step_ms; }
};

// Splits a step directory name "03_shared_tiling" into {"03", "shared_tiling"}.
std::pair<std::string, std::string> split_step_name(std::string const& directory_name);

std::string csv_header();
std::string csv_row(Measurement const& m);
// Quotes a CSV field when it holds a comma, a quote or a line break (RFC 4180).
std::string csv_escape(std::string const& field);

std::string human_header();
std::string human_row(Measurement const& m, std::string const& check_summary);

}  // namespace gemm
