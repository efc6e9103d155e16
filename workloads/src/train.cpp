// train: one training step of residual MLP blocks — forward, backward and SGD — split over tp
// (tensor parallel) ranks that hold column and row blocks of the weights, dp (data parallel)
// ranks that all-reduce their gradients and pp (pipeline) stages running 1F1B.
#include "wallsim/runtime/ops.h"
#include "wallsim/workloads/pipeline_schedule.h"
#include "workload_params.h"

namespace wallsim::workloads::detail {
namespace {

using runtime::Tensor;

// `layers` blocks y = tanh(x W1) W2 + x, the loss 0.5 sum((y - t)^2) / batch over `batch` rows
// of seeded inputs x and targets t, the gradients by hand (tanh' = 1 - tanh^2, so the backward
// needs only matmuls, transposes and element-wise ops), then W -= lr dW. dp > 1: each rank runs
// batch / dp of the rows (the unsharded run's rows of the same seeded x and t) and all-reduces
// the gradients over "dp" as the backward produces them (the last layer's first, as DDP's buckets
// go), so every rank's weights stay the unsharded run's. bucket_mb = 0: one all-reduce per weight;
// > 0: DDP's bucketing — gradients gathered in the order the backward produces them into a bucket
// that is all-reduced (one concat, one all-reduce, a slice per weight) once it holds bucket_mb MB
// (10^6 bytes) or more, the last one at the backward's end. A bucket's all-reduce is issued where
// it closes, on the plan's collective queue (its own, in program order), so inside one plan (AOT;
// fused with the collective kept in its group) it overlaps the rest of the backward; the SGD
// updates, which wait for the reduced gradients, come after the whole backward, as DDP's
// optimizer step does.
//
// tp > 1 (Megatron-LM's MLP): each tensor-parallel rank holds W1's column block and W2's row block
// of d_ff / tp (the unsharded run's slices of the same seeded weights), so tanh(x W1) is its own
// columns of the hidden and its h W2 a partial sum, all-reduced over "tp" before the residual add
// (Megatron's g); in the backward the gradient to the block's input, dpre W1^T, is a partial sum
// too, all-reduced over "tp" (Megatron's f), and each rank's weight gradients are its own blocks'
// (all-reduced over "dp" with the ranks of its tp rank). Every rank's loss is the unsharded one.
//
// pp > 1 (or microbatches > 1): stage pp_rank holds layers / pp consecutive layers; each rank's
// rows split into `microbatches` micro-batches that flow through the stages by the 1F1B schedule
// (pipeline_schedule.h): activations sent to the next stage over "pp", gradients back; each stage
// accumulates its weight gradients over the micro-batches, all-reduces them over "dp" after its
// last backward and applies SGD once.
class Train final : public Workload {
 public:
  explicit Train(Params& p)
      : m_batch(p.integer("batch", 512, 1, kBig)),
        m_d(p.integer("d_model", 768, 1, kBig)),
        m_ff(p.integer("d_ff", 3072, 1, kBig)),
        m_layers(p.integer("layers", 1, 1, 1024)),
        m_lr(p.real("lr", 0.01, 0.0, 1e6)),
        m_bucket_bytes(p.real("bucket_mb", 0.0, 0.0, 1e6) * 1e6),
        m_dtype(p.dtype("dtype", isa::DType::bf16)) {
    m_sizes.dp = p.integer("dp", 1, 1, 65536);
    m_sizes.tp = p.integer_if_given("tp", 1, 1, 65536);
    m_sizes.pp = p.integer_if_given("pp", 1, 1, 1024);
    m_micro = p.integer_if_given("microbatches", 1, 1, kBig);
    p.finish();
    m_params = p.resolved();
    if (m_ff % m_sizes.tp) {
      p.fail("tp", "d_ff " + std::to_string(m_ff) + " does not split over " +
                       std::to_string(m_sizes.tp) + " tensor-parallel ranks");
    }
    if (m_batch % m_sizes.dp) {
      p.fail("dp", "batch " + std::to_string(m_batch) + " does not split over " +
                       std::to_string(m_sizes.dp) + " data-parallel ranks");
    }
    check_pipeline(p, m_layers, m_batch / m_sizes.dp, m_sizes.pp, m_micro, "rows");
  }
  std::map<std::string, std::string> params() const override { return m_params; }
  runtime::ParallelSizes parallel() const override { return m_sizes; }
  std::vector<Tensor> state() const override {
    std::vector<Tensor> out;
    for (const Layer& w : m_w) {
      out.push_back(w.w1);
      out.push_back(w.w2);
    }
    return out;
  }
  void setup(Session& s) override {
    // This stage's layers, each with the unsharded run's seeds (two a layer); with tp, this
    // rank's column block of W1 and row block of W2.
    const int64_t per = m_layers / m_sizes.pp, first = s.rank().pp_rank * per;
    const int64_t fc = m_ff / m_sizes.tp, at = s.rank().tp_rank * fc;
    uint64_t k = 1 + 2 * static_cast<uint64_t>(first);
    for (int64_t l = first; l < first + per; ++l) {
      Layer w;
      const uint64_t k1 = k++, k2 = k++;
      if (m_sizes.tp == 1) {
        w.w1 = s.upload_random({m_d, m_ff}, m_dtype, seed(s, k1));
        w.w2 = s.upload_random({m_ff, m_d}, m_dtype, seed(s, k2));
      } else {
        w.w1 = s.upload_random_slice({m_d, m_ff}, m_dtype, seed(s, k1), 1, at, at + fc);
        w.w2 = s.upload_random_slice({m_ff, m_d}, m_dtype, seed(s, k2), 0, at, at + fc);
      }
      m_w.push_back(w);
    }
  }
  std::vector<int64_t> buckets(const Session&) const override { return {m_batch}; }
  Tensor step(Session& s, int64_t index) override {
    const std::vector<Layer> kept = m_w;  // the recording's updates are not the step's
    s.add_real_macs(s.count_macs([&] { train_step(s, index); }));
    m_w = kept;
    return train_step(s, index);
  }
  void trace(Session& s, int64_t) override {
    const std::vector<Layer> kept = m_w;  // tracing runs nothing: the weights stay
    s.to_host(train_step(s, 0));
    m_w = kept;
  }

