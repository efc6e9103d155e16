// transformer: GPT-2- or Llama-style blocks, one forward pass, split over tp (tensor parallel,
// Megatron-LM), pp (pipeline stages) and dp (data parallel) ranks.
#include "wallsim/runtime/ops.h"
#include "wallsim/workloads/pipeline_schedule.h"
#include "workload_params.h"

namespace wallsim::workloads::detail {
namespace {

using runtime::Tensor;

// Transformer blocks, one forward pass over `batch` sequences of `seq` tokens: causal
// self-attention (one fused attention op; its mask made on the chip), then an MLP, each with a
// residual. `style=gpt2`: layernorm, biases, a gelu MLP. `style=llama`: rmsnorm, no biases, a
// SwiGLU MLP (silu(x W1) * (x W3)) W2; rotary position embeddings are not modelled.
//
// tp > 1 (Megatron-LM): each tensor-parallel rank holds heads / tp heads — the column blocks of
// Wq, Wk, Wv (and their biases) — and the matching row block of Wo; the MLP's W1 (and W3) by
// column blocks, W2 by row blocks. Each rank's attention output projection and MLP output are
// partial sums, all-reduced over "tp" (two all-reduces per layer), then the bias and the
// residual are added. dp > 1: each data-parallel rank runs batch / dp of the sequences. Every
// shard is the unsharded run's slice of the same seeded weight, so the ranks' outputs are the
// unsharded run's.
//
// sp=1 with tp > 1 (Megatron-LM sequence parallelism, Korthikanti et al. 2022): the norm,
// residual and bias regions hold this rank's block of the rows ([tokens, d_model], tokens /
// tp a rank); each tp all-reduce becomes an all-gather of the rows before the column-parallel
// linears and a reduce-scatter after the row-parallel ones (the same bytes per layer, a tp-th of
// the activations a rank holds). The step's output is the last layer's rows all-gathered.
//
// pp > 1 (or microbatches > 1): stage pp_rank holds layers / pp consecutive layers; a rank's
// sequences split into `microbatches` micro-batches that flow through the stages (a forward
// pipeline: recv from the stage before over "pp", the layers, send on); the last stage's output
// is the unsharded run's rows. sp does not combine with a pipeline yet.
class Transformer final : public Workload {
 public:
  explicit Transformer(Params& p)
      : m_layers(p.integer("layers", 1, 1, 1024)),
        m_d(p.integer("d_model", 768, 1, kBig)),
        m_heads(p.integer("heads", 12, 1, 4096)),
        m_ff(p.integer("d_ff", 3072, 1, kBig)),
        m_seq(p.integer("seq", 512, 1, kBig)),
        m_batch(p.integer("batch", 1, 1, 4096)),
        m_llama(p.choice("style", "gpt2", {"gpt2", "llama"}) == "llama"),
        m_dtype(p.dtype("dtype", isa::DType::bf16)) {
    m_sizes.tp = p.integer("tp", 1, 1, 65536);
    m_sizes.dp = p.integer("dp", 1, 1, 65536);
    m_sp = p.integer("sp", 0, 0, 1) == 1;
    m_sizes.pp = p.integer_if_given("pp", 1, 1, 1024);
    m_micro = p.integer_if_given("microbatches", 1, 1, 4096);
    p.finish();
    m_params = p.resolved();
    if (!m_sp) m_params.erase("sp");  // runs without it report as before
    if (m_sp && m_sizes.tp == 1) p.fail("sp", "sequence parallel needs tp > 1");
    if (m_sp && (m_batch / m_sizes.dp * m_seq) % m_sizes.tp) {
      p.fail("sp", std::to_string(m_batch / m_sizes.dp * m_seq) + " tokens do not split over " +
                       std::to_string(m_sizes.tp) + " tensor-parallel ranks");
    }
    check_heads(p, m_d, m_heads);
    check_tensor_parallel(p, m_heads, m_ff, m_sizes.tp);
    if (m_batch % m_sizes.dp) {
      p.fail("dp", "batch " + std::to_string(m_batch) + " does not split over " +
                       std::to_string(m_sizes.dp) + " data-parallel ranks");
    }
    check_pipeline(p, m_layers, m_batch / m_sizes.dp, m_sizes.pp, m_micro, "sequences");
    if (m_sp && (m_sizes.pp > 1 || m_micro > 1)) {
      p.fail("sp", "sequence parallel does not combine with pp or microbatches yet");
    }
  }
  std::map<std::string, std::string> params() const override { return m_params; }
  std::optional<std::pair<std::string, nlohmann::ordered_json>> report() const override;
  runtime::ParallelSizes parallel() const override { return m_sizes; }
  void setup(Session& s) override {
    const runtime::RankContext& r = s.rank();
    const int64_t tp = m_sizes.tp, dc = m_d / tp, fc = m_ff / tp;
    uint64_t k = 1;
    bool mine = true;  // a layer of this pipeline stage's (the others only take their seeds)
    auto up = [&](std::vector<int64_t> shape) {
      const uint64_t sd = seed(s, k++);
      return mine ? s.upload_random(shape, m_dtype, sd) : Tensor();
    };
    // This rank's block along `axis` of a weight of shape `full` (whole when tp is 1).
    auto part = [&](std::vector<int64_t> full, int64_t axis, int64_t block) {
      if (tp == 1) return up(full);
      const int64_t at = r.tp_rank * block;
      const uint64_t sd = seed(s, k++);
      return mine ? s.upload_random_slice(full, m_dtype, sd, axis, at, at + block) : Tensor();
    };
    const int64_t per = m_layers / m_sizes.pp;
    for (int64_t l = 0; l < m_layers; ++l) {
      mine = l / per == r.pp_rank;
      Layer w;
      w.ln1_g = up({m_d});
      w.wq = part({m_d, m_d}, 1, dc);  // column-parallel: this rank's heads
      w.wk = part({m_d, m_d}, 1, dc);
      w.wv = part({m_d, m_d}, 1, dc);
      w.wo = part({m_d, m_d}, 0, dc);  // row-parallel
      w.ln2_g = up({m_d});
      w.w1 = part({m_d, m_ff}, 1, fc);
      w.w2 = part({m_ff, m_d}, 0, fc);
      if (m_llama) {
        w.w3 = part({m_d, m_ff}, 1, fc);
      } else {
        w.ln1_b = up({m_d});
        w.bq = part({m_d}, 0, dc);
        w.bk = part({m_d}, 0, dc);
        w.bv = part({m_d}, 0, dc);
        w.bo = up({m_d});
        w.ln2_b = up({m_d});
        w.b1 = part({m_ff}, 0, fc);
        w.b2 = up({m_d});
      }
      if (mine) m_w.push_back(w);
    }
  }
  std::vector<int64_t> buckets(const Session&) const override { return {m_seq}; }
  Tensor step(Session& s, int64_t index) override {
    s.add_real_macs(s.count_macs([&] { run(s, m_seq, index); }));
    return run(s, s.shape_for(m_seq), index);
  }
  void trace(Session& s, int64_t bucket) override { s.to_host(run(s, bucket, 0)); }

