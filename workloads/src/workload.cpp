// The workloads: gemm, mlp, decode, mask (transformer.cpp, train.cpp and the others in files
// of their own).
#include "wallsim/workloads/workload.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "wallsim/base/params.h"
#include "wallsim/runtime/kv_blocks.h"
#include "wallsim/runtime/ops.h"
#include "wallsim/workloads/pipeline_schedule.h"
#include "workload_params.h"

namespace wallsim::workloads {

using runtime::Session;
using runtime::Tensor;

WorkloadSpec parse_spec(const std::string& text) {
  WorkloadSpec spec;
  spec.text = text;
  const size_t colon = text.find(':');
  spec.name = text.substr(0, colon);
  if (spec.name.empty())
    throw base::InputError("--workload", "needs a name, e.g. mlp or gemm:m=512");
  if (colon == std::string::npos) return spec;
  const std::string rest = text.substr(colon + 1);
  size_t at = 0;
  while (at <= rest.size()) {
    size_t comma = rest.find(',', at);
    if (comma == std::string::npos) comma = rest.size();
    const std::string item = rest.substr(at, comma - at);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      throw base::InputError("--workload " + text, "'" + item + "' is not key=value");
    }
    const std::string key = item.substr(0, eq);
    if (!spec.params.emplace(key, item.substr(eq + 1)).second) {
      throw base::InputError("--workload " + text, "parameter '" + key + "' given twice");
    }
    at = comma + 1;
  }
  return spec;
}

namespace {

using detail::check_heads;
using detail::kBig;
using detail::Params;
using detail::seed;

// C = A x B with B resident (a weight) and A uploaded every step.
class Gemm final : public Workload {
 public:
  explicit Gemm(Params& p)
      : m_m(p.integer("m", 512, 1, kBig)),
        m_k(p.integer("k", 768, 1, kBig)),
        m_n(p.integer("n", 768, 1, kBig)),
        m_dtype(p.dtype("dtype", isa::DType::bf16)),
        m_params((p.finish(), p.resolved())) {}
  std::map<std::string, std::string> params() const override { return m_params; }
  void setup(Session& s) override { m_b = s.upload_random({m_k, m_n}, m_dtype, seed(s, 1)); }
  std::vector<int64_t> buckets(const Session&) const override { return {m_m}; }
  Tensor step(Session& s, int64_t index) override {
    s.add_real_macs(s.count_macs([&] { run(s, m_m, index); }));
    return run(s, s.shape_for(m_m), index);
  }
  void trace(Session& s, int64_t bucket) override { s.to_host(run(s, bucket, 0)); }

 private:
  Tensor run(Session& s, int64_t m, int64_t index) {
    Tensor a = s.upload_random({m, m_k}, m_dtype, seed(s, 100 + static_cast<uint64_t>(index)));
    return runtime::matmul(a, m_b);
  }
  int64_t m_m, m_k, m_n;
  isa::DType m_dtype;
  std::map<std::string, std::string> m_params;
  Tensor m_b;
};

// `layers` residual MLP blocks: x + fc2(gelu(fc1(x))).
class Mlp final : public Workload {
 public:
  explicit Mlp(Params& p)
      : m_batch(p.integer("batch", 512, 1, kBig)),
        m_d(p.integer("d_model", 768, 1, kBig)),
        m_ff(p.integer("d_ff", 3072, 1, kBig)),
        m_layers(p.integer("layers", 1, 1, 1024)),
        m_dtype(p.dtype("dtype", isa::DType::bf16)),
        m_params((p.finish(), p.resolved())) {}
  std::map<std::string, std::string> params() const override { return m_params; }
  void setup(Session& s) override {
    uint64_t k = 1;
    for (int64_t l = 0; l < m_layers; ++l) {
      Layer w;
      w.w1 = s.upload_random({m_d, m_ff}, m_dtype, seed(s, k++));
      w.b1 = s.upload_random({m_ff}, m_dtype, seed(s, k++));
      w.w2 = s.upload_random({m_ff, m_d}, m_dtype, seed(s, k++));
      w.b2 = s.upload_random({m_d}, m_dtype, seed(s, k++));
      m_w.push_back(w);
    }
  }
  std::vector<int64_t> buckets(const Session&) const override { return {m_batch}; }
  Tensor step(Session& s, int64_t index) override {
    s.add_real_macs(s.count_macs([&] { run(s, m_batch, index); }));
    return run(s, s.shape_for(m_batch), index);
  }
  void trace(Session& s, int64_t bucket) override { s.to_host(run(s, bucket, 0)); }

