// serve: a seeded stream of requests through a GPT-2-style decoder, under a static or a
// continuous (iteration-level) batch scheduler, over a paged KV cache.
//
// Each iteration is one step of the session: a prefill (one request under `continuous`, the
// whole batch under `static`) or a decode over the running batch. Every step's output, one value
// per sequence (the max logit, standing in for the sampled token), is read back by the host, as
// a server must before it can schedule the next iteration.
//
// The KV cache is a pool of fixed-size blocks per layer (runtime::KvBlockManager). A step writes
// its new keys and values into the pool rows its block tables name (index_copy, a scatter DMA)
// and attention reads every key through the tables (embedding, a gather DMA), so the plans do not
// depend on where blocks are: shapes are (batch rows, key length, prompt length) only.
//
// tp > 1 (Megatron-LM, as decode): each tensor-parallel rank holds heads / tp heads (Wq, Wk, Wv
// by column blocks, Wo by row blocks) and their d_model / tp columns of every layer's KV pool,
// W1 by column and W2 by row blocks, with an all-reduce over "tp" after the output projection
// and after the MLP. The vocab head is vocab-parallel (Megatron's and NxD's inference
// ColumnParallelLinear): a rank holds vocab / tp of its columns and takes the max over them; the
// ranks' maxima are all-gathered and the max of those is every rank's output (NxD's on-device
// sampling: a gather of tp values a row, not of the logits). The embedding is replicated. Every
// rank runs the same seeded stream under the same scheduler, so their decisions agree.
//
// dp > 1 (inference data parallel: no collective): dp independent replicas, each with its own
// scheduler and KV pool. The seeded stream is routed round-robin by arrival: request i goes to
// replica i mod dp. The report is the whole run's (every replica's requests) with a row a
// replica (replicas_report).
//
// pp > 1: stage pp_rank holds layers / pp consecutive layers and their KV pools (stage 0 the
// embedding, the last stage the final norm and the vocab head); each iteration's batch flows
// through the stages (send/recv over "pp") and the last stage sends the iteration's sampled ids
// (int32, one a row; an iota stands in) back to stage 0, whose iteration ends when they arrive.
// Stage 0 is the server's driver (as in vLLM's and NxD's pipelined inference): it opens once
// every stage has started up, requests arrive by its clock, and it publishes, before each
// scheduling round, how many have arrived. Every
// other stage runs the same scheduler over the same requests, admitting exactly those before its
// round (waiting idle, between steps, until stage 0 has decided), so the stages make the same
// decisions without a clock of their own. The report is the last stage's, its arrivals on stage
// 0's clock.
#include <algorithm>
#include <climits>
#include <cmath>
#include <deque>
#include <functional>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "serve_batching.h"
#include "wallsim/runtime/kv_blocks.h"
#include "wallsim/runtime/ops.h"
#include "wallsim/traces/stats.h"
#include "wallsim/workloads/requests.h"
#include "workload_params.h"