 private:
  // x W (+ b): GPT-2 layers have biases, Llama's do not.
  static Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
    Tensor y = runtime::matmul(x, w);
    return b.valid() ? runtime::bias_add(y, b) : y;
  }
  Tensor norm(const Tensor& x, const Tensor& g, const Tensor& b) const {
    return m_llama ? runtime::rmsnorm(x, g) : runtime::layernorm(x, g, b);
  }
  Tensor run(Session& s, int64_t seq, int64_t index) {
    const int64_t B = m_batch / m_sizes.dp;
    const uint64_t sd = seed(s, 100000 + static_cast<uint64_t>(index));
    Tensor x;
    if (m_sizes.pp > 1 || m_micro > 1) {
      x = pipeline(s, seq, sd);
    } else {
      // This rank's rows of the batch (sp: its block of its data-parallel rank's rows).
      const int64_t rows = m_sp ? B * seq / m_sizes.tp : B * seq;
      const int64_t first = s.rank().dp_rank * B * seq + (m_sp ? s.rank().tp_rank * rows : 0);
      x = rows == m_batch * seq
              ? s.upload_random({rows, m_d}, m_dtype, sd)
              : s.upload_random_slice({m_batch * seq, m_d}, m_dtype, sd, 0, first, first + rows);
      x = layers(s, x, B, seq);
      if (m_sp) x = runtime::all_gather(x, "tp");
    }
    return x;
  }
  // This stage's micro-batches through its layers (pipeline_schedule.h's forward program): the
  // last stage's outputs joined (the unsharded run's rows), another stage's last one sent.
  Tensor pipeline(Session& s, int64_t seq, uint64_t sd) {
    using namespace runtime;
    const int64_t stage = s.rank().pp_rank, B = m_batch / m_sizes.dp / m_micro, rows = B * seq;
    const bool last = stage == m_sizes.pp - 1;
    std::vector<Tensor> in(static_cast<size_t>(m_micro)), outs;
    for (const PipeStep& st : pipeline_program(m_sizes.pp, stage, m_micro, false)) {
      Tensor& x = in[static_cast<size_t>(st.micro)];
      if (st.op == PipeOp::recv_forward) x = recv(s, {rows, m_d}, m_dtype, "pp", stage - 1);
      if (st.op == PipeOp::send_forward) send(x, "pp", stage + 1);
      if (st.op != PipeOp::forward) continue;
      if (stage == 0) {
        const int64_t at = (s.rank().dp_rank * m_micro + st.micro) * rows;
        x = s.upload_random_slice({m_batch * seq, m_d}, m_dtype, sd, 0, at, at + rows);
      }
      x = layers(s, x, B, seq);
      if (last) outs.push_back(x);
    }
    return last ? join_rows(outs) : in.back();
  }
  // This rank's layers over x, B sequences of `seq` rows.
  Tensor layers(Session& s, Tensor x, int64_t B, int64_t seq) {
    using namespace runtime;
    const int64_t H = m_heads / m_sizes.tp;
    const int64_t first_layer = s.rank().pp_rank * (m_layers / m_sizes.pp);
    for (const Layer& w : m_w) {
      s.set_origin({"layers." + std::to_string(first_layer + (&w - m_w.data())), ""});
      Tensor h = enter(norm(x, w.ln1_g, w.ln1_b));
      // Causal attention per sequence of `seq` rows, fused (the mask made on the chip).
      Tensor a = attention(linear(h, w.wq, w.bq), linear(h, w.wk, w.bk), linear(h, w.wv, w.bv),
                           nullptr, H, true, B > 1 ? seq : 0);
      x = add(x, bias(leave(matmul(a, w.wo)), w.bo));
      Tensor h2 = enter(norm(x, w.ln2_g, w.ln2_b));
      Tensor up =
          m_llama ? mul(silu(matmul(h2, w.w1)), matmul(h2, w.w3)) : gelu(linear(h2, w.w1, w.b1));
      x = add(x, bias(leave(matmul(up, w.w2)), w.b2));
    }
    s.clear_origin();
    return x;
  }
  // Into the column-parallel linears every row (sp: gathered), out of the row-parallel ones the
  // sum over tp (sp: this rank's rows of it).
  Tensor enter(const Tensor& h) const { return m_sp ? runtime::all_gather(h, "tp") : h; }
  Tensor leave(const Tensor& y) const {
    return m_sp ? runtime::reduce_scatter(y, "tp") : runtime::all_reduce(y, "tp");
  }
  static Tensor bias(const Tensor& y, const Tensor& b) {
    return b.valid() ? runtime::bias_add(y, b) : y;
  }
  struct Layer {
    Tensor ln1_g, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_g, ln2_b, w1, b1, w2, b2, w3;
  };
  int64_t m_layers, m_d, m_heads, m_ff, m_seq, m_batch, m_micro = 1;
  bool m_llama, m_sp = false;
  isa::DType m_dtype;
  runtime::ParallelSizes m_sizes;
  std::map<std::string, std::string> m_params;
  std::vector<Layer> m_w;
};

// sp=1: the activations a training step would keep per layer and rank (Korthikanti et al. 2022,
// 16-bit: s b h (34/t + 5 a s / (h t)) bytes with sequence parallel, s b h (10 + 24/t + 5 a s /
// (h t)) with tensor parallel alone), and the rows this rank's residual stream holds.
std::optional<std::pair<std::string, nlohmann::ordered_json>> Transformer::report() const {
  if (!m_sp) return std::nullopt;
  const double s = double(m_seq), b = double(m_batch / m_sizes.dp), h = double(m_d),
               a = double(m_heads), t = double(m_sizes.tp), att = 5 * a * s / (h * t);
  const int64_t rows = m_batch / m_sizes.dp * m_seq / m_sizes.tp;
  return std::make_pair(
      std::string("sequence_parallel"),
      nlohmann::ordered_json{
          {"tp", m_sizes.tp},
          {"rows_per_rank", rows},
          {"residual_bytes_per_rank", rows * m_d * isa::dtype_bytes(m_dtype)},
          {"activation_bytes_per_layer", s * b * h * (34 / t + att)},
          {"activation_bytes_per_layer_without_sp", s * b * h * (10 + 24 / t + att)},
          {"collectives_per_layer", {{"all_gather", 2}, {"reduce_scatter", 2}}}});
}

}  // namespace

std::unique_ptr<Workload> make_transformer(Params& p) { return std::make_unique<Transformer>(p); }

}  // namespace wallsim::workloads::detail