 private:
  Tensor run(Session& s, int64_t rows, int64_t index) {
    using namespace runtime;
    Tensor x = s.upload_random({rows, m_d}, m_dtype, seed(s, 1000 + static_cast<uint64_t>(index)));
    for (const Layer& w : m_w) {
      Tensor h = gelu(bias_add(matmul(x, w.w1), w.b1));
      x = add(bias_add(matmul(h, w.w2), w.b2), x);
    }
    return x;
  }
  struct Layer {
    Tensor w1, b1, w2, b2;
  };
  int64_t m_batch, m_d, m_ff, m_layers;
  isa::DType m_dtype;
  std::map<std::string, std::string> m_params;
  std::vector<Layer> m_w;
};

// Autoregressive decoding with a KV cache: step 0 is the prefill of `prompt` tokens, then one
// step per generated token. Each layer's K and V live in a cache of the largest length the run
// needs; a step appends its keys and values in place at run-time position `pos`
// (dynamic_update_slice) and attends over the first L rows, where L = shape_for(real length):
// the exact length in the lazy modes (a new shape every token), the smallest bucket that fits
// under AOT, whose padded keys a mask uploaded with the token hides.
//
// tp > 1 (Megatron-LM, as transformer): each tensor-parallel rank holds heads / tp heads — the
// column blocks of Wq, Wk, Wv and the row block of Wo — and their d_model / tp columns of every
// layer's K and V cache; the MLP's W1 by column blocks, W2 by row blocks. The attention output
// projection and the MLP output are partial sums, all-reduced over "tp" (two all-reduces per
// layer and step). Every shard is the unsharded run's slice of the same seeded weight.
//
// batch > 1: `batch` sequences of the same prompt length decode together, each over a KV cache
// of its own (contiguous only); their rows are stacked and attention runs sequence by sequence.
// dp > 1 (inference data parallel: no collective): each replica decodes batch / dp of them.
// pp > 1 (NxD and Megatron inference): stage pp_rank holds layers / pp consecutive layers and
// their caches; every step (the prefill, each token) the hidden rows go stage to stage by
// send/recv over "pp" and the last stage's output is the step's; a token step waits for the
// step before's tokens, sent back from the last stage to stage 0 (so one sequence's steps do not
// overlap across stages). `microbatches` splits a replica's sequences so the stages overlap
// within a step (the forward program of pipeline_schedule.h).
class Decode final : public Workload {
 public:
  explicit Decode(Params& p)
      : m_layers(p.integer("layers", 1, 1, 1024)),
        m_d(p.integer("d_model", 768, 1, kBig)),
        m_heads(p.integer("heads", 12, 1, 4096)),
        m_ff(p.integer("d_ff", 3072, 1, kBig)),
        m_prompt(p.integer("prompt", 128, 1, kBig)),
        m_new(p.integer("new_tokens", 128, 1, kBig)),
        m_batch(p.integer("batch", 1, 1, 4096)),
        m_dynamic(p.choice("dynamic", "exact", {"exact", "bounded", "bucketed"})),
        m_paged(p.choice("kv", "contiguous", {"contiguous", "paged"}) == "paged"),
        m_block(p.integer("block", 16, 1, 65536)),
        m_dtype(p.dtype("dtype", isa::DType::bf16)) {
    m_sizes.tp = p.integer("tp", 1, 1, 65536);
    m_sizes.pp = p.integer_if_given("pp", 1, 1, 1024);
    m_sizes.dp = p.integer_if_given("dp", 1, 1, 65536);
    m_micro = p.integer_if_given("microbatches", 1, 1, 4096);
    p.finish();
    m_params = p.resolved();
    check_heads(p, m_d, m_heads);
    check_tensor_parallel(p, m_heads, m_ff, m_sizes.tp);
    if (m_batch % m_sizes.dp) {
      p.fail("dp", "batch " + std::to_string(m_batch) + " does not split over " +
                       std::to_string(m_sizes.dp) + " data-parallel replicas");
    }
    detail::check_pipeline(p, m_layers, m_batch / m_sizes.dp, m_sizes.pp, m_micro, "sequences");
    if (m_paged && m_batch / m_sizes.dp > 1) {
      p.fail("batch", "kv=paged decodes one sequence a replica, not " +
                          std::to_string(m_batch / m_sizes.dp));
    }
  }
  std::map<std::string, std::string> params() const override { return m_params; }
  runtime::ParallelSizes parallel() const override { return m_sizes; }
  bool masks_instead_of_padding() const override { return m_dynamic == "bounded"; }
  int64_t default_steps() const override { return 1 + m_new; }
  bool fixed_steps() const override { return true; }