namespace wallsim::workloads::detail {

namespace {

using compiler_stub::OpKind;
using nlohmann::ordered_json;
using runtime::Tensor;

// The shape of one iteration's plan.
struct Shape {
  bool prefill = false;
  int64_t batch = 1;  // rows of sequences (padding included)
  int64_t len = 1;    // prefill: tokens per sequence; decode: keys attended per sequence
};

class Serve final : public Workload, public ServeLoop {
 public:
  explicit Serve(Params& p)
      : m_layers(p.integer("layers", 12, 1, 1024)),
        m_d(p.integer("d_model", 768, 1, kBig)),
        m_heads(p.integer("heads", 12, 1, 4096)),
        m_ff(p.integer("d_ff", 3072, 1, kBig)),
        m_vocab(p.integer("vocab", 50257, 1, kBig)),
        m_context(p.integer("context", 1024, 2, kBig)),
        m_scheduler(
            make_batch_scheduler(p.choice("scheduler", "continuous", batch_scheduler_names()))),
        m_max_batch(p.integer("max_batch", 32, 1, 4096)),
        m_block(p.integer("block", 16, 1, 65536)),
        m_kv_blocks(p.integer("kv_blocks", 0, 0, kBig)),
        m_dynamic(p.choice("dynamic", "exact", {"exact", "bounded", "bucketed"})),
        m_dtype(p.dtype("dtype", isa::DType::bf16)) {
    m_sizes.tp = p.integer("tp", 1, 1, 65536);
    m_sizes.dp = p.integer_if_given("dp", 1, 1, 65536);
    m_sizes.pp = p.integer_if_given("pp", 1, 1, 1024);
    m_spec.count = p.integer("requests", 200, 1, 1000000);
    m_spec.rate = p.real("rate", 0, 0, 1e9);
    m_spec.prompt_mean = p.real("prompt_mean", 161, 1, 1e6);
    m_spec.output_mean = p.real("output_mean", 338, 1, 1e6);
    m_spec.sigma = p.real("sigma", 1.0, 0, 10);
    m_spec.max_total = m_context;
    m_spec.max_prompt = p.integer("max_prompt", std::min<int64_t>(768, m_context - 1), 1, kBig);
    const std::string lengths = p.text("lengths");
    m_params = (p.finish(), p.resolved());
    if (m_sizes.tp == 1) m_params.erase("tp");  // unsharded runs report as before
    check_heads(p, m_d, m_heads);
    check_tensor_parallel(p, m_heads, m_ff, m_sizes.tp);
    if (m_vocab % m_sizes.tp) {
      p.fail("tp", "vocab " + std::to_string(m_vocab) + " does not split over " +
                       std::to_string(m_sizes.tp) +
                       " tensor-parallel ranks (pad it, as Megatron-LM pads 50257 to 50304)");
    }
    if (m_layers % m_sizes.pp) {
      p.fail("pp", "layers " + std::to_string(m_layers) + " do not split over " +
                       std::to_string(m_sizes.pp) + " pipeline stages");
    }
    if (m_spec.count < m_sizes.dp) {
      p.fail("dp", std::to_string(m_spec.count) + " requests leave some of " +
                       std::to_string(m_sizes.dp) + " data-parallel replicas without any");
    }
    if (m_spec.max_prompt >= m_context) {
      p.fail("max_prompt", std::to_string(m_spec.max_prompt) + " leaves no room to generate in " +
                               "a context of " + std::to_string(m_context));
    }
    if (!lengths.empty()) m_spec.empirical = read_length_pairs(lengths);
    if (m_scheduler->pads_to_buckets() && m_dynamic != "exact") {
      p.fail("dynamic", "the static scheduler pads to power-of-two buckets itself");
    }
    if (m_kv_blocks > 0 && m_kv_blocks * m_block < capacity_rows()) {
      p.fail("kv_blocks", std::to_string(m_kv_blocks) + " blocks of " + std::to_string(m_block) +
                              " rows cannot hold one request of " +
                              std::to_string(capacity_rows()) + " tokens");
    }
  }

  std::map<std::string, std::string> params() const override { return m_params; }
  runtime::ParallelSizes parallel() const override { return m_sizes; }
  std::optional<std::string> rank_asymmetry() const override {
    if (m_sizes.dp == 1) return std::nullopt;
    return "serve's data-parallel replicas serve different requests (dp " +
           std::to_string(m_sizes.dp) + ")";
  }
  bool fixed_steps() const override { return true; }
  bool masks_instead_of_padding() const override { return m_dynamic == "bounded"; }
  std::string step_kind(int64_t index) const override {
    const auto i = static_cast<size_t>(index);
    return i < m_prefill_steps.size() && m_prefill_steps[i] ? "prefill" : "token";
  }

  void join(const std::vector<Workload*>& ranks) override { m_ranks = ranks; }

