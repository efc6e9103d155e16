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
// each gradient over "dp" as the backward produces it (one all-reduce per weight, the last
// layer's first, as DDP's buckets go), so every rank's weights stay the unsharded run's.
class Train final : public Workload {
 public:
  explicit Train(Params& p)
      : m_batch(p.integer("batch", 512, 1, kBig)),
        m_d(p.integer("d_model", 768, 1, kBig)),
        m_ff(p.integer("d_ff", 3072, 1, kBig)),
        m_layers(p.integer("layers", 1, 1, 1024)),
        m_lr(p.real("lr", 0.01, 0.0, 1e6)),
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
    for (size_t l = m_w.size(); l-- > 0;) {
      Layer& w = m_w[l];
      s.set_origin({"layers." + std::to_string(l), "backward"});
      Tensor dw2 = all_reduce(matmul(transpose(hs[l], {1, 0}), dy), "dp");
      Tensor dh = matmul(dy, transpose(w.w2, {1, 0}));
      Tensor dpre = sub(dh, mul(mul(dh, hs[l]), hs[l]));
      Tensor dw1 = all_reduce(matmul(transpose(xs[l], {1, 0}), dpre), "dp");
      if (l > 0) dy = add(matmul(dpre, transpose(w.w1, {1, 0})), dy);
      w.w2 = sub(w.w2, scale(dw2, m_lr));
      w.w1 = sub(w.w1, scale(dw1, m_lr));
    }
    s.clear_origin();
    const double rows = double(m_batch / m_sizes.dp);
    s.add_real_macs(6.0 * double(m_layers) * rows * double(m_d) * double(m_ff));
    return reduce_sum(mul(e, e));  // each row's squared error
  }
  struct Layer {
    Tensor w1, w2;
  };
  int64_t m_batch, m_d, m_ff, m_layers;
  double m_lr;
  isa::DType m_dtype;
  runtime::ParallelSizes m_sizes;
  std::map<std::string, std::string> m_params;
  std::vector<Layer> m_w;
};

}  // namespace

std::unique_ptr<Workload> make_train(Params& p) { return std::make_unique<Train>(p); }

}  // namespace wallsim::workloads::detail