  void setup(Session& s) override {
    // The cache holds the longest padded length any step attends over.
    const bool pad = s.pads_shapes() || m_dynamic == "bucketed";
    m_cache_len = pad ? padded(s, m_prompt + m_new) : m_prompt + m_new;
    int64_t pool_rows = m_cache_len;
    if (m_paged) {
      // Twice the blocks the sequence needs, handed out in a seeded random order: the block
      // table is far from contiguous.
      const int64_t blocks = 2 * ((m_cache_len + m_block - 1) / m_block);
      m_kv.emplace(blocks, m_block, static_cast<uint64_t>(s.config().runtime.seed));
      pool_rows = blocks * m_block;
      for (int64_t b = 0; b * m_block < m_cache_len; ++b) {
        s.declare_scalar("blk" + std::to_string(b), 0, pool_rows - m_block);
      }
      s.declare_scalar("slot", 0, pool_rows - 1);  // a token's row in the pool
    }
    s.declare_scalar("pos", 0, m_cache_len - 1);
    s.declare_scalar("kv_len", 1, m_cache_len);
    s.declare_scalar("start", 0, 0);
    s.set_scalar("start", 0);
    uint64_t k = 1;
    const int64_t tp = m_sizes.tp, dc = m_d / tp, B = m_batch / m_sizes.dp;
    // This rank's columns (its heads) of sequence g's cache, of the unsharded run's seeded values.
    auto cache = [&](uint64_t sd, int64_t g) {
      sd += static_cast<uint64_t>(g) * 0x9E3779B97F4A7C15ull;  // sequence 0's seed is the layer's
      if (tp == 1) return s.upload_random({pool_rows, m_d}, m_dtype, sd);
      const int64_t at = s.rank().tp_rank * dc;
      return s.upload_random_slice({pool_rows, m_d}, m_dtype, sd, 1, at, at + dc);
    };
    const int64_t per = m_layers / m_sizes.pp;
    for (int64_t l = 0; l < m_layers; ++l) {
      const bool mine = l / per == s.rank().pp_rank;  // a layer of this pipeline stage
      Layer w{detail::upload_gpt_weights(s, m_d, m_ff, m_dtype, k, tp, mine), {}, {}};
      for (std::vector<Tensor>* c : {&w.k_cache, &w.v_cache}) {
        const uint64_t sd = seed(s, k++);
        for (int64_t b = 0; mine && b < B; ++b) c->push_back(cache(sd, s.rank().dp_rank * B + b));
      }
      if (mine) m_w.push_back(w);
    }
  }
  std::vector<int64_t> buckets(const Session& s) const override {
    const auto& aot = s.config().runtime.aot;
    std::vector<int64_t> out;
    for (int64_t b = aot.bucket_min; b <= aot.bucket_max; b *= 2) out.push_back(b);
    return out;
  }
  std::string step_kind(int64_t index) const override { return index == 0 ? "prefill" : "token"; }
  Tensor step(Session& s, int64_t index) override {
    const int64_t real = index == 0 ? m_prompt : m_prompt + index;
    const int64_t len = length(s, index, real);
    tally_macs(s, index, real, len);
    return run(s, index, real, len);
  }
  void trace(Session& s, int64_t bucket) override {
    // Every bucket a token step may use; the prefill at the prompt's bucket.
    if (bucket < padded(s, m_prompt) || bucket > m_cache_len) return;
    const std::vector<Layer> kept = m_w;  // tracing runs nothing: the caches stay as they are
    if (bucket == padded(s, m_prompt)) s.to_host(run(s, 0, m_prompt, bucket));
    m_w = kept;
    const bool token_bucket =
        m_dynamic == "bounded" ? bucket == m_cache_len : bucket >= m_prompt + 1;
    if (token_bucket) s.to_host(run(s, 1, std::min(bucket, m_prompt + 1), bucket));
    m_w = kept;
  }