  void setup(Session& s) override {
    if (s.rank().pp_rank > 0) {  // this stage follows stage 0 of its tensor rank and replica
      const int64_t r = m_sizes.rank_of(s.rank().tp_rank, 0, s.rank().dp_rank);
      m_leader = dynamic_cast<Serve*>(m_ranks.at(static_cast<size_t>(r)));
      if (!m_leader) throw std::logic_error("internal: serve's stage 0 is another workload");
    }
    m_requests = generate_requests(m_spec, seed(s, 999));
    if (m_sizes.dp > 1) {  // round-robin by arrival: request i to replica i mod dp
      std::vector<Request> mine;
      for (const Request& r : m_requests) {
        if (r.id % m_sizes.dp == s.rank().dp_rank) mine.push_back(r);
      }
      m_requests.swap(mine);
    }
    const int64_t per_seq_blocks = (capacity_rows() + m_block - 1) / m_block;
    m_pool_blocks = m_kv_blocks > 0 ? m_kv_blocks : m_max_batch * per_seq_blocks;
    // Continuous batching hands out blocks in a seeded scattered order, as a long-running server's
    // free list is; static batching reserves each sequence's padded capacity in one run.
    m_kv.emplace(m_pool_blocks, m_block,
                 m_scheduler->scatters_blocks()
                     ? std::optional<uint64_t>(static_cast<uint64_t>(s.config().runtime.seed))
                     : std::nullopt);
    m_tally.block_rows = m_block;
    m_tally.pool_blocks = m_pool_blocks;
    m_scratch = m_pool_blocks * m_block;  // one more row: padding writes land there
    uint64_t k = 1;
    const int64_t tp = m_sizes.tp;
    // `mine` false: a weight of another pipeline stage's, its seed only taken.
    auto up = [&](std::vector<int64_t> shape, bool mine) {
      const uint64_t sd = seed(s, k++);
      return mine ? s.upload_random(shape, m_dtype, sd) : Tensor();
    };
    // This rank's block of columns of a weight of shape `full` (whole when tp is 1).
    auto columns = [&](std::vector<int64_t> full, bool mine) {
      if (tp == 1) return up(full, mine);
      const int64_t block = full[1] / tp, at = s.rank().tp_rank * block;
      const uint64_t sd = seed(s, k++);
      return mine ? s.upload_random_slice(full, m_dtype, sd, 1, at, at + block) : Tensor();
    };
    const int64_t stage = s.rank().pp_rank, per = m_layers / m_sizes.pp;
    const bool last = stage == m_sizes.pp - 1;
    m_wte = up({m_vocab, m_d}, stage == 0);
    for (int64_t l = 0; l < m_layers; ++l) {
      const bool mine = l / per == stage;
      Layer w{upload_gpt_weights(s, m_d, m_ff, m_dtype, k, tp, mine), {}, {}};
      w.k_pool = columns({m_scratch + 1, m_d}, mine);  // this rank's heads
      w.v_pool = columns({m_scratch + 1, m_d}, mine);
      if (mine) m_w.push_back(w);
    }
    m_lnf_g = up({m_d}, last);
    m_lnf_b = up({m_d}, last);
    m_head = columns({m_d, m_vocab}, last);  // vocab-parallel
  }

