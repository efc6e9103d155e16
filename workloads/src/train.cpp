// train: one training step of residual MLP blocks — forward, backward and SGD — split over dp
// (data parallel) ranks that all-reduce their gradients.
#include "wallsim/runtime/ops.h"
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
// it closes; the core runs it in program order (no overlap with the backward is modelled).
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
    p.finish();
    m_params = p.resolved();
    if (m_batch % m_sizes.dp) {
      p.fail("dp", "batch " + std::to_string(m_batch) + " does not split over " +
                       std::to_string(m_sizes.dp) + " data-parallel ranks");
    }
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
    uint64_t k = 1;
    for (int64_t l = 0; l < m_layers; ++l) {
      Layer w;
      w.w1 = s.upload_random({m_d, m_ff}, m_dtype, seed(s, k++));
      w.w2 = s.upload_random({m_ff, m_d}, m_dtype, seed(s, k++));
      m_w.push_back(w);
    }
  }
  std::vector<int64_t> buckets(const Session&) const override { return {m_batch}; }
  Tensor step(Session& s, int64_t index) override { return train_step(s, index); }
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
    const uint64_t i = static_cast<uint64_t>(index);
    Tensor x = rows_of(s, seed(s, 100000 + 2 * i)), t = rows_of(s, seed(s, 100001 + 2 * i));
    std::vector<Tensor> xs, hs;  // each layer's input and tanh output
    for (const Layer& w : m_w) {
      s.set_origin({"layers." + std::to_string(&w - m_w.data()), "forward"});
      xs.push_back(x);
      hs.push_back(tanh(matmul(x, w.w1)));
      x = add(matmul(hs.back(), w.w2), x);
    }
    Tensor e = sub(x, t);
    Tensor dy = scale(e, 1.0 / double(m_batch));  // of the whole batch's mean loss
    Buckets buckets(m_bucket_bytes, m_lr, m_ff, m_d);
    for (size_t l = m_w.size(); l-- > 0;) {
      Layer& w = m_w[l];
      s.set_origin({"layers." + std::to_string(l), "backward"});
      buckets.add(matmul(transpose(hs[l], {1, 0}), dy), &w.w2);
      Tensor dh = matmul(dy, transpose(w.w2, {1, 0}));
      Tensor dpre = sub(dh, mul(mul(dh, hs[l]), hs[l]));
      buckets.add(matmul(transpose(xs[l], {1, 0}), dpre), &w.w1);
      if (l > 0) dy = add(matmul(dpre, transpose(w.w1, {1, 0})), dy);
      buckets.apply();  // this layer's weights are not read again in this backward
    }
    buckets.reduce();
    buckets.apply();
    s.clear_origin();
    const double rows = double(m_batch / m_sizes.dp);
    s.add_real_macs(6.0 * double(m_layers) * rows * double(m_d) * double(m_ff));
    return reduce_sum(mul(e, e));  // each row's squared error
  }
  struct Layer {
    Tensor w1, w2;
  };
  // The gradients waiting for their all-reduce, each with the weight it updates, and the
  // all-reduced ones waiting for their update (W -= lr dW), applied when the backward no longer
  // reads the weight.
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
        m_ready.push_back({all_reduce(m_pending[0].first, "dp"), m_pending[0].second});
      } else if (m_pending.size() > 1) {
        std::vector<Tensor> flat;  // every gradient as [d_ff, d_model] rows (W1's [d, ff] too)
        for (const auto& [g, w] : m_pending) flat.push_back(reshape(g, {m_ff, m_d}));
        const Tensor sum = all_reduce(concat(flat, 0), "dp");
        for (size_t i = 0; i < m_pending.size(); ++i) {
          Tensor* w = m_pending[i].second;
          const int64_t at = int64_t(i) * m_ff;
          m_ready.push_back({reshape(slice(sum, 0, at, at + m_ff), w->shape()), w});
        }
      }
      m_pending.clear();
      m_bytes = 0;
    }
    void apply() {
      for (auto& [g, w] : m_ready) *w = runtime::sub(*w, runtime::scale(g, m_lr));
      m_ready.clear();
    }

   private:
    double m_cap, m_lr;
    int64_t m_ff, m_d;
    double m_bytes = 0;
    std::vector<std::pair<Tensor, Tensor*>> m_pending, m_ready;
  };
  int64_t m_batch, m_d, m_ff, m_layers;
  double m_lr, m_bucket_bytes;
  isa::DType m_dtype;
  runtime::ParallelSizes m_sizes;
  std::map<std::string, std::string> m_params;
  std::vector<Layer> m_w;
};

}  // namespace

std::unique_ptr<Workload> make_train(Params& p) { return std::make_unique<Train>(p); }

}  // namespace wallsim::workloads::detail
