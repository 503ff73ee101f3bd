// Reads the CSV rows that the step executables print (--csv) and prints the progression
// table in Markdown, one table per problem shape. run_all.sh calls it; usage:
//   progression_table FILE.csv [FILE.csv ...]
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "report.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " FILE.csv [FILE.csv ...]\n";
    return gemm::kExitUsage;
  }
  std::string all;
  for (int i = 1; i < argc; ++i) {
    std::ifstream file(argv[i]);
    if (!file) {
      std::cerr << argv[0] << ": cannot read " << argv[i] << "\n";
      return gemm::kExitUsage;
    }
    std::ostringstream text;
    text << file.rdbuf();
    all += text.str() + "\n";
  }
  try {
    std::cout << gemm::progression_tables(gemm::parse_csv(all));
  } catch (std::exception const& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return gemm::kExitUsage;
  }
  return 0;
}