  // AOT: every plan shape the run may need, traced before the first request.
  std::vector<int64_t> buckets(const Session& s) const override {
    std::vector<int64_t> out(aot_shapes(s).size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(i);
    return out;
  }
  void trace(Session& s, int64_t bucket) override {
    const Shape shape = aot_shapes(s).at(static_cast<size_t>(bucket));
    const std::vector<Layer> kept = m_w;  // tracing runs nothing: the pools stay as they are
    s.to_host(iteration(s, {}, shape));
    m_w = kept;
  }
  Tensor step(Session&, int64_t) override {
    throw std::logic_error("serve schedules its own iterations");
  }

  void run(Session& s, int64_t) override {
    // A pipelined server opens when every stage has started up (stage 0 waits for the others);
    // arrivals are on stage 0's clock from then.
    if (m_leader) {
      ++m_leader->m_followers_ready;
      m_leader->m_ready.notify();
      s.idle_while([&] { return !m_leader->m_started; }, m_leader->m_decided);
      m_tally.start_ns = m_leader->m_tally.start_ns;
    } else {
      const int64_t followers = m_sizes.pp - 1;
      s.idle_while([&] { return m_followers_ready < followers; }, m_ready);
      m_tally.start_ns = s.now_ns();
      m_started = true;
      if (followers > 0) m_decided.notify();
    }
    size_t next = 0;  // the next request to arrive
    std::deque<Seq*> waiting;
    m_seqs.resize(m_requests.size());
    for (size_t i = 0; i < m_requests.size(); ++i) m_seqs[i].req = &m_requests[i];
    size_t finished = 0;
    size_t round = 0;  // scheduling rounds run
    while (finished < m_seqs.size()) {
      if (m_leader) {  // admit what stage 0 had admitted before this round
        const std::vector<size_t>& decided = m_leader->m_arrived_before_round;
        s.idle_while([&] { return decided.size() <= round; }, m_leader->m_decided);
        while (next < decided[round]) waiting.push_back(&m_seqs[next++]);
      } else {
        while (next < m_seqs.size() && m_requests[next].arrival_ns <= now(s)) {
          waiting.push_back(&m_seqs[next++]);
        }
        if (waiting.empty() && !m_scheduler->running()) {
          if (next == m_seqs.size()) throw std::logic_error("internal: serve lost a request");
          s.idle_until(m_tally.start_ns + m_requests[next].arrival_ns);
          continue;
        }
        if (m_sizes.pp > 1) {
          m_arrived_before_round.push_back(next);
          m_decided.notify();
        }
      }
      finished += m_scheduler->round(s, *this, waiting);
      ++round;
    }
    m_tally.end_ns = s.now_ns();
    for (const Seq& q : m_seqs) {
      if (q.generated != q.req->output || q.kv != 0) {
        throw std::logic_error("internal: request " + std::to_string(q.req->id) + " generated " +
                               std::to_string(q.generated) + " of " +
                               std::to_string(q.req->output) + " tokens");
      }
    }
  }

  std::optional<std::pair<std::string, ordered_json>> report() const override {
    return std::make_pair(std::string("serving"),
                          serving_report(m_scheduler->name(), m_seqs, m_tally));
  }
  // dp > 1: the whole run's serving section (every replica's requests, by id; the tallies
  // summed, the span from the first arrival to the last replica's end; kv: the pools summed,
  // peak_blocks the sum of each replica's peak) and `replicas`, each replica's throughput and
  // TTFT.
  std::optional<std::pair<std::string, ordered_json>> replicas_report(
      const std::vector<const Workload*>& replicas) const override {
    if (m_sizes.dp == 1) return m_sizes.pp > 1 ? replicas.at(0)->report() : std::nullopt;
    std::vector<Seq> seqs;
    ServeTally t;
    t.start_ns = INT64_MAX;
    ordered_json rows = ordered_json::array();
    for (size_t i = 0; i < replicas.size(); ++i) {
      const auto* r = dynamic_cast<const Serve*>(replicas[i]);
      if (!r) throw std::logic_error("internal: serve replicas of another workload");
      seqs.insert(seqs.end(), r->m_seqs.begin(), r->m_seqs.end());
      const ServeTally& u = r->m_tally;
      t.start_ns = std::min(t.start_ns, u.start_ns);
      t.end_ns = std::max(t.end_ns, u.end_ns);
      t.prefills += u.prefills;
      t.decodes += u.decodes;
      t.decode_rows += u.decode_rows;
      t.decode_padded_rows += u.decode_padded_rows;
      t.block_rows = u.block_rows;
      t.pool_blocks += u.pool_blocks;
      t.peak_blocks += u.peak_blocks;
      t.kv_samples += u.kv_samples;
      t.kv_util_sum += u.kv_util_sum;
      t.real_macs += u.real_macs;
      t.batch_pad_macs += u.batch_pad_macs;
      t.prompt_pad_macs += u.prompt_pad_macs;
      t.keys_pad_macs += u.keys_pad_macs;
      const ordered_json own = serving_report(m_scheduler->name(), r->m_seqs, u);
      rows.push_back({{"dp_rank", static_cast<int64_t>(i)},
                      {"requests", own.at("requests")},
                      {"output_tokens", own.at("output_tokens")},
                      {"span_ns", own.at("span_ns")},
                      {"throughput_tokens_per_s", own.at("throughput_tokens_per_s")},
                      {"ttft_p50_ns", own.at("latency").at("ttft_p50_ns")},
                      {"ttft_p99_ns", own.at("latency").at("ttft_p99_ns")}});
    }
    // Every replica's clock starts its run at the same time (after the same start-up), so the
    // arrivals are on one time line.
    std::sort(seqs.begin(), seqs.end(),
              [](const Seq& a, const Seq& b) { return a.req->id < b.req->id; });
    ordered_json out = serving_report(m_scheduler->name(), seqs, t);
    out["routing"] = "round-robin by arrival";
    out["replicas"] = rows;
    return std::make_pair(std::string("serving"), out);
  }

  // ---- ServeLoop ----
  runtime::KvBlockManager& kv() override { return *m_kv; }
  int64_t max_batch() const override { return m_max_batch; }
  int64_t block_rows() const override { return m_block; }
  // Rows of cache one sequence may need: its whole context (padded to a bucket when batches
  // are).
  int64_t capacity_rows() const override {
    return m_scheduler->pads_to_buckets() ? pow2_at_least(m_context, 1) : m_context;
  }

 private:
  struct Layer : GptWeights {
    Tensor k_pool, v_pool;  // this layer's KV pool (block rows, plus the scratch row)
  };

  int64_t now(const Session& s) const { return s.now_ns() - m_tally.start_ns; }
  bool last_stage(const Session& s) const { return s.rank().pp_rank == m_sizes.pp - 1; }
  bool pads(const Session& s) const {
    return m_scheduler->pads_to_buckets() || m_dynamic == "bucketed" || s.pads_shapes();
  }
  // A token length as a plan runs it: a power-of-two bucket from aot.bucket_min, capped at
  // the context's bucket.
  int64_t bucket(const Session& s, int64_t len) const {
    return pow2_at_least(len, s.config().runtime.aot.bucket_min);
  }
  int64_t batch_bucket(int64_t b) const { return std::min(pow2_at_least(b, 1), batch_cap()); }
  int64_t batch_cap() const { return pow2_at_least(m_max_batch, 1); }

  // The shape an iteration over `seqs` runs at, by scheduler, mode and `dynamic`.
  Shape shape_of(const Session& s, const std::vector<Seq*>& seqs, bool prefill) const {
    Shape sh;
    sh.prefill = prefill;
    sh.batch = static_cast<int64_t>(seqs.size());
    int64_t len = 0;
    for (const Seq* q : seqs) len = std::max(len, prefill ? q->kv : q->kv + 1);
    sh.len = len;
    if (m_dynamic == "bounded") {
      sh.batch = prefill ? 1 : m_max_batch;
      sh.len = m_context;
    } else if (pads(s)) {
      sh.batch = batch_bucket(sh.batch);
      sh.len = bucket(s, len);
    }
    return sh;
  }

  std::vector<Shape> aot_shapes(const Session& s) const {
    std::vector<Shape> out;
    if (m_dynamic == "bounded") return {{true, 1, m_context}, {false, m_max_batch, m_context}};
    const int64_t top = bucket(s, m_context);
    for (int64_t b = 1; b <= batch_cap(); b *= 2) {
      for (int64_t l = bucket(s, 1); l <= top; l *= 2) {
        if (b == 1 || m_scheduler->prefills_in_batches()) out.push_back({true, b, l});
        out.push_back({false, b, l});
      }
    }
    return out;
  }

  void finish(Seq* q) override {
    m_kv->release(q->req->id);
    q->kv = 0;
  }
  // Before an iteration: `tokens` rows of the blocks in use hold keys and values.
  void note_kv(int64_t tokens) override {
    m_tally.peak_blocks = std::max(m_tally.peak_blocks, m_kv->used_blocks());
    if (m_kv->used_blocks() > 0) {
      m_tally.kv_util_sum += double(tokens) / double(m_kv->used_blocks() * m_block);
      ++m_tally.kv_samples;
    }
  }

  // One step: the plan over `seqs` (finished ones ride along as padding), its output read back,
  // a token for every unfinished sequence.
  void run_iteration(Session& s, const std::vector<Seq*>& seqs, bool prefill) override {
    const Shape shape = shape_of(s, seqs, prefill);
    const double real_macs = tally_padding(s, seqs, shape);
    s.begin_step(m_iterations++);
    s.add_real_macs(real_macs);
    m_prefill_steps.push_back(prefill);
    const compiler_stub::HostTensor out = s.to_host(iteration(s, seqs, shape));
    s.end_step();
    const int64_t t = s.now_ns();
    int64_t rows = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      Seq* q = seqs[i];
      if (q->done()) continue;
      ++rows;
      if (!prefill) ++q->kv;  // the token's keys and values went into the cache
      ++q->generated;
      q->token_ns.push_back(t);
      if (s.functional() && last_stage(s)) q->values.push_back(out.data.at(i));
    }
    if (prefill) {
      ++m_tally.prefills;
    } else {
      ++m_tally.decodes;
      m_tally.decode_rows += rows;
      m_tally.decode_padded_rows += shape.batch;
    }
  }

