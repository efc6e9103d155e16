// Distributed runs (issue 38): a TP=8 GPT-2 layer, TP=4, PP=2 and DP=2 decode, DP=2 serving, a
// DP=4 training step and pipelines (PP=2 training by 1F1B, a PP=2 forward) on ranks of one
// System match the same workload unsharded, run in the same simulation on a core of its own.
// One system per process.
#include "distributed_run.h"

namespace wallsim::runtime {
namespace {

// A request's token values (`got`, a row of a serve report's `per_request`) match the unsharded
// server's row of the same request id in `want` to 1e-3 relative.
void expect_same_tokens(const nlohmann::ordered_json& got, const nlohmann::ordered_json& want,
                        const std::string& where) {
  const auto& a = got.at("values");
  const auto& b = want[got.at("id").get<size_t>()].at("values");
  ASSERT_EQ(a.size(), b.size()) << where;
  for (size_t t = 0; t < a.size(); ++t) {
    EXPECT_NEAR(a[t].get<double>(), b[t].get<double>(), 1e-3 * std::fabs(b[t].get<double>()))
        << where << " token " << t;
  }
}

TEST(Distributed, TensorParallel8Gpt2LayerMatchesUnsharded) {
  const std::string model = "transformer:layers=1,d_model=256,heads=8,d_ff=512,seq=128,dtype=fp32";
  const Outcome o = run_both(model + ",tp=8", model, "fused");
  const auto& want = o.values.back().at(0);
  for (size_t r = 0; r + 1 < o.values.size(); ++r) {
    EXPECT_LT(relative_error(o.values[r].at(0), want), 1e-3) << "rank " << r;
  }
}

// Sequence parallel (the norm and residual rows split over tp, all-gathers before the
// column-parallel linears, reduce-scatters after the row-parallel ones): the output rows,
// all-gathered, match the unsharded forward on every rank.
void expect_sequence_parallel_matches(const std::string& model, int64_t tp, const char* mode) {
  const Outcome o = run_both(model + ",tp=" + std::to_string(tp) + ",sp=1", model, mode);
  const auto& want = o.values.back().at(0);
  for (size_t r = 0; r + 1 < o.values.size(); ++r) {
    EXPECT_LT(relative_error(o.values[r].at(0), want), 1e-3) << "rank " << r;
  }
  const auto& report = o.reports.front();
  EXPECT_EQ(report.at("rows_per_rank").get<int64_t>(), want.shape.at(0) / tp);
  EXPECT_LT(report.at("activation_bytes_per_layer").get<double>(),
            report.at("activation_bytes_per_layer_without_sp").get<double>());
}
// Two GPT-2 layers over a batch of two sequences, TP=2.
TEST(Distributed, SequenceParallelGpt2MatchesUnshardedTp2UnderFused) {
  expect_sequence_parallel_matches(
      "transformer:layers=2,d_model=128,heads=8,d_ff=256,seq=64,batch=2,dtype=fp32", 2, "fused");
}
// Two Llama layers (rmsnorm, SwiGLU), TP=4.
TEST(Distributed, SequenceParallelLlamaMatchesUnshardedTp4UnderAot) {
  expect_sequence_parallel_matches(
      "transformer:layers=2,d_model=128,heads=4,d_ff=256,seq=64,style=llama,dtype=fp32", 4, "aot");
}

// Decode over a KV cache, TP=4 (2 heads and a quarter of the cache and MLP a rank): the prefill
// and two tokens, each a step of its own reading the cache the earlier steps wrote, match the
// unsharded decode on every rank, under AOT (buckets: the padded keys masked) and fused.
void expect_decode_matches(const char* mode) {
  const std::string model =
      "decode:layers=2,d_model=128,heads=8,d_ff=256,prompt=24,new_tokens=2,dtype=fp32";
  const Outcome o = run_both(model + ",tp=4", model, mode, 3);
  const auto& want = o.values.back();
  ASSERT_EQ(want.size(), 3u);
  for (size_t r = 0; r + 1 < o.values.size(); ++r) {
    ASSERT_EQ(o.values[r].size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_LT(relative_error(o.values[r][k], want[k]), 1e-3) << "rank " << r << " step " << k;
    }
  }
}
TEST(Distributed, TensorParallel4DecodeMatchesUnshardedUnderAot) { expect_decode_matches("aot"); }
TEST(Distributed, TensorParallel4DecodeMatchesUnshardedUnderFused) {
  expect_decode_matches("fused");
}

TEST(Distributed, DataParallel4TrainingStepMatchesUnsharded) {
  const std::string model = "train:batch=256,d_model=64,d_ff=128,layers=2,lr=0.5,dtype=fp32";
  const Outcome o = run_both(model + ",dp=4", model, "aot");
  const auto& want = o.values.back();
  ASSERT_EQ(want.size(), 5u);  // the loss rows, then W1, W2 of each layer
  for (size_t r = 0; r + 1 < o.values.size(); ++r) {
    ASSERT_EQ(o.values[r].size(), want.size());
    for (size_t k = 1; k < want.size(); ++k) {
      EXPECT_LT(relative_error(o.values[r][k], want[k]), 1e-4) << "rank " << r << " weight " << k;
    }
  }
}

// Bucketed gradients (bucket_mb: W2 and W1 of a layer are 32 KiB each in fp32, so a 0.05 MB
// bucket holds two of them, one all-reduce of a concat per layer) reach the same weights, fused.
TEST(Distributed, DataParallel4BucketedTrainingStepMatchesUnsharded) {
  const std::string model = "train:batch=256,d_model=64,d_ff=128,layers=2,lr=0.5,dtype=fp32";
  const Outcome o = run_both(model + ",dp=4,bucket_mb=0.05", model, "fused");
  const auto& want = o.values.back();
  ASSERT_EQ(want.size(), 5u);
  for (size_t r = 0; r + 1 < o.values.size(); ++r) {
    ASSERT_EQ(o.values[r].size(), want.size());
    for (size_t k = 1; k < want.size(); ++k) {
      EXPECT_LT(relative_error(o.values[r][k], want[k]), 1e-4) << "rank " << r << " weight " << k;
    }
  }
}

// Under the modes that launch each all-reduce as a plan of its own (asynchronously by default,
// runtime.async_collectives): the backward goes on beside a gradient's all-reduce, and each
// update still reads its all-reduced gradient (a launch waits for the asynchronous launches
// whose tensors it reads or writes), per weight and bucketed (AOT per weight and fused
// bucketed: the two tests above; one simulation a process, so a test a case).
void expect_dp_matches(const char* mode, const std::string& bucket) {
  const std::string model = "train:batch=256,d_model=64,d_ff=128,layers=2,lr=0.5,dtype=fp32";
  const Outcome o = run_both(model + ",dp=4" + bucket, model, mode);
  const auto& want = o.values.back();
  ASSERT_EQ(want.size(), 5u);
  for (size_t r = 0; r + 1 < o.values.size(); ++r) {
    ASSERT_EQ(o.values[r].size(), want.size());
    for (size_t k = 1; k < want.size(); ++k) {
      EXPECT_LT(relative_error(o.values[r][k], want[k]), 1e-4)
          << mode << bucket << " rank " << r << " weight " << k;
    }
  }
}
const std::string kBucketed = ",bucket_mb=0.05";
TEST(Distributed, DataParallel4TrainingStepMatchesUnshardedUnderNative) {
  expect_dp_matches("native", "");
}
TEST(Distributed, DataParallel4BucketedTrainingStepMatchesUnshardedUnderNative) {
  expect_dp_matches("native", kBucketed);
}
TEST(Distributed, DataParallel4TrainingStepMatchesUnshardedUnderEager) {
  expect_dp_matches("eager", "");
}
TEST(Distributed, DataParallel4BucketedTrainingStepMatchesUnshardedUnderEager) {
  expect_dp_matches("eager", kBucketed);
}
TEST(Distributed, DataParallel4TrainingStepMatchesUnshardedUnderEagerDebug) {
  expect_dp_matches("eager-debug", "");
}
TEST(Distributed, DataParallel4BucketedTrainingStepMatchesUnshardedUnderEagerDebug) {
  expect_dp_matches("eager-debug", kBucketed);
}
TEST(Distributed, DataParallel4TrainingStepMatchesUnshardedUnderFused) {
  expect_dp_matches("fused", "");
}
TEST(Distributed, DataParallel4BucketedTrainingStepMatchesUnshardedUnderAot) {
  expect_dp_matches("aot", kBucketed);
}

// Serving at TP=2 (2 heads, half the KV pools, the MLP and the vocab head a rank): a Poisson
// stream under continuous and static batching. Every rank's report is the same (the same
// scheduling decisions, tokens and times: the ranks stay in step), and each request's token
// values match the unsharded server's.
void expect_serve_matches(const std::string& scheduler, const char* mode) {
  const std::string model =
      "serve:requests=5,rate=20,layers=2,d_model=64,heads=4,d_ff=128,vocab=96,context=48,"
      "max_prompt=24,prompt_mean=10,output_mean=6,max_batch=4,block=4,dtype=fp32,scheduler=" +
      scheduler;
  const Outcome o = run_both(model + ",tp=2", model, mode, 0);
  const auto& want = o.reports.back().at("per_request");
  ASSERT_EQ(want.size(), 5u);
  for (size_t r = 0; r + 1 < o.reports.size(); ++r) {
    EXPECT_EQ(o.reports[r], o.reports[0]) << "rank " << r;
    const auto& got = o.reports[r].at("per_request");
    ASSERT_EQ(got.size(), want.size());
    for (size_t q = 0; q < want.size(); ++q) {
      expect_same_tokens(got[q], want,
                         "rank " + std::to_string(r) + " request " + std::to_string(q));
    }
  }
}
TEST(Distributed, TensorParallel2ServeMatchesUnshardedContinuousUnderFused) {
  expect_serve_matches("continuous", "fused");
}
TEST(Distributed, TensorParallel2ServeMatchesUnshardedStaticUnderAot) {
  expect_serve_matches("static", "aot");
}

// Pipeline parallel (1F1B): 4 layers on `pp` stages, 4 micro-batches, maybe data parallel too;
// each stage's updated weights are the unsharded step's weights of its layers, and with dp = 1
// the last stage's output is the unsharded step's loss rows.
void expect_pipeline_matches(int64_t pp, int64_t dp, const char* mode) {
  const std::string model = "train:batch=64,d_model=64,d_ff=128,layers=4,lr=0.5,dtype=fp32";
  const Outcome o = run_both(
      model + ",pp=" + std::to_string(pp) + ",dp=" + std::to_string(dp) + ",microbatches=4", model,
      mode);
  const auto& want = o.values.back();
  ASSERT_EQ(want.size(), 9u);  // the loss rows, then W1, W2 of each layer
  const size_t per = 2 * size_t(4 / pp);
  ASSERT_EQ(o.values.size(), size_t(pp * dp) + 1);
  for (size_t r = 0; r + 1 < o.values.size(); ++r) {
    const size_t stage = r % size_t(pp);
    ASSERT_EQ(o.values[r].size(), 1 + per) << "rank " << r;
    for (size_t k = 1; k <= per; ++k) {
      EXPECT_LT(relative_error(o.values[r][k], want[stage * per + k]), 1e-4)
          << "rank " << r << " weight " << k;
    }
    if (dp == 1 && stage + 1 == size_t(pp)) {
      EXPECT_LT(relative_error(o.values[r][0], want[0]), 1e-4) << "rank " << r << " loss";
    }
  }
}
TEST(Distributed, PipelineParallel2TrainingStepMatchesUnshardedUnderAot) {
  expect_pipeline_matches(2, 1, "aot");
}
TEST(Distributed, PipelineParallel2TrainingStepMatchesUnshardedUnderEager) {
  expect_pipeline_matches(2, 1, "eager");
}
TEST(Distributed, PipelineParallel2DataParallel2TrainingStepMatchesUnshardedUnderFused) {
  expect_pipeline_matches(2, 2, "fused");
}

// Tensor-parallel training (Megatron-LM's MLP split) composed with dp or pp: every rank's W1 is
// the unsharded step's updated W1's column block of d_ff / tp at its tp rank, its W2 the row
// block, and (dp = 1, the last stage) its loss rows are the unsharded step's.
void expect_tensor_parallel_training_matches(int64_t tp, int64_t pp, int64_t dp, const char* mode) {
  const int64_t d = 64, ff = 128, layers = 2, fc = ff / tp;
  const std::string model = "train:batch=64,d_model=64,d_ff=128,layers=2,lr=0.5,dtype=fp32";
  const Outcome o = run_both(model + ",tp=" + std::to_string(tp) + ",pp=" + std::to_string(pp) +
                                 ",dp=" + std::to_string(dp) + (pp > 1 ? ",microbatches=2" : ""),
                             model, mode);
  const auto& want = o.values.back();
  ASSERT_EQ(want.size(), size_t(1 + 2 * layers));  // the loss rows, then W1, W2 of each layer
  ASSERT_EQ(o.values.size(), size_t(tp * pp * dp) + 1);
  const size_t per = size_t(layers / pp);
  for (size_t r = 0; r + 1 < o.values.size(); ++r) {
    const int64_t t = int64_t(r) % tp, stage = int64_t(r) / tp % pp;
    ASSERT_EQ(o.values[r].size(), 1 + 2 * per) << "rank " << r;
    for (size_t l = 0; l < per; ++l) {
      const auto& w1 = want[1 + 2 * (size_t(stage) * per + l)];
      const auto& w2 = want[2 + 2 * (size_t(stage) * per + l)];
      ASSERT_EQ(o.values[r][1 + 2 * l].data.size(), size_t(d * fc)) << "rank " << r << " W1 " << l;
      ASSERT_EQ(o.values[r][2 + 2 * l].data.size(), size_t(fc * d)) << "rank " << r << " W2 " << l;
      compiler_stub::HostTensor b1 = o.values[r][1 + 2 * l], b2 = o.values[r][2 + 2 * l];
      for (int64_t i = 0; i < d; ++i)  // W1's columns [t fc, (t + 1) fc)
        for (int64_t j = 0; j < fc; ++j)
          b1.data[size_t(i * fc + j)] = w1.data[size_t(i * ff + t * fc + j)];
      for (int64_t i = 0; i < fc * d; ++i) b2.data[size_t(i)] = w2.data[size_t(t * fc * d + i)];
      EXPECT_LT(relative_error(o.values[r][1 + 2 * l], b1), 1e-4) << "rank " << r << " W1 " << l;
      EXPECT_LT(relative_error(o.values[r][2 + 2 * l], b2), 1e-4) << "rank " << r << " W2 " << l;
    }
    if (dp == 1 && stage + 1 == pp) {
      EXPECT_LT(relative_error(o.values[r][0], want[0]), 1e-4) << "rank " << r << " loss";
    }
  }
}
TEST(Distributed, TensorParallel2DataParallel2TrainingStepMatchesUnshardedUnderAot) {
  expect_tensor_parallel_training_matches(2, 1, 2, "aot");
}
TEST(Distributed, TensorParallel2PipelineParallel2TrainingStepMatchesUnshardedUnderFused) {
  expect_tensor_parallel_training_matches(2, 2, 1, "fused");
}
TEST(Distributed, TensorParallel4TrainingStepMatchesUnshardedUnderEager) {
  expect_tensor_parallel_training_matches(4, 1, 1, "eager");
}

// A forward pipeline composed with tensor parallel: 2 layers on 2 stages of TP=2, 4 sequences in
// 2 micro-batches; the last stage's ranks (2 and 3: tp fastest) output the unsharded rows.
TEST(Distributed, PipelineParallel2TransformerForwardMatchesUnsharded) {
  const std::string model =
      "transformer:layers=2,d_model=128,heads=4,d_ff=256,seq=32,batch=4,dtype=fp32";
  const Outcome o = run_both(model + ",tp=2,pp=2,microbatches=2", model, "fused");
  ASSERT_EQ(o.values.size(), 5u);
  const auto& want = o.values.back().at(0);
  for (size_t r = 2; r < 4; ++r) {
    EXPECT_LT(relative_error(o.values[r].at(0), want), 1e-3) << "rank " << r;
  }
}

// Rows [first, first + count) of a [rows, width] host tensor.
compiler_stub::HostTensor rows_of(const compiler_stub::HostTensor& t, size_t rows, size_t first,
                                  size_t count) {
  const size_t width = t.data.size() / rows;
  compiler_stub::HostTensor out = t;
  out.data.assign(t.data.begin() + long(first * width),
                  t.data.begin() + long((first + count) * width));
  return out;
}

// Decode on pipeline stages: 4 layers on 2 stages of TP=2 (ranks 2 and 3 the last stage), a
// prefill and two tokens, each step's hidden rows sent stage to stage; with batch=2 and
// microbatches=2 the two sequences flow through the stages one after the other. The last stage's
// output of every step matches the unsharded decode's.
void expect_decode_pipeline_matches(const std::string& extra, const char* mode) {
  const std::string model =
      "decode:layers=4,d_model=128,heads=4,d_ff=256,prompt=24,new_tokens=2,"
      "dtype=fp32" +
      extra;
  const Outcome o = run_both(model + ",tp=2,pp=2", model, mode, 3);
  ASSERT_EQ(o.values.size(), 5u);
  const auto& want = o.values.back();
  ASSERT_EQ(want.size(), 3u);
  for (size_t r = 2; r < 4; ++r) {
    ASSERT_EQ(o.values[r].size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_LT(relative_error(o.values[r][k], want[k]), 1e-3) << "rank " << r << " step " << k;
    }
  }
}
TEST(Distributed, PipelineParallel2DecodeMatchesUnshardedUnderAot) {
  expect_decode_pipeline_matches("", "aot");
}
TEST(Distributed, PipelineParallel2DecodeMatchesUnshardedUnderEager) {
  expect_decode_pipeline_matches("", "eager");
}
TEST(Distributed, PipelineParallel2DecodeOfTwoMicrobatchesMatchesUnshardedUnderFused) {
  expect_decode_pipeline_matches(",batch=2,microbatches=2", "fused");
}

// Decode data parallel: 4 sequences on 2 replicas (no collective), each replica's rows of every
// step the unsharded batch's rows of its two sequences (a prefill's 24 rows a sequence, then a
// row a sequence per token).
TEST(Distributed, DataParallel2DecodeMatchesUnshardedUnderFused) {
  const std::string model =
      "decode:layers=2,d_model=128,heads=4,d_ff=256,prompt=24,new_tokens=2,batch=4,dtype=fp32";
  const Outcome o = run_both(model + ",dp=2", model, "fused", 3);
  ASSERT_EQ(o.values.size(), 3u);
  const auto& want = o.values.back();
  ASSERT_EQ(want.size(), 3u);
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(o.values[r].size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      const size_t rows = k == 0 ? 24 : 1;
      EXPECT_LT(relative_error(o.values[r][k], rows_of(want[k], 4 * rows, 2 * r * rows, 2 * rows)),
                1e-3)
          << "replica " << r << " step " << k;
    }
  }
}

// Serving on 2 data-parallel replicas: requests 0, 2, 4 to replica 0 and 1, 3 to replica 1
// (round-robin by arrival), each replica its own scheduler and KV pool; every request's token
// values match the unsharded server's, and the whole run's report holds every request once.
TEST(Distributed, DataParallel2ServeMatchesUnshardedUnderAot) {
  const std::string model =
      "serve:requests=5,rate=20,layers=2,d_model=64,heads=4,d_ff=128,vocab=96,context=48,"
      "max_prompt=24,prompt_mean=10,output_mean=6,max_batch=4,block=4,dtype=fp32";
  const Outcome o = run_both(model + ",dp=2", model, "aot", 0);
  const auto& want = o.reports.back().at("per_request");
  ASSERT_EQ(want.size(), 5u);
  for (size_t r = 0; r < 2; ++r) {
    const auto& got = o.reports[r].at("per_request");
    ASSERT_EQ(got.size(), r == 0 ? 3u : 2u);
    for (const auto& q : got) {
      EXPECT_EQ(q.at("id").get<size_t>() % 2, r);
      expect_same_tokens(q, want, "replica " + std::to_string(r));
    }
  }
  const auto& whole = o.replicas;
  ASSERT_EQ(whole.at("per_request").size(), 5u);
  for (size_t q = 0; q < 5; ++q) {
    EXPECT_EQ(whole.at("per_request")[q].at("id").get<size_t>(), q);
    expect_same_tokens(whole.at("per_request")[q], want, "whole run");
  }
  ASSERT_EQ(whole.at("replicas").size(), 2u);
  EXPECT_EQ(whole.at("output_tokens").get<int64_t>(),
            o.reports[0].at("output_tokens").get<int64_t>() +
                o.reports[1].at("output_tokens").get<int64_t>());
}

// Serving on 2 pipeline stages of TP=2: each iteration's batch flows through the stages, stage
// 1 admitting what stage 0 had admitted before each round (requests arriving over time at
// `rate`, or every one at once at 0); the last stage's report (ranks 2 and 3) has every
// request's token values of the unsharded server.
void expect_serve_pipeline_matches(const std::string& scheduler, const char* mode,
                                   const std::string& rate) {
  const std::string model =
      "serve:requests=5,layers=2,d_model=64,heads=4,d_ff=128,vocab=96,context=48,max_prompt=24,"
      "prompt_mean=10,output_mean=6,max_batch=4,block=4,dtype=fp32,rate=" +
      rate + ",scheduler=" + scheduler;
  const Outcome o = run_both(model + ",tp=2,pp=2", model, mode, 0);
  ASSERT_EQ(o.reports.size(), 5u);
  const auto& want = o.reports.back().at("per_request");
  ASSERT_EQ(want.size(), 5u);
  for (size_t r = 2; r < 4; ++r) {
    const auto& got = o.reports[r].at("per_request");
    ASSERT_EQ(got.size(), want.size());
    for (size_t q = 0; q < want.size(); ++q) {
      expect_same_tokens(got[q], want,
                         "rank " + std::to_string(r) + " request " + std::to_string(q));
    }
  }
}
TEST(Distributed, PipelineParallel2ServeMatchesUnshardedContinuousUnderFused) {
  expect_serve_pipeline_matches("continuous", "fused", "20");
}
TEST(Distributed, PipelineParallel2ServeMatchesUnshardedStaticUnderAot) {
  expect_serve_pipeline_matches("static", "aot", "0");
}

// Two TP=4 transformers, each sharing a compile cache of its own, run together under `mode`:
// the first on chip 0 with its host threads created in rank order, the second on chip 1 in
// reverse rank order. Per run and rank: each record's (compiles, recompiles, hits, misses,
// wall), start-up first, then the number of cache entries the rank reports.
using RankFigures = std::vector<std::vector<int64_t>>;
std::pair<RankFigures, RankFigures> shared_compile_figures(const char* mode) {
  Config config = load_config(std::string(WALLSIM_SOURCE_DIR) + "/configs/trn2.json",
                              {"topology.torus_x=2", "topology.torus_y=1"});
  sim::init_systemc();
  sim::System system(config.chip, config.system, sim::CoreOptions{});
  const std::string spec = "transformer:layers=1,d_model=128,heads=4,d_ff=256,seq=64,tp=4";
  const ProcessGroup group(workloads::make_workload(workloads::parse_spec(spec))->parallel(), 2,
                           config.system.chip.cores, "test");
  const int64_t world = group.world();
  std::vector<std::unique_ptr<workloads::Workload>> workloads;
  std::vector<std::unique_ptr<Session>> sessions;  // run 0's ranks, then run 1's
  for (int chip = 0; chip < 2; ++chip) {
    auto shared = std::make_shared<SharedPlans>();
    for (int64_t r = 0; r < world; ++r) {
      SessionOptions so;
      so.mode = &mode_named(mode);
      so.name_prefix = "c" + std::to_string(chip) + "r" + std::to_string(r) + "_";
      so.rank = group.context(r);  // every rank of the group is on chip 0: moved to `chip`
      so.rank.chip = chip;
      for (auto& [name, members] : so.rank.comms) {
        for (auto& m : members) m.first = chip;
      }
      so.collectives = system.collectives();
      so.shared_plans = shared;
      workloads.push_back(workloads::make_workload(workloads::parse_spec(spec)));
      sessions.push_back(
          std::make_unique<Session>(config, system.core(size_t(chip), size_t(so.rank.core)), so));
    }
  }
  std::vector<HostRank> hosts;
  std::vector<int64_t> order;
  for (int64_t r = 0; r < world; ++r) order.push_back(r);
  for (int64_t r = world - 1; r >= 0; --r) order.push_back(world + r);
  for (int64_t k : order) {
    Session& s = *sessions[size_t(k)];
    workloads::Workload& w = *workloads[size_t(k)];
    hosts.push_back({&s.device_core(), [&s, &w] {
                       w.setup(s);
                       s.startup(w.buckets(s), [&](int64_t b) { w.trace(s, b); });
                       for (int64_t i = 0; i < 2; ++i) {
                         s.begin_step(i);
                         s.to_host(w.step(s, i));
                         s.end_step();
                       }
                     }});
  }
  run_hosts(hosts);
  std::pair<RankFigures, RankFigures> out;
  for (size_t k = 0; k < sessions.size(); ++k) {
    const Session& s = *sessions[k];
    std::vector<int64_t> f;
    std::vector<StepRecord> records = {s.startup_record()};
    records.insert(records.end(), s.steps().begin(), s.steps().end());
    for (const StepRecord& rec : records) {
      f.insert(f.end(), {rec.counts.compiles, rec.counts.recompiles, rec.counts.cache_hits,
                         rec.counts.cache_misses, rec.wall_ns});
    }
    f.push_back(static_cast<int64_t>(s.cache_entries().size()));
    (int64_t(k) < world ? out.first : out.second).push_back(f);
  }
  return out;
}

// Every rank requests each signature at the same instant: rank 0 is charged every compile,
// whichever order SystemC runs the host threads in, and no figure depends on that order.
void expect_rank0_compiles(const char* mode) {
  const auto [forward, reverse] = shared_compile_figures(mode);
  EXPECT_EQ(forward, reverse);
  for (const RankFigures& figures : {forward, reverse}) {
    ASSERT_EQ(figures.size(), 4u);
    EXPECT_GT(figures[0].back(), 0) << "rank 0's cache entries";
    int64_t compiles0 = 0, hits0 = 0;
    for (size_t k = 0; k + 1 < figures[0].size(); k += 5) {
      compiles0 += figures[0][k];
      hits0 += figures[0][k + 2];
    }
    EXPECT_GT(compiles0, 0);
    for (size_t r = 1; r < figures.size(); ++r) {
      int64_t compiles = 0, hits = 0;
      for (size_t k = 0; k + 1 < figures[r].size(); k += 5) {
        compiles += figures[r][k];
        hits += figures[r][k + 2];
      }
      EXPECT_EQ(compiles, 0) << "rank " << r;
      EXPECT_EQ(hits, hits0 + compiles0) << "rank " << r;
      EXPECT_EQ(figures[r].back(), 0) << "rank " << r << "'s cache entries";
    }
  }
}
TEST(Distributed, SharedCompileIsChargedToTheLowestSimultaneousRankUnderFused) {
  expect_rank0_compiles("fused");
}
TEST(Distributed, SharedCompileIsChargedToTheLowestSimultaneousRankUnderAot) {
  expect_rank0_compiles("aot");
}

}  // namespace
}  // namespace wallsim::runtime