 private:
  // This rank's rows [first, first + rows) of a seeded [batch, d_model] tensor.
  Tensor rows_of(Session& s, uint64_t sd) const {
    const int64_t rows = m_batch / m_sizes.dp, first = s.rank().dp_rank * rows;
    if (m_sizes.dp == 1) return s.upload_random({m_batch, m_d}, m_dtype, sd);
    return s.upload_random_slice({m_batch, m_d}, m_dtype, sd, 0, first, first + rows);
  }
  Tensor train_step(Session& s, int64_t index) {
    using namespace runtime;
    if (m_sizes.pp > 1 || m_micro > 1) return pipeline_step(s, index);
    const uint64_t i = static_cast<uint64_t>(index);
    Tensor x = rows_of(s, seed(s, 100000 + 2 * i)), t = rows_of(s, seed(s, 100001 + 2 * i));
    std::vector<Tensor> xs, hs;  // each layer's input and tanh output
    for (const Layer& w : m_w) {
      s.set_origin({"layers." + std::to_string(&w - m_w.data()), "forward"});
      x = forward(w, x, xs, hs);
    }
    Tensor e = sub(x, t);
    Tensor dy = scale(e, 1.0 / double(m_batch));  // of the whole batch's mean loss
    Buckets buckets(m_bucket_bytes, m_lr, m_ff / m_sizes.tp, m_d);
    for (size_t l = m_w.size(); l-- > 0;) {
      Layer& w = m_w[l];
      s.set_origin({"layers." + std::to_string(l), "backward"});
      dy = backward(w, xs[l], hs[l], dy, l > 0, [&](Tensor g, bool second) {
        buckets.add(std::move(g), second ? &w.w1 : &w.w2);
      });
    }
    buckets.reduce();
    buckets.apply();  // after the backward, as DDP's optimizer step: no update waits in it
    s.clear_origin();
    return reduce_sum(mul(e, e));  // each row's squared error
  }
  Tensor pipeline_step(Session& s, int64_t index);
  struct Layer {
    Tensor w1, w2;
  };
  // One block's forward, y = tanh(x W1) W2 + x (with tp, h W2 all-reduced over "tp" first),
  // keeping its input and tanh output for the backward.
  Tensor forward(const Layer& w, const Tensor& x, std::vector<Tensor>& xs,
                 std::vector<Tensor>& hs) const {
    using namespace runtime;
    xs.push_back(x);
    hs.push_back(tanh(matmul(x, w.w1)));
    Tensor y = matmul(hs.back(), w.w2);
    if (m_sizes.tp > 1) y = all_reduce(y, "tp");
    return add(y, x);
  }
  // One block's backward from dy, the gradient of its output: W2's gradient, then W1's, each
  // handed to `grad` (second: W1's) as soon as it is made; returns the gradient of the block's
  // input when `input` (with tp, dpre W1^T all-reduced over "tp" first), else dy.
  template <class Grad>
  Tensor backward(const Layer& w, const Tensor& x, const Tensor& h, const Tensor& dy, bool input,
                  Grad&& grad) const {
    using namespace runtime;
    grad(matmul(transpose(h, {1, 0}), dy), false);
    Tensor dh = matmul(dy, transpose(w.w2, {1, 0}));
    Tensor dpre = sub(dh, mul(mul(dh, h), h));
    grad(matmul(transpose(x, {1, 0}), dpre), true);
    if (!input) return dy;
    Tensor dx = matmul(dpre, transpose(w.w1, {1, 0}));
    if (m_sizes.tp > 1) dx = all_reduce(dx, "tp");
    return add(dx, dy);
  }
  // The gradients waiting for their all-reduce, each with the weight it updates, and the
  // all-reduced ones waiting for their update (W -= lr dW), applied when the backward no longer
  // reads the weight. A bucket's gradients are sliced out of its all-reduced sum there too, as
  // DDP copies its buckets back into the gradients when the backward ends (finalize_backward):
  // nothing in the backward waits for a bucket's all-reduce.
  class Buckets {
   public:
    Buckets(double cap_bytes, double lr, int64_t ff, int64_t d)
        : m_cap(cap_bytes), m_lr(lr), m_ff(ff), m_d(d) {}
    void add(Tensor grad, Tensor* weight) {
      m_bytes += double(m_ff * m_d * isa::dtype_bytes(grad.dtype()));
      m_pending.push_back({std::move(grad), weight});
      if (m_bytes >= m_cap) reduce();
    }
    void reduce() {
      using namespace runtime;
      if (m_pending.size() == 1) {
        m_ready.push_back({all_reduce(m_pending[0].first, "dp"), m_pending[0].second, -1});
      } else if (m_pending.size() > 1) {
        std::vector<Tensor> flat;  // every gradient as [d_ff, d_model] rows (W1's [d, ff] too)
        for (const auto& [g, w] : m_pending) flat.push_back(reshape(g, {m_ff, m_d}));
        const Tensor sum = all_reduce(concat(flat, 0), "dp");
        for (size_t i = 0; i < m_pending.size(); ++i) {
          Tensor* w = m_pending[i].second;
          const int64_t at = int64_t(i) * m_ff;
          m_ready.push_back({sum, w, at});
        }
      }
      m_pending.clear();
      m_bytes = 0;
    }
    void apply() {
      using namespace runtime;
      for (Ready& r : m_ready) {
        const Tensor g =
            r.at < 0 ? r.grad : reshape(slice(r.grad, 0, r.at, r.at + m_ff), r.w->shape());
        *r.w = sub(*r.w, scale(g, m_lr));
      }
      m_ready.clear();
    }

