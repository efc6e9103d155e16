// The serve workload's report: throughput, latency percentiles, iterations, the KV pool and
// every request.
#include <algorithm>
#include <climits>

#include "serve_batching.h"
#include "wallsim/traces/stats.h"
#include "workload_params.h"

namespace wallsim::workloads::detail {

using nlohmann::ordered_json;

ordered_json serving_report(std::string_view scheduler, const std::vector<Seq>& seqs,
                            const ServeTally& t) {
  std::vector<double> ttft, tpot, e2e;
  int64_t tokens = 0, preemptions = 0, first_arrival = INT64_MAX;
  ordered_json requests = ordered_json::array();
  for (const Seq& q : seqs) {
    const int64_t arrival = t.start_ns + q.req->arrival_ns;
    first_arrival = std::min(first_arrival, arrival);
    tokens += q.generated;
    preemptions += q.preemptions;
    ttft.push_back(double(q.token_ns.front() - arrival));
    e2e.push_back(double(q.token_ns.back() - arrival));
    for (size_t i = 1; i < q.token_ns.size(); ++i) {
      tpot.push_back(double(q.token_ns[i] - q.token_ns[i - 1]));
    }
    ordered_json r = {{"id", q.req->id},
                      {"arrival_ns", q.req->arrival_ns},
                      {"prompt", q.req->prompt},
                      {"output", q.req->output},
                      {"tokens", q.generated},
                      {"ttft_ns", q.token_ns.front() - arrival},
                      {"latency_ns", q.token_ns.back() - arrival},
                      {"preemptions", q.preemptions}};
    if (!q.values.empty()) r["values"] = q.values;
    requests.push_back(r);
  }
  const double span_s = double(t.end_ns - first_arrival) / 1e9;
  ordered_json latency = ordered_json::object();
  auto put = [&](const std::string& name, const std::vector<double>& v) {
    latency[name + "_p50_ns"] = traces::percentile(v, 50);
    latency[name + "_p99_ns"] = traces::percentile(v, 99);
  };
  put("ttft", ttft);
  put("per_token", tpot);
  put("latency", e2e);
  ordered_json out = {
      {"scheduler", std::string(scheduler)},
      {"requests", static_cast<int64_t>(seqs.size())},
      {"output_tokens", tokens},
      {"span_ns", t.end_ns - first_arrival},
      {"throughput_tokens_per_s", span_s > 0 ? double(tokens) / span_s : 0.0},
      {"latency", latency},
      {"iterations",
       {{"prefill", t.prefills},
        {"decode", t.decodes},
        {"mean_decode_batch", t.decodes ? double(t.decode_rows) / double(t.decodes) : 0.0},
        {"mean_decode_padding_rows",
         t.decodes ? double(t.decode_padded_rows - t.decode_rows) / double(t.decodes) : 0.0}}},
      {"padding_by_source",
       padding_by_source(t.real_macs, t.batch_pad_macs, t.prompt_pad_macs, t.keys_pad_macs)},
      {"kv",
       {{"block_rows", t.block_rows},
        {"pool_blocks", t.pool_blocks},
        {"peak_blocks", t.peak_blocks},
        {"peak_occupancy", double(t.peak_blocks) / double(t.pool_blocks)},
        {"mean_utilization", t.kv_samples ? t.kv_util_sum / double(t.kv_samples) : 1.0},
        {"preemptions", preemptions}}},
      {"per_request", requests}};
  return out;
}

}  // namespace wallsim::workloads::detail
