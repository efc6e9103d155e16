// Workload specs: parsing, defaults, and one-line errors for unknown or impossible parameters.
#include <gtest/gtest.h>

#include "wallsim/workloads/workload.h"

namespace wallsim::workloads {
namespace {

std::string error_of(const std::string& text) {
  try {
    make_workload(parse_spec(text));
  } catch (const base::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(WorkloadSpec, ParsesNameAndParameters) {
  WorkloadSpec s = parse_spec("mlp:batch=64,d_ff=256");
  EXPECT_EQ(s.name, "mlp");
  EXPECT_EQ(s.params.at("batch"), "64");
  EXPECT_EQ(s.params.at("d_ff"), "256");
  EXPECT_TRUE(parse_spec("gemm").params.empty());
}

TEST(WorkloadSpec, DefaultsAreFilledIn) {
  auto w = make_workload(parse_spec("transformer:seq=128"));
  EXPECT_EQ(w->params().at("seq"), "128");
  EXPECT_EQ(w->params().at("d_model"), "768");
  EXPECT_EQ(w->params().at("heads"), "12");
}

TEST(WorkloadSpec, BadParametersAreOneLineErrors) {
  EXPECT_EQ(error_of("mlp:batsh=4"),
            "--workload mlp:batsh=4: unknown parameter 'batsh' of mlp (known: batch, d_ff, "
            "d_model, dtype, layers)");
  EXPECT_EQ(error_of("gemm:m=0"), "--workload gemm:m=0: gemm.m: 0 is outside [1, 1048576]");
  EXPECT_EQ(error_of("gemm:m=x"), "--workload gemm:m=x: gemm.m: expected an integer, got 'x'");
  EXPECT_EQ(error_of("transformer:d_model=100,heads=12"),
            "--workload transformer:d_model=100,heads=12: transformer.heads: d_model 100 is not a "
            "multiple of heads 12");
  EXPECT_EQ(
      error_of("resnet"),
      "--workload resnet: unknown workload 'resnet' (known: gemm, mlp, transformer, train, decode, "
      "serve, mask, graph, program)");
  EXPECT_EQ(error_of("mlp:batch"), "--workload mlp:batch: 'batch' is not key=value");
  EXPECT_EQ(error_of("transformer:style=bert"),
            "--workload transformer:style=bert: transformer.style: expected one of gpt2, llama, "
            "got 'bert'");
  EXPECT_EQ(error_of("gemm:dtype=int8"),
            "--workload gemm:dtype=int8: gemm.dtype: expected bf16, fp16 or fp32, got 'int8'");
}

}  // namespace
}  // namespace wallsim::workloads