 private:
  // The rows a step runs at. exact: the real length (AOT pads it to a bucket); bucketed: the
  // next power-of-two bucket in every mode; bounded: token steps at the cache's full length,
  // masked on the chip past the run-time scalar `kv_len`.
  int64_t length(Session& s, int64_t index, int64_t real) const {
    if (m_dynamic == "bucketed") return padded(s, real);
    if (m_dynamic == "bounded" && index > 0) return m_cache_len;
    return s.shape_for(real);
  }
  static int64_t padded(const Session& s, int64_t real) {
    const auto& aot = s.config().runtime.aot;
    int64_t b = aot.bucket_min;
    while (b < real) b *= 2;
    return b;
  }
  struct Layer : detail::GptWeights {
    std::vector<Tensor> k_cache, v_cache;  // one a sequence of this replica
  };
  // What the layers of one step share: its kind, lengths and the attention bias over the keys.
  struct StepCtx {
    bool prefill = false;
    int64_t real = 0, len = 0, rows = 0;  // rows: a sequence's rows (len in a prefill, else 1)
    Tensor bias, ids;                     // ids (paged): the pool rows of the sequence's keys
  };
  // One step: `index` 0 is the prefill of `real` tokens (run at `len` rows); otherwise a token
  // at position real - 1 attending over `len` >= real cached rows.
  Tensor run(Session& s, int64_t index, int64_t real, int64_t len) {
    using namespace runtime;
    const int64_t H = m_heads / m_sizes.tp;
    const bool prefill = index == 0, piped = m_sizes.pp > 1 || m_micro > 1;
    StepCtx st{prefill, real, len, prefill ? len : 1, {}, {}};
    const uint64_t sd = seed(s, 100000 + static_cast<uint64_t>(index));
    if (m_sizes.pp > 1 && index > 0) {
      // A token step starts from the tokens the last stage sampled at the step before: their
      // ids (int32, one a sequence; an iota stands in) go back to stage 0 first.
      const int64_t stage = s.rank().pp_rank, last = m_sizes.pp - 1, B = m_batch / m_sizes.dp;
      if (stage == last) send(s.iota({B}, isa::DType::int32, 0), "pp", 0);
      if (stage == 0) recv(s, {B}, isa::DType::int32, "pp", last);
    }
    Tensor x;
    if (!piped) x = input(s, sd, st.rows, 0, m_batch / m_sizes.dp);
    Tensor& bias = st.bias;  // attention bias over the keys
    if (prefill) {
      Tensor row = s.iota({len, len}, isa::DType::int32, 0);
      Tensor col = s.iota({len, len}, isa::DType::int32, 1);
      bias = scale(compare(col, row, "gt"), -1e9);
    } else if (m_dynamic == "bounded") {  // -1e9 past the run-time length, built on the chip
      // Set before the op that reads it: a per-op mode launches that op when it is recorded.
      s.set_scalar("kv_len", real);
      s.set_scalar("pos", real - 1);
      Tensor keys_at = s.iota({H, 1, len}, isa::DType::int32, 2);  // the scores' shape
      bias = scale(s.op(compiler_stub::OpKind::compare, {keys_at},
                        {{"cmp", std::string("ge")}, {"scalar", std::string("kv_len")}}),
                   -1e9);
    } else if (len > real || s.pads_shapes() ||
               m_dynamic == "bucketed") {  // -1e9 past the real length, sent by the host
      std::vector<float> b(static_cast<size_t>(len), 0.0f);
      for (int64_t i = real; i < len; ++i) b[static_cast<size_t>(i)] = -1e9f;
      bias = s.upload({1, len}, m_dtype, b);
      s.set_scalar("pos", real - 1);
    } else {
      s.set_scalar("pos", real - 1);
    }
    if (m_paged) {
      if (!m_kv->reserve(0, real)) throw runtime::RuntimeError("the KV pool is full");
      if (prefill) {
        for (int64_t b = 0; b * m_block < real; ++b) {
          s.set_scalar("blk" + std::to_string(b), m_kv->table(0)[static_cast<size_t>(b)] * m_block);
        }
      } else {
        s.set_scalar("slot", m_kv->row(0, real - 1));
        st.ids = s.upload({len}, isa::DType::int32, m_kv->rows(0, len));
      }
    }
    x = piped ? pipeline(s, st, sd) : layers(s, x, st, 0, m_batch / m_sizes.dp);
    return x;
  }
  // The rows of this replica's sequences [first, first + count) in a step's input (`rows` a
  // sequence): the unsharded run's rows.
  Tensor input(Session& s, uint64_t sd, int64_t rows, int64_t first, int64_t count) const {
    const int64_t n = count * rows, at = (s.rank().dp_rank * (m_batch / m_sizes.dp) + first) * rows;
    if (n == m_batch * rows) return s.upload_random({n, m_d}, m_dtype, sd);
    return s.upload_random_slice({m_batch * rows, m_d}, m_dtype, sd, 0, at, at + n);
  }
  // This stage's micro-batches of the step through its layers (pipeline_schedule.h's forward
  // program): the last stage's outputs joined, another stage's last one sent.
  Tensor pipeline(Session& s, const StepCtx& st, uint64_t sd) {
    using namespace runtime;
    const int64_t stage = s.rank().pp_rank, per = m_batch / m_sizes.dp / m_micro;
    const bool last = stage == m_sizes.pp - 1;
    std::vector<Tensor> in(static_cast<size_t>(m_micro)), outs;
    for (const PipeStep& p : pipeline_program(m_sizes.pp, stage, m_micro, false)) {
      Tensor& x = in[static_cast<size_t>(p.micro)];
      if (p.op == PipeOp::recv_forward) x = recv(s, {per * st.rows, m_d}, m_dtype, "pp", stage - 1);
      if (p.op == PipeOp::send_forward) send(x, "pp", stage + 1);
      if (p.op != PipeOp::forward) continue;
      if (stage == 0) x = input(s, sd, st.rows, p.micro * per, per);
      x = layers(s, x, st, p.micro * per, per);
      if (last) outs.push_back(x);
    }
    return last ? detail::join_rows(outs) : in.back();
  }
  // This stage's layers over x, the rows of this replica's sequences [first, first + count).
  Tensor layers(Session& s, Tensor x, const StepCtx& st, int64_t first, int64_t count) {
    using namespace runtime;
    const int64_t first_layer = s.rank().pp_rank * (m_layers / m_sizes.pp);
    for (Layer& w : m_w) {
      s.set_origin({"layers." + std::to_string(first_layer + (&w - m_w.data())), ""});
      x = detail::gpt_layer(x, w, [&](const Tensor& q, const Tensor& k, const Tensor& v) {
        if (count == 1) return attend(s, st, w, static_cast<size_t>(first), q, k, v);
        std::vector<Tensor> ctx;  // sequence by sequence, over its own cache
        for (int64_t b = 0; b < count; ++b) {
          const int64_t lo = b * st.rows, hi = lo + st.rows;
          ctx.push_back(attend(s, st, w, static_cast<size_t>(first + b), slice(q, 0, lo, hi),
                               slice(k, 0, lo, hi), slice(v, 0, lo, hi)));
        }
        return detail::join_rows(ctx);
      });
    }
    s.clear_origin();
    return x;
  }
  // One sequence's attention in one layer: its keys and values written into its cache `b`, its
  // queries over the cached keys; [rows, d_model / tp], this rank's heads.
  Tensor attend(Session& s, const StepCtx& st, Layer& w, size_t b, Tensor q, const Tensor& k,
                const Tensor& v) {
    using namespace runtime;
    const int64_t hd = m_d / m_heads, H = m_heads / m_sizes.tp, dc = m_d / m_sizes.tp;
    const int64_t len = st.len, real = st.real, rows = st.rows;
    const bool prefill = st.prefill;
    Tensor &k_cache = w.k_cache[b], &v_cache = w.v_cache[b];
    Tensor keys, values;
    if (m_paged) {
      if (prefill) {  // the prompt's rows, block by block, into the blocks of its table
        for (int64_t blk = 0; blk * m_block < real; ++blk) {
          const int64_t lo = blk * m_block, hi = std::min(real, lo + m_block);
          const Attrs at{{"scalar", "blk" + std::to_string(blk)}};
          k_cache =
              s.op(compiler_stub::OpKind::dynamic_update_slice, {k_cache, slice(k, 0, lo, hi)}, at);
          v_cache =
              s.op(compiler_stub::OpKind::dynamic_update_slice, {v_cache, slice(v, 0, lo, hi)}, at);
        }
        keys = k;
        values = v;
      } else {  // append, then gather every key through the block table
        const Attrs at{{"scalar", std::string("slot")}};
        k_cache = s.op(compiler_stub::OpKind::dynamic_update_slice, {k_cache, k}, at);
        v_cache = s.op(compiler_stub::OpKind::dynamic_update_slice, {v_cache, v}, at);
        keys = embedding(k_cache, st.ids);
        values = embedding(v_cache, st.ids);
      }
    } else {
      const char* at = prefill ? "start" : "pos";
      k_cache = s.op(compiler_stub::OpKind::dynamic_update_slice, {k_cache, k},
                     {{"scalar", std::string(at)}});
      v_cache = s.op(compiler_stub::OpKind::dynamic_update_slice, {v_cache, v},
                     {{"scalar", std::string(at)}});
      keys = slice(k_cache, 0, 0, len);
      values = slice(v_cache, 0, 0, len);
    }
    q = transpose(reshape(q, {rows, H, hd}), {1, 0, 2});
    Tensor kt = transpose(reshape(keys, {len, H, hd}), {1, 2, 0});
    Tensor vt = transpose(reshape(values, {len, H, hd}), {1, 0, 2});
    Tensor scores = scale(batch_matmul(q, kt), 1.0 / std::sqrt(double(hd)));
    if (st.bias.valid()) scores = add(scores, st.bias);
    return reshape(transpose(batch_matmul(softmax(scores), vt), {1, 0, 2}), {rows, dc});
  }
  // Step `index`'s MACs at its real shapes (to its record) and where its padded work comes
  // from, each the step recorded at those shapes (Session::count_macs; the caches and the block
  // table stay as they are): a prefill's rows past the prompt, a token's keys past the tokens
  // so far (every sequence of a batch has the same length: no padding rows).
  void tally_macs(Session& s, int64_t index, int64_t real, int64_t len) {
    const std::vector<Layer> kept = m_w;
    const std::optional<runtime::KvBlockManager> kv = m_kv;
    const auto at = [&](int64_t extent) {
      const double macs = s.count_macs([&] { run(s, index, real, extent); });
      m_w = kept;
      m_kv = kv;
      return macs;
    };
    const double real_macs = at(real);
    s.add_real_macs(real_macs);
    m_real_macs += real_macs;
    if (len != real) (index == 0 ? m_prompt_pad_macs : m_keys_pad_macs) += at(len) - real_macs;
  }

