// What the harness prints: one measurement per problem, as a human-readable line or a CSV row,
// and the progression table that run_all.sh builds from the CSV rows of every step.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cli.h"

namespace gemm {

struct Measurement {
  std::string step;       // "03"
  std::string name;       // "shared_tiling"
  std::string precision;  // "fp32"
  Shape shape;
  float alpha = 1.0f;
  float beta = 0.0f;
  double step_ms = 0.0;    // median kernel time
  double cublas_ms = 0.0;  // median cuBLAS time, same process, same inputs
  bool check_passed = false;
  double max_error_over_bound = 0.0;
  double relative_error = 0.0;
  bool cublas_check_passed = false;
  std::string gpu;

  double gflops() const { return shape.flops() / (step_ms * 1e-3) / 1e9; }
  double cublas_gflops() const { return shape.flops() / (cublas_ms * 1e-3) / 1e9; }
  double percent_of_cublas() const { return 100.0 * cublas_ms / step_ms; }
};

// The median (mean of the two middle values for an even count); throws on an empty vector.
double median_of(std::vector<double> values);

// Splits a step directory name "03_shared_tiling" into {"03", "shared_tiling"}.
std::pair<std::string, std::string> split_step_name(std::string const& directory_name);

std::string csv_header();
std::string csv_row(Measurement const& m);
// Quotes a CSV field when it holds a comma, a quote or a line break (RFC 4180).
std::string csv_escape(std::string const& field);
// Splits one CSV line into fields, undoing csv_escape.
std::vector<std::string> parse_csv_line(std::string const& line);

std::string human_header();
std::string human_row(Measurement const& m, std::string const& check_summary);

// One CSV row as column name -> text, as read back by the table builder.
using CsvRecord = std::map<std::string, std::string>;
std::vector<CsvRecord> parse_csv(std::string const& text);

// Markdown progression tables, one per problem shape, steps in order: GFLOPS, % of cuBLAS
// (measured in the step's own process), speedup over the previous step, check result; and a
// last row with the median cuBLAS GFLOPS over all the steps' runs.
std::string progression_tables(std::vector<CsvRecord> const& records);

}  // namespace gemm
