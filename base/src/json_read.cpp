// Strict JSON reading for every input file: bounded size, regular files only, bounded nesting,
// no duplicate keys, numbers that fit a double. Errors name the source and the JSON path.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_set>

#include "wallsim/base/params.h"

namespace wallsim::base {

namespace {

std::string strip_nlohmann_prefix(std::string msg) {
  // nlohmann's messages start "[json.exception.parse_error.N] ".
  auto pos = msg.find("] ");
  if (pos != std::string::npos) msg = msg.substr(pos + 2);
  return msg;
}

// A SAX handler that builds the DOM (by delegating to nlohmann's own) and refuses what the plain
// parser lets through. It keeps the JSON path of the value being read for its messages.
class StrictSax {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  explicit StrictSax(Json& root) : m_dom(root, /*allow_exceptions=*/false) {}

  bool null() { return value() && m_dom.null(); }
  bool boolean(bool v) { return value() && m_dom.boolean(v); }
  bool number_integer(number_integer_t v) { return value() && m_dom.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) { return value() && m_dom.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) {
    return value() && m_dom.number_float(v, s);
  }
  bool string(string_t& v) { return value() && m_dom.string(v); }
  bool binary(binary_t& v) { return value() && m_dom.binary(v); }
  bool start_object(std::size_t n) { return open(true) && m_dom.start_object(n); }
  bool start_array(std::size_t n) { return open(false) && m_dom.start_array(n); }
  bool end_object() {
    m_frames.pop_back();
    return m_dom.end_object();
  }
  bool end_array() {
    m_frames.pop_back();
    return m_dom.end_array();
  }
  bool key(string_t& k) {
    Frame& f = m_frames.back();
    if (!f.keys.insert(k).second) return fail(path_with(k) + ": duplicate key");
    f.key = k;
    return m_dom.key(k);
  }
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& ex) {
    if (m_error.empty()) {
      std::string msg = strip_nlohmann_prefix(ex.what());
      if (ex.id == 406) {  // out_of_range: "number overflow parsing '1e400'"
        auto q = msg.find('\'');
        std::string num = q == std::string::npos ? msg : msg.substr(q);
        value();  // the number is the next element of an array: its index counts
        m_error = where() + "number " + num + " does not fit a double";
      } else {
        m_error = "invalid JSON: " + msg + (m_frames.empty() ? "" : " (in " + path() + ")");
      }
    }
    return false;
  }
  const std::string& error() const { return m_error; }

 private:
  struct Frame {
    bool object;
    std::unordered_set<std::string> keys;
    std::string key;
    int64_t index = -1;
  };

  bool fail(std::string msg) {
    if (m_error.empty()) m_error = std::move(msg);
    return false;
  }
  // Called before every value: counts array elements for the path.
  bool value() {
    if (!m_frames.empty() && !m_frames.back().object) ++m_frames.back().index;
    return true;
  }
  bool open(bool object) {
    value();
    if (static_cast<int>(m_frames.size()) >= kMaxJsonDepth) {
      return fail(where() + "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    m_frames.push_back(Frame{object, {}, {}, -1});
    return true;
  }
  std::string path() const {
    std::string p;
    for (const Frame& f : m_frames) {
      if (&f == &m_frames.back() && f.object && f.key.empty()) break;
      if (f.object) {
        if (!p.empty()) p += ".";
        p += f.key;
      } else {
        p += "[" + std::to_string(f.index < 0 ? 0 : f.index) + "]";
      }
    }
    return p;
  }
  std::string path_with(const std::string& k) const {
    std::string p;
    for (size_t i = 0; i + 1 < m_frames.size(); ++i) {
      const Frame& f = m_frames[i];
      if (f.object) {
        if (!p.empty()) p += ".";
        p += f.key;
      } else {
        p += "[" + std::to_string(f.index) + "]";
      }
    }
    return p + (p.empty() ? "" : ".") + k;
  }
  std::string where() const {
    std::string p = path();
    return p.empty() ? std::string() : p + ": ";
  }

  nlohmann::detail::json_sax_dom_parser<Json> m_dom;
  std::vector<Frame> m_frames;
  std::string m_error;
};

}  // namespace

Json parse_json(std::string_view text, const std::string& source) {
  Json root;
  StrictSax sax(root);
  if (!Json::sax_parse(text.begin(), text.end(), &sax) || !sax.error().empty()) {
    throw InputError(source, sax.error().empty() ? "invalid JSON" : sax.error());
  }
  return root;
}

std::string read_input_file(const std::string& path, int64_t max_bytes) {
  // stat first: opening a FIFO would block, and /dev/zero never ends.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) throw InputError(path, "cannot open file");
    throw InputError(path, std::string("cannot open file: ") + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw InputError(path, "is a directory, not a file");
  if (!S_ISREG(st.st_mode)) throw InputError(path, "not a regular file");
  auto too_large = [&] {
    return InputError(path,
                      "file larger than the limit of " + std::to_string(max_bytes >> 20) + " MiB");
  };
  if (st.st_size > max_bytes) throw too_large();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw InputError(path, std::string("cannot open file: ") + std::strerror(errno));
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw InputError(path, std::string("cannot read file: ") + std::strerror(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (static_cast<int64_t>(out.size()) > max_bytes) {
      ::close(fd);
      throw too_large();
    }
  }
  ::close(fd);
  return out;
}

Json read_json_file(const std::string& path, int64_t max_bytes) {
  return parse_json(read_input_file(path, max_bytes), path);
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : -1;
    if (n < 0 || (n == 1 && c < 0xc2)) return false;
    if (i + static_cast<size_t>(n) >= s.size()) return false;
    for (int k = 1; k <= n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    if (n == 2) {
      auto c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0)) return false;
    }
    if (n == 3) {
      auto c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xf0 && c1 < 0x90) || c > 0xf4 || (c == 0xf4 && c1 >= 0x90)) return false;
    }
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

}  // namespace wallsim::base