 public:
  std::optional<std::pair<std::string, nlohmann::ordered_json>> report() const override {
    return std::make_pair(
        std::string("decoding"),
        nlohmann::ordered_json{
            {"padding_by_source",
             detail::padding_by_source(m_real_macs, 0, m_prompt_pad_macs, m_keys_pad_macs)}});
  }

 private:
  double m_real_macs = 0, m_prompt_pad_macs = 0, m_keys_pad_macs = 0;
  int64_t m_layers, m_d, m_heads, m_ff, m_prompt, m_new, m_batch, m_micro = 1;
  std::string m_dynamic;
  bool m_paged;
  int64_t m_block;
  std::optional<runtime::KvBlockManager> m_kv;
  isa::DType m_dtype;
  runtime::ParallelSizes m_sizes;
  std::map<std::string, std::string> m_params;
  std::vector<Layer> m_w;
  int64_t m_cache_len = 0;
};

// Packed attention: `seq` tokens of `segments` sequences packed into one row (as vision tokens of
// several images are), so attention needs a block-diagonal mask: a token sees only its own
// sequence. `mask=host` builds the dense [seq, seq] bias on the host and sends it every forward;
// `mask=chip` sends one segment id per token and the chip rebuilds the mask per tile (compare
// the ids as a column and as a row). One step: upload x, the mask (or the ids), one attention
// block (QKV, fused attention with that mask, output projection, residual).
class PackedMask final : public Workload {
 public:
  explicit PackedMask(Params& p)
      : m_seq(p.integer("seq", 1024, 2, kBig)),
        m_segments(p.integer("segments", 4, 1, kBig)),
        m_d(p.integer("d_model", 768, 1, kBig)),
        m_heads(p.integer("heads", 12, 1, 4096)),
        m_chip(p.choice("mask", "host", {"host", "chip"}) == "chip"),
        m_dtype(p.dtype("dtype", isa::DType::bf16)),
        m_params((p.finish(), p.resolved())) {
    check_heads(p, m_d, m_heads);
    if (m_segments > m_seq) {
      p.fail("segments", std::to_string(m_segments) + " sequences cannot pack into " +
                             std::to_string(m_seq) + " tokens");
    }
  }
  std::map<std::string, std::string> params() const override { return m_params; }
  void setup(Session& s) override {
    uint64_t k = 1;
    for (Tensor* w : {&m_wq, &m_wk, &m_wv, &m_wo}) {
      *w = s.upload_random({m_d, m_d}, m_dtype, seed(s, k++));
    }
  }
  std::vector<int64_t> buckets(const Session&) const override { return {m_seq}; }
  Tensor step(Session& s, int64_t index) override {
    s.add_real_macs(s.count_macs([&] { forward(s, index); }));
    return forward(s, index);
  }
  void trace(Session& s, int64_t) override { s.to_host(forward(s, 0)); }