   private:
    double m_cap, m_lr;
    int64_t m_ff, m_d;
    double m_bytes = 0;
    // An all-reduced gradient, or (at >= 0) its rows [at, at + d_ff) of a bucket's sum.
    struct Ready {
      Tensor grad;
      Tensor* w;
      int64_t at;
    };
    std::vector<std::pair<Tensor, Tensor*>> m_pending;
    std::vector<Ready> m_ready;
  };
  int64_t m_batch, m_d, m_ff, m_layers, m_micro = 1;
  double m_lr, m_bucket_bytes;
  isa::DType m_dtype;
  runtime::ParallelSizes m_sizes;
  std::map<std::string, std::string> m_params;
  std::vector<Layer> m_w;
};

// One step of stage pp_rank by the 1F1B schedule (the class comment).
Tensor Train::pipeline_step(Session& s, int64_t index) {
  using namespace runtime;
  const int64_t stages = m_sizes.pp, stage = s.rank().pp_rank;
  const bool last = stage == stages - 1;
  const int64_t rows = m_batch / m_sizes.dp, mb = rows / m_micro;
  const int64_t first_layer = stage * (m_layers / stages);
  const uint64_t i = static_cast<uint64_t>(index);
  // Micro-batch m's rows of a seeded [batch, d_model] tensor (this data-parallel rank's).
  const auto micro_rows = [&](uint64_t sd, int64_t m) {
    const int64_t at = s.rank().dp_rank * rows + m * mb;
    return s.upload_random_slice({m_batch, m_d}, m_dtype, sd, 0, at, at + mb);
  };
  struct Micro {
    std::vector<Tensor> xs, hs;  // each layer's input and tanh output
    Tensor y, dy;                // the stage's output (or received input); the gradient
  };
  std::vector<Micro> micro(static_cast<size_t>(m_micro));
  std::vector<Layer> grad(m_w.size());  // accumulated over the micro-batches
  const auto accumulate = [](Tensor& sum, const Tensor& g) { sum = sum.valid() ? add(sum, g) : g; };
  std::vector<Tensor> losses;
  Tensor last_grad;
  const auto layer_name = [&](size_t l) { return "layers." + std::to_string(first_layer + l); };
  for (const PipeStep& st : pipeline_program(stages, stage, m_micro, true)) {
    Micro& u = micro[static_cast<size_t>(st.micro)];
    switch (st.op) {
      case PipeOp::recv_forward:
        u.y = recv(s, {mb, m_d}, m_dtype, "pp", stage - 1);
        break;
      case PipeOp::forward: {
        Tensor x = stage == 0 ? micro_rows(seed(s, 100000 + 2 * i), st.micro) : u.y;
        for (size_t l = 0; l < m_w.size(); ++l) {
          s.set_origin({layer_name(l), "forward"});
          x = forward(m_w[l], x, u.xs, u.hs);
        }
        u.y = x;
        if (last) {
          Tensor e = sub(x, micro_rows(seed(s, 100001 + 2 * i), st.micro));
          u.dy = scale(e, 1.0 / double(m_batch));  // of the whole batch's mean loss
          losses.push_back(reduce_sum(mul(e, e)));
        }
        break;
      }
      case PipeOp::send_forward:
        send(u.y, "pp", stage + 1);
        u.y = Tensor();
        break;
      case PipeOp::recv_backward:
        u.dy = last_grad = recv(s, {mb, m_d}, m_dtype, "pp", stage + 1);
        break;
      case PipeOp::backward: {
        Tensor dy = u.dy;
        for (size_t l = m_w.size(); l-- > 0;) {
          s.set_origin({layer_name(l), "backward"});
          dy = backward(
              m_w[l], u.xs[l], u.hs[l], dy, l > 0 || stage > 0,
              [&](Tensor g, bool second) { accumulate(second ? grad[l].w1 : grad[l].w2, g); });
        }
        u = Micro();
        u.dy = dy;
        break;
      }
      case PipeOp::send_backward:
        send(u.dy, "pp", stage - 1);
        u.dy = Tensor();
        break;
    }
  }
  // The data-parallel all-reduce after the last backward (the last layer's first), then SGD.
  s.set_origin({layer_name(m_w.size() - 1), "backward"});
  Buckets buckets(m_bucket_bytes, m_lr, m_ff / m_sizes.tp, m_d);
  for (size_t l = m_w.size(); l-- > 0;) {
    buckets.add(grad[l].w2, &m_w[l].w2);
    buckets.add(grad[l].w1, &m_w[l].w1);
  }
  buckets.reduce();
  buckets.apply();
  s.clear_origin();
  // The last stage's rows' squared errors; another stage's, the last gradient it received.
  if (last) return join_rows(losses);
  return reduce_sum(last_grad);
}

}  // namespace

std::unique_ptr<Workload> make_train(Params& p) { return std::make_unique<Train>(p); }

}  // namespace wallsim::workloads::detail