  // An iteration's MACs at its real shapes (returned) and where its padded work comes from,
  // each the iteration recorded at those shapes (macs_at; called before its sequences advance):
  // real, each live sequence alone at its own length; prompt or keys, the live sequences at the
  // iteration's length less that (a prefill's tokens past each prompt, a token's keys past its
  // sequence's own length); batch, the whole iteration less the live sequences (rows of no
  // live sequence).
  double tally_padding(Session& s, const std::vector<Seq*>& seqs, const Shape& shape) {
    std::vector<Seq*> live;
    double real = 0;
    for (Seq* q : seqs) {
      if (q->done()) continue;
      live.push_back(q);
      real += macs_at(s, {q}, {shape.prefill, 1, shape.prefill ? q->kv : q->kv + 1});
    }
    const auto rows = static_cast<int64_t>(live.size());
    const double live_macs = rows > 0 ? macs_at(s, live, {shape.prefill, rows, shape.len}) : 0.0;
    m_tally.real_macs += real;
    (shape.prefill ? m_tally.prompt_pad_macs : m_tally.keys_pad_macs) += live_macs - real;
    m_tally.batch_pad_macs += macs_at(s, seqs, shape) - live_macs;
    return real;
  }
  // The MACs of the iteration over `seqs` at `shape` (Session::count_macs; the pools stay as
  // they are), once per shape: an iteration's graph depends on its shape alone.
  double macs_at(Session& s, const std::vector<Seq*>& seqs, const Shape& shape) {
    auto [it, added] = m_macs_at.try_emplace({shape.prefill, shape.batch, shape.len}, 0.0);
    if (added) {
      const std::vector<Layer> kept = m_w;
      it->second = s.count_macs([&] { iteration(s, seqs, shape); });
      m_w = kept;
    }
    return it->second;
  }