 private:
  // The segment of token i: sequences of (nearly) equal length, back to back.
  int64_t segment(int64_t i) const { return i * m_segments / m_seq; }
  Tensor forward(Session& s, int64_t index) {
    using namespace runtime;
    const int64_t L = m_seq, H = m_heads;
    Tensor x = s.upload_random({L, m_d}, m_dtype, seed(s, 1000 + static_cast<uint64_t>(index)));
    Tensor mask;
    if (m_chip) {
      std::vector<float> ids(static_cast<size_t>(L));
      for (int64_t i = 0; i < L; ++i) ids[static_cast<size_t>(i)] = float(segment(i));
      mask = s.upload({L}, isa::DType::int32, ids);
    } else {
      std::vector<float> dense;
      if (s.functional()) {
        dense.assign(static_cast<size_t>(L * L), 0.0f);
        for (int64_t i = 0; i < L; ++i) {
          for (int64_t j = 0; j < L; ++j) {
            if (segment(i) != segment(j)) dense[static_cast<size_t>(i * L + j)] = -1e9f;
          }
        }
      }
      mask = s.upload({L, L}, m_dtype, dense);
    }
    // Fused attention: the segment ids (mask=chip) or the dense bias (mask=host) as its mask.
    Tensor ctx = attention(matmul(x, m_wq), matmul(x, m_wk), matmul(x, m_wv), &mask, H, false);
    return add(x, matmul(ctx, m_wo));
  }
  int64_t m_seq, m_segments, m_d, m_heads;
  bool m_chip;
  isa::DType m_dtype;
  std::map<std::string, std::string> m_params;
  Tensor m_wq, m_wk, m_wv, m_wo;
};

}  // namespace

