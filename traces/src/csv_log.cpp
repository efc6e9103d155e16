// Streaming CSV with atomic completion.
#include "wallsim/traces/csv_log.h"

#include <cerrno>
#include <cstdio>
#include <stdexcept>

#include "wallsim/traces/write_error.h"

namespace wallsim::traces {
namespace {

void append_field(std::string& line, std::string_view f) {
  if (f.find_first_of(",\"\n\r") == std::string_view::npos) {
    line.append(f);
    return;
  }
  line.push_back('"');
  for (char c : f) {
    if (c == '"') line.push_back('"');
    line.push_back(c);
  }
  line.push_back('"');
}

}  // namespace

CsvLog::CsvLog(const std::string& path, std::vector<std::string> columns)
    : m_path(path), m_columns(columns.size()), m_out(path + ".tmp", std::ios::trunc) {
  if (!m_out) throw WriteError(path, errno_reason(errno));
  m_line.clear();
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i) m_line.push_back(',');
    append_field(m_line, columns[i]);
  }
  m_line.push_back('\n');
  m_out << m_line;
}

CsvLog::~CsvLog() {
  if (!m_finished) {
    m_out.close();
    std::remove((m_path + ".tmp").c_str());
  }
}

void CsvLog::row(std::initializer_list<std::string_view> fields) {
  if (fields.size() != m_columns) throw std::invalid_argument("CsvLog: wrong number of fields");
  m_line.clear();
  bool first = true;
  for (std::string_view f : fields) {
    if (!first) m_line.push_back(',');
    first = false;
    append_field(m_line, f);
  }
  m_line.push_back('\n');
  m_out << m_line;
  if (!m_out && m_errno == 0) m_errno = errno;  // the first failure's reason (a full disk)
}

void CsvLog::finish() {
  if (m_finished) return;
  errno = 0;
  m_out.close();
  if (!m_out || std::rename((m_path + ".tmp").c_str(), m_path.c_str()) != 0) {
    const int err = m_errno != 0 ? m_errno : errno;
    std::remove((m_path + ".tmp").c_str());
    throw WriteError(m_path, errno_reason(err));
  }
  m_finished = true;
}

}  // namespace wallsim::traces