  // ---- the model ----

  // The graph of one iteration at `shape`: real sequences `seqs` first, then padding rows.
  Tensor iteration(Session& s, const std::vector<Seq*>& seqs, const Shape& shape) {
    using namespace runtime;
    const int64_t B = shape.batch, hd = m_d / m_heads, H = m_heads / m_sizes.tp;
    const int64_t dc = m_d / m_sizes.tp;  // this rank's columns of attention
    auto live = [&](int64_t i) -> const Seq* {
      return i < static_cast<int64_t>(seqs.size()) && !seqs[static_cast<size_t>(i)]->done()
                 ? seqs[static_cast<size_t>(i)]
                 : nullptr;
    };
    auto token_id = [&](const Seq* q, int64_t pos) {
      return float((q->req->id * 7919 + pos) % m_vocab);
    };
    const int64_t stage = s.rank().pp_rank;
    const bool last = last_stage(s);
    const double inv_sqrt_hd = 1.0 / std::sqrt(double(hd));
    Tensor x, slot_t;
    std::vector<float> last_row;  // prefill: each sequence's last row, read after the layers
    // Attention of one layer over its queries, keys and values (after the pools are written):
    // causal over the prompt (prefill), or over each sequence's cached keys (decode).
    std::function<Tensor(const Layer&, const Tensor&, const Tensor&, const Tensor&)> attend;
    if (shape.prefill) {
      const int64_t P = shape.len, rows = B * P;
      std::vector<float> ids(static_cast<size_t>(rows), 0.0f), slots(ids.size(), float(m_scratch));
      last_row.assign(static_cast<size_t>(B), 0.0f);
      for (int64_t i = 0; i < B; ++i) {
        const Seq* q = live(i);
        if (!q) continue;
        for (int64_t j = 0; j < q->kv; ++j) {
          ids[static_cast<size_t>(i * P + j)] = token_id(q, j);
          slots[static_cast<size_t>(i * P + j)] = float(m_kv->row(q->req->id, j));
        }
        last_row[static_cast<size_t>(i)] = float(i * P + q->kv - 1);
      }
      slot_t = s.upload({rows}, isa::DType::int32, slots);
      x = stage == 0 ? embedding(m_wte, s.upload({rows}, isa::DType::int32, ids))
                     : recv(s, {rows, m_d}, m_dtype, "pp", stage - 1);
      // The causal mask, built on the chip: -1e9 where the key is after the query (padding rows
      // come after a sequence's tokens, so it hides them too).
      Tensor row = s.iota({P, P}, isa::DType::int32, 0);
      Tensor col = s.iota({P, P}, isa::DType::int32, 1);
      Tensor mask = scale(compare(col, row, "gt"), -1e9);
      auto heads = [=](const Tensor& t) {  // [B*P, d] -> [B*H, P, hd]
        return reshape(transpose(reshape(t, {B, P, H, hd}), {0, 2, 1, 3}), {B * H, P, hd});
      };
      attend = [=](const Layer&, const Tensor& q, const Tensor& k, const Tensor& v) {
        Tensor sc = scale(batch_matmul(heads(q), heads(k), true), inv_sqrt_hd);
        Tensor p = softmax(add(sc, mask));
        return reshape(transpose(reshape(batch_matmul(p, heads(v)), {B, H, P, hd}), {0, 2, 1, 3}),
                       {rows, dc});
      };
    } else {
      const int64_t L = shape.len;
      std::vector<float> ids(static_cast<size_t>(B), 0.0f), slots(ids.size(), float(m_scratch)),
          gather(static_cast<size_t>(B * L), float(m_scratch)),
          lens(static_cast<size_t>(B * H), 1.0f);  // keys each (sequence, head) row attends to
      for (int64_t i = 0; i < B; ++i) {
        const Seq* q = live(i);
        if (!q) continue;               // a padding row attends to one (scratch) key
        const int64_t len = q->kv + 1;  // the cache and this token
        ids[static_cast<size_t>(i)] = token_id(q, q->kv);
        slots[static_cast<size_t>(i)] = float(m_kv->row(q->req->id, q->kv));
        for (int64_t j = 0; j < len; ++j) {
          gather[static_cast<size_t>(i * L + j)] = float(m_kv->row(q->req->id, j));
        }
        std::fill_n(lens.begin() + i * H, H, float(len));
      }
      slot_t = s.upload({B}, isa::DType::int32, slots);
      Tensor gather_t = s.upload({B, L}, isa::DType::int32, gather);
      // -1e9 past each sequence's length, built on the chip from the lengths.
      Tensor keys_at = s.iota({B, H, L}, isa::DType::fp32, 2);
      Tensor bias =
          scale(compare(keys_at, s.upload({B, H, 1}, isa::DType::fp32, lens), "ge"), -1e9);
      x = stage == 0 ? embedding(m_wte, s.upload({B}, isa::DType::int32, ids))
                     : recv(s, {B, m_d}, m_dtype, "pp", stage - 1);
      // Each query attends to its keys and values through the block tables (gathered rows).
      attend = [=](const Layer& w, const Tensor& q, const Tensor&, const Tensor&) {
        return decode_attention(q, w.k_pool, w.v_pool, gather_t, &bias, H);
      };
    }
    for (Layer& w : m_w) {
      x = gpt_layer(x, w, [&](const Tensor& q, const Tensor& k, const Tensor& v) {
        w.k_pool = index_copy(w.k_pool, slot_t, k);
        w.v_pool = index_copy(w.v_pool, slot_t, v);
        return attend(w, q, k, v);
      });
    }
    if (!last) {  // on to the next stage; stage 0's iteration ends with the sampled ids back
      Tensor sent = send(x, "pp", stage + 1);
      return stage == 0 ? recv(s, {B}, isa::DType::int32, "pp", m_sizes.pp - 1) : sent;
    }
    if (shape.prefill) x = embedding(x, s.upload({B}, isa::DType::int32, last_row));
    Tensor out = s.op(OpKind::reduce_max, {matmul(layernorm(x, m_lnf_g, m_lnf_b), m_head)});
    if (m_sizes.tp > 1) {  // [B, 1] maxima of each rank's vocab columns -> the max over ranks
      const int64_t tp = m_sizes.tp;
      out = transpose(reshape(all_gather(out, "tp"), {tp, B}), {1, 0});
      out = s.op(OpKind::reduce_max, {out});
    }
    if (m_sizes.pp > 1) send(s.iota({B}, isa::DType::int32, 0), "pp", 0);
    return out;
  }

