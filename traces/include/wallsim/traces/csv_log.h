// CsvLog: a streaming CSV table (one header, one line per row) for pandas — e.g. the
// instruction-level log. Writes `path.tmp` and renames it into place on finish().
#pragma once

#include <fstream>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace wallsim::traces {

// The columns of the instruction log (`instructions.csv`, docs/OUTPUTS.md §4).
inline std::vector<std::string> instruction_csv_columns() {
  return {"plan",     "stream", "index",    "opcode",      "node",
          "start_ps", "end_ps", "ready_ps", "busy_cycles", "bytes"};
}

class CsvLog {
 public:
  CsvLog(const std::string& path, std::vector<std::string> columns);
  ~CsvLog();  // an unfinished log is abandoned: its temporary file is removed
  CsvLog(const CsvLog&) = delete;
  CsvLog& operator=(const CsvLog&) = delete;

  // One row; fields are quoted when they contain a comma, quote or newline. The number of
  // fields must equal the number of columns (std::invalid_argument otherwise).
  void row(std::initializer_list<std::string_view> fields);
  // Puts the file in place; throws WriteError (write_error.h) when a write failed.
  void finish();

 private:
  std::string m_path;
  size_t m_columns;
  std::ofstream m_out;
  bool m_finished = false;
  int m_errno = 0;  // of the first failed write
  std::string m_line;
};

}  // namespace wallsim::traces