void Workload::run(Session& s, int64_t steps) {
  for (int64_t i = 0; i < steps; ++i) {
    s.begin_step(i);
    Tensor out = step(s, i);
    s.to_host(out);
    s.end_step();
  }
}

std::vector<std::pair<std::string, std::string>> workload_list() {
  return {
      {"gemm", "gemm:m=512,k=768,n=768,dtype=bf16 - C = A x B, B a resident weight"},
      {"mlp", "mlp:batch=512,d_model=768,d_ff=3072,layers=1,dtype=bf16 - residual gelu MLP blocks"},
      {"transformer",
       "transformer:layers=1,d_model=768,heads=12,d_ff=3072,seq=512,batch=1,style=gpt2,"
       "tp=1,sp=0,dp=1,dtype=bf16 - GPT-2- or Llama-style blocks, causal attention; tp ranks "
       "split heads and the MLP (Megatron-LM; sp=1: the norms' rows too), dp ranks the batch"},
      {"train",
       "train:batch=512,d_model=768,d_ff=3072,layers=1,lr=0.01,tp=1,pp=1,microbatches=1,dp=1,"
       "bucket_mb=0,dtype=bf16 - a training step of residual tanh MLP blocks (forward, backward, "
       "SGD); tp ranks split the MLP (Megatron-LM), pp stages the layers (1F1B), dp ranks split "
       "the batch and all-reduce the gradients"},
      {"decode",
       "decode:layers=1,d_model=768,heads=12,d_ff=3072,prompt=128,new_tokens=128,batch=1,"
       "dynamic=exact,kv=contiguous,block=16,tp=1,pp=1,microbatches=1,dp=1,dtype=bf16 - a "
       "prefill, then one step per token over a KV cache (dynamic: exact, bounded or bucketed "
       "shapes; kv: contiguous or paged); tp ranks split the heads, the KV cache and the MLP "
       "(Megatron-LM), pp stages the layers, dp replicas the batch"},
      {"serve",
       "serve:requests=200,rate=0,scheduler=continuous,max_batch=32,dynamic=exact,block=16,"
       "kv_blocks=0,prompt_mean=161,output_mean=338,sigma=1,max_prompt=768,context=1024,"
       "lengths=FILE,layers=12,d_model=768,heads=12,d_ff=3072,vocab=50257,tp=1,pp=1,dp=1,"
       "dtype=bf16 - a seeded request stream (Poisson at rate/s, 0: all at once) under a static "
       "or continuous batch scheduler over a paged KV cache; tp ranks split the heads, the KV "
       "pools, the MLP and the vocab head (Megatron-LM), pp stages the layers (stage 0 schedules), "
       "dp "
       "replicas the requests"},
      {"mask",
       "mask:seq=1024,segments=4,d_model=768,heads=12,mask=host,dtype=bf16 - attention over "
       "packed sequences with a block-diagonal mask, sent dense by the host or rebuilt on the "
       "chip from segment ids"},
      {"graph",
       "graph:file=G.json,weights=DIR - any graph file (e.g. from `wallsim import onnx`) as one "
       "step; weights from DIR/<name>.npy (default G.weights/ beside it), else seeded random"},
      {"program",
       "program:file=P.json,bound=NAME<=MAX;... - a captured PyTorch program replayed step by "
       "step (docs/PROGRAM_FORMAT.md); bound: named dims run at MAX, masked past the real "
       "extent (also `run --bound`); dp=N,bucket_mb=X,dp_dim=batch: data parallel over N "
       "ranks, each its rows of the dim, gradients all-reduced per step (docs/DISTRIBUTED.md)"}};
}

std::unique_ptr<Workload> make_workload(const WorkloadSpec& spec) {
  Params p(spec);
  if (spec.name == "gemm") return std::make_unique<Gemm>(p);
  if (spec.name == "mlp") return std::make_unique<Mlp>(p);
  if (spec.name == "transformer") return detail::make_transformer(p);
  if (spec.name == "train") return detail::make_train(p);
  if (spec.name == "decode") return std::make_unique<Decode>(p);
  if (spec.name == "serve") return detail::make_serve(p);
  if (spec.name == "mask") return std::make_unique<PackedMask>(p);
  if (spec.name == "graph") return detail::make_graph_workload(p);
  if (spec.name == "program") return detail::make_program_workload(p);
  std::string names;
  for (const auto& [name, doc] : workload_list()) names += (names.empty() ? "" : ", ") + name;
  throw base::InputError("--workload " + spec.text,
                         "unknown workload '" + spec.name + "' (known: " + names + ")");
}

}  // namespace wallsim::workloads