  int64_t m_layers, m_d, m_heads, m_ff, m_vocab, m_context;
  std::unique_ptr<BatchScheduler> m_scheduler;
  int64_t m_max_batch, m_block, m_kv_blocks;
  std::string m_dynamic;
  isa::DType m_dtype;
  runtime::ParallelSizes m_sizes;
  RequestSpec m_spec;
  std::map<std::string, std::string> m_params;

  std::vector<Request> m_requests;
  std::vector<Seq> m_seqs;
  std::optional<runtime::KvBlockManager> m_kv;
  int64_t m_pool_blocks = 0, m_scratch = 0;
  Tensor m_wte, m_lnf_g, m_lnf_b, m_head;
  std::vector<Layer> m_w;

  // pp > 1: every rank's workload (join); stage 0's of this rank's tensor rank and replica
  // (stages past 0). Stage 0's: how many later stages have started up (signalled on m_ready);
  // whether its server is open and, by round, how many requests had arrived before it
  // (signalled on m_decided).
  std::vector<Workload*> m_ranks;
  Serve* m_leader = nullptr;
  int64_t m_followers_ready = 0;
  runtime::HostSignal m_ready;
  bool m_started = false;
  std::vector<size_t> m_arrived_before_round;
  runtime::HostSignal m_decided;

  int64_t m_iterations = 0;
  std::vector<bool> m_prefill_steps;  // by step index
  ServeTally m_tally;
  std::map<std::tuple<bool, int64_t, int64_t>, double> m_macs_at;  // by (prefill, batch, len)
};

}  // namespace

std::unique_ptr<Workload> make_serve(Params& p) { return std::make_unique<Serve>(p); }

}  // namespace wallsim::workloads::detail
