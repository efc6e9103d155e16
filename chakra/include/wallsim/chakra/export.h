// Chakra export: each rank's retired launches as an MLCommons Chakra execution trace (one
// `<name>.<rank>.et` per rank), for ASTRA-sim to replay (docs/CHAKRA.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "wallsim/chakra/astra_configs.h"
#include "wallsim/engines/launch.h"

namespace wallsim::chakra {

struct ExportInfo {
  std::string name;      // file prefix: <name>.<rank>.et
  std::string workload;  // the workload spec, in the metadata
  std::string mode;      // the execution mode, in the metadata
  int64_t world = 1;
  // The rank of the core at (chip, core); -1 when no rank runs there.
  std::function<int64_t(int, int)> rank_of;
  NetworkDims dims;  // involved_dim's dimensions (astra_configs.h)
};

class RankRecorder;

// Writes every rank's file into `dir` (which must exist) as its launches retire: call record()
// from the core's on_retire hook, then finish() once every core is retired. Deterministic: the
// same launches in the same order give byte-identical files.
class Exporter {
 public:
  Exporter(std::string dir, ExportInfo info);
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  void record(int64_t rank, const engines::Launch& launch);
  // Closes the files and writes <name>.comm_groups.json and chakra.json (per rank: nodes by type,
  // compute_ns). Throws traces::WriteError when a file cannot be written.
  void finish();

  // The id (>= 1, in first-seen order) of a communicator's sorted member ranks.
  int64_t group_id(const std::vector<int64_t>& members);
  const ExportInfo& info() const { return m_info; }

 private:
  std::string m_dir;
  ExportInfo m_info;
  std::vector<std::unique_ptr<RankRecorder>> m_ranks;
  std::map<std::vector<int64_t>, int64_t> m_groups;
};

}  // namespace wallsim::chakra
