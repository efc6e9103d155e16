// Config loading: every error kind names its JSON path; overrides; dump/schema/key table agree.
#include "wallsim/runtime/config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace wallsim::runtime {
namespace {

using base::Json;

std::string source(const std::string& rel) { return std::string(WALLSIM_SOURCE_DIR) + "/" + rel; }

// The error message for `text` as a config, or "" when it loads.
std::string error_of(const std::string& text) {
  try {
    config_from_json(Json::parse(text));
    return "";
  } catch (const base::InputError& e) {
    return e.what();
  }
}

TEST(Config, ShippedConfigsLoad) {
  for (const char* name : {"trn1", "trn2", "tiny"}) {
    Config c = load_config(source("configs/") + name + ".json");
    EXPECT_EQ(c.chip.name, name);
  }
}

TEST(Config, EmptyDocumentGivesTheDefaults) {
  Config c = config_from_json(Json::object());
  EXPECT_EQ(c.chip.arch.sbuf.partitions, 128);
  // The chip's figures are derived from the one core's: one core of trn2.
  Config d;
  sim::resolve(d.system, d.chip, true, true);
  EXPECT_EQ(to_json(c), to_json(d));
  EXPECT_EQ(c.system.chip.hbm_bandwidth_gb_per_s, c.chip.timing.hbm.bandwidth_gb_per_s);
}

TEST(Config, PerCoreHbmIsDerivedFromTheChip) {
  Config c = load_config(source("configs/trn2.json"));
  EXPECT_EQ(c.system.chip.cores, 8);
  EXPECT_EQ(c.chip.timing.hbm.bandwidth_gb_per_s, 2900.0 / 8);
  EXPECT_EQ(c.chip.arch.hbm.bytes, c.system.chip.hbm_bytes / 8);
  EXPECT_EQ(c.system.chips(), 16);
  // A share given explicitly (a sweep of the one-core view) is kept.
  Config s = load_config(source("configs/trn2.json"), {"timing.hbm.bandwidth_gb_per_s=100"});
  EXPECT_EQ(s.chip.timing.hbm.bandwidth_gb_per_s, 100.0);
  EXPECT_EQ(s.system.chip.hbm_bandwidth_gb_per_s, 2900.0);
  EXPECT_THROW(load_config(source("configs/trn2.json"), {"chip.cores=100000"}), base::InputError);
}

TEST(Config, WrongTypeNamesPathAndExpectation) {
  EXPECT_EQ(error_of(R"({"arch": {"sbuf": {"partitions": "128x"}}})"),
            "arch.sbuf.partitions: expected an integer in [1, 1024], got \"128x\"");
  EXPECT_EQ(error_of(R"({"arch": {"sbuf": {"partitions": 128.0}}})"),
            "arch.sbuf.partitions: expected an integer in [1, 1024], got 128.0");
  EXPECT_EQ(error_of(R"({"timing": {"launch": {"wait_for_previous": 1}}})"),
            "timing.launch.wait_for_previous: expected true or false, got 1");
  EXPECT_EQ(error_of(R"({"name": 3})"), "name: expected a string, got 3");
  EXPECT_EQ(error_of(R"({"arch": {"sbuf": 5}})"), "arch.sbuf: expected an object, got 5");
  EXPECT_EQ(error_of(R"([1])"), "(root): expected an object");
}

TEST(Config, OutOfRange) {
  EXPECT_EQ(error_of(R"({"arch": {"sbuf": {"partitions": 0}}})"),
            "arch.sbuf.partitions: expected an integer in [1, 1024], got 0");
  EXPECT_EQ(error_of(R"({"timing": {"tensor": {"freq_mhz": -5}}})"),
            "timing.tensor.freq_mhz: expected a number in [1, 100000], got -5");
  EXPECT_NE(error_of(R"({"runtime": {"seed": 18446744073709551615}})"), "");
}

TEST(Config, UnknownKeysAreRejectedWithAHint) {
  EXPECT_EQ(error_of(R"({"arch": {"sbuf": {"partitons": 128}}})"),
            "arch.sbuf.partitons: unknown key (did you mean \"partitions\"?)");
  EXPECT_EQ(error_of(R"({"timing": {"warp_drive": 1}})"), "timing.warp_drive: unknown key");
}

TEST(Config, UnderscoreKeysAreComments) {
  EXPECT_EQ(error_of(R"({"_source": "x", "arch": {"_note": [1, 2], "sbuf": {"_why": {}}}})"), "");
}

TEST(Config, EnumSets) {
  EXPECT_EQ(error_of(R"({"arch": {"access": {"vector": {"reads": ["sbuf", "dram"]}}}})"),
            "arch.access.vector.reads: expected a list of distinct values from hbm, sbuf, psum, "
            "host, got [\"sbuf\",\"dram\"]");
  EXPECT_NE(error_of(R"({"arch": {"access": {"vector": {"reads": ["sbuf", "sbuf"]}}}})"), "");
  Config c =
      config_from_json(Json::parse(R"({"arch": {"access": {"vector": {"reads": ["sbuf"]}}}})"));
  EXPECT_FALSE(c.chip.arch.may_read(isa::Engine::vector, isa::MemSpace::psum));
}

TEST(Config, InconsistentCombinations) {
  EXPECT_EQ(error_of(R"({"arch": {"tensor": {"rows": 256}}})"),
            "arch.tensor.rows: array rows (256) exceed SBUF partitions (128)");
  EXPECT_EQ(error_of(R"({"arch": {"psum": {"bank_bytes": 32768}}})"),
            "arch.psum.bank_bytes: a bank (32768 bytes) is larger than PSUM (16384 bytes per "
            "partition)");
  EXPECT_NE(error_of(R"({"arch": {"psum": {"bank_bytes": 3000}}})"), "");         // not whole banks
  EXPECT_NE(error_of(R"({"arch": {"tensor": {"moving_free_max": 1024}}})"), "");  // > one bank
  EXPECT_NE(error_of(R"({"arch": {"tensor": {"cols": 256}, "psum": {"partitions": 128}}})"), "");
  EXPECT_NE(error_of(R"({"arch": {"partition_alignment": 48}})"), "");
  EXPECT_EQ(error_of(R"({"arch": {"access": {"dma": {"reads": ["psum"]}}}})"),
            "arch.access.dma: DMA engines cannot access PSUM");
}

TEST(Config, HardwareDmaTransposeNeedsItsTimingAndFeedsTheCompilersCostHints) {
  EXPECT_EQ(error_of(R"({"arch": {"dma": {"hardware_transpose": true}},
                         "timing": {"dma": {"transpose_chunk_bytes": 0}}})"),
            "arch.dma.hardware_transpose: is true but timing.dma.transpose_chunk_bytes is 0: a "
            "hardware DMA transpose needs its chunk size");
  // One fact in two keys: the one left out follows the one given; both given must agree.
  EXPECT_EQ(error_of(R"({"arch": {"dma": {"hardware_transpose": false}},
                         "timing": {"dma": {"transpose_chunk_bytes": 256}}})"),
            "arch.dma.hardware_transpose: is false but timing.dma.transpose_chunk_bytes is 256: "
            "both say whether the DMA engines transpose in hardware; set one of them, or both "
            "alike");
  const Config chunked =
      config_from_json(Json::parse(R"({"timing": {"dma": {"transpose_chunk_bytes": 128}}})"));
  EXPECT_TRUE(chunked.chip.arch.dma.hardware_transpose);
  const Config plain = config_from_json(Json::parse("{}"));
  EXPECT_FALSE(plain.chip.arch.dma.hardware_transpose);
  EXPECT_EQ(plain.chip.timing.dma.transpose_chunk_bytes, 0);
  EXPECT_EQ(error_of(R"({"arch": {"dma": {"hardware_transpose": "yes"}}})"),
            "arch.dma.hardware_transpose: expected true or false, got \"yes\"");
  EXPECT_TRUE(load_config(source("configs/trn2.json")).chip.arch.dma.hardware_transpose);
  EXPECT_FALSE(load_config(source("configs/trn1.json")).chip.arch.dma.hardware_transpose);
  const Config tiny = load_config(source("configs/tiny.json"));
  EXPECT_FALSE(tiny.chip.arch.dma.hardware_transpose);
  // The speeds the compiler's transpose choice uses come from the timing section.
  EXPECT_EQ(tiny.chip.arch.costs.tensor_freq_mhz, 1000.0);
  EXPECT_EQ(tiny.chip.arch.costs.moving_min_cycles, 16);
  EXPECT_EQ(tiny.chip.arch.costs.dma_gb_per_s, 20.0);
  EXPECT_EQ(tiny.chip.arch.costs.dma_transpose_chunk_bytes, 0);
  EXPECT_EQ(tiny.chip.arch.costs.vector_fixed_ns, 40);  // 20 cycles at 500 MHz
  // ... and so do the matmul cost model's fp32 passes, HBM and latencies (no silent defaults).
  EXPECT_EQ(tiny.chip.arch.costs.tensor_fp32_passes, 4);
  EXPECT_EQ(tiny.chip.arch.costs.tensor_latency_cycles, 64);
  EXPECT_EQ(tiny.chip.arch.costs.lane_access_ns, 20);  // 10 cycles at 500 MHz
  EXPECT_EQ(tiny.chip.arch.costs.hbm_gb_per_s, tiny.chip.timing.hbm.bandwidth_gb_per_s);
  EXPECT_EQ(tiny.chip.arch.costs.hbm_latency_ns, 200);
  EXPECT_EQ(tiny.chip.arch.costs.dma_issue_ns, 100);
  EXPECT_EQ(tiny.chip.arch.costs.launch_ns, 550);
  const Config trn1 = load_config(source("configs/trn1.json"));
  EXPECT_EQ(trn1.chip.arch.costs.dma_gb_per_s, trn1.chip.timing.dma.bandwidth_gb_per_s);
  EXPECT_EQ(trn1.chip.arch.costs.hbm_gb_per_s, trn1.chip.timing.hbm.bandwidth_gb_per_s);
  // A default ArchSpec knows no chip's speeds (the compiler refuses it); a default ChipConfig
  // derives its own from its default timing, as a loaded config does.
  EXPECT_FALSE(isa::CostHints{}.priced());
  EXPECT_EQ(isa::CostHints{}.hbm_gb_per_s, 0.0);
  EXPECT_EQ(isa::CostHints{}.fp32_passes(), 1);
  const sim::ChipConfig chip;
  EXPECT_TRUE(chip.arch.costs.priced());
  EXPECT_EQ(chip.arch.costs.dma_gb_per_s, chip.timing.dma.bandwidth_gb_per_s);
  EXPECT_EQ(chip.arch.costs.tensor_freq_mhz, chip.timing.tensor.freq_mhz);
}

TEST(Config, OverridesParseJsonElseString) {
  Json j = Json::object();
  base::apply_override(j, "arch.sbuf.partitions=64");
  base::apply_override(j, "arch.tensor.rows=64");
  base::apply_override(j, "name=my chip");
  base::apply_override(j, "arch.access.vector.reads=[\"sbuf\"]");
  EXPECT_EQ(j["arch"]["sbuf"]["partitions"], 64);
  EXPECT_EQ(j["name"], "my chip");
  Config c = config_from_json(j);
  EXPECT_EQ(c.chip.arch.sbuf.partitions, 64);
  // "128x" is not JSON, so it stays a string and the loader rejects it with its path.
  base::apply_override(j, "arch.sbuf.partitions=128x");
  EXPECT_THROW(config_from_json(j), base::InputError);
  EXPECT_THROW(base::apply_override(j, "no_equals_sign"), base::InputError);
  EXPECT_THROW(base::apply_override(j, "name.inner=1"), base::InputError);  // name is a string
  EXPECT_THROW(base::apply_override(j, "arch..x=1"), base::InputError);
}

TEST(Config, LoadConfigAppliesOverridesInOrder) {
  Config c = load_config(source("configs/trn2.json"),
                         {"timing.tensor.freq_mhz=1000", "timing.tensor.freq_mhz=1500"});
  EXPECT_EQ(c.chip.timing.tensor.freq_mhz, 1500.0);
}

TEST(Config, FileErrors) {
  EXPECT_THROW(load_config("/nonexistent.json"), base::InputError);
  std::string path = ::testing::TempDir() + "/broken_config.json";
  std::ofstream(path) << "{\"arch\": {";
  try {
    load_config(path);
    FAIL();
  } catch (const base::InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": invalid JSON: parse error at line 1", 0), 0u)
        << e.what();
  }
}

TEST(Config, DumpReloadsToTheSameConfig) {
  Config c = load_config(source("configs/tiny.json"));
  Json dumped = to_json(c);
  EXPECT_EQ(to_json(config_from_json(dumped)), dumped);
  EXPECT_EQ(dumped["arch"]["tensor"]["moving_free_max"], 96);
}

TEST(Config, SchemaAndKeyTableCoverTheSameKeys) {
  Json schema = config_schema();
  auto rows = config_keys();
  ASSERT_GT(rows.size(), 40u);
  for (const auto& r : rows) {
    const Json* node = &schema;
    std::stringstream ss(r.path);
    std::string part;
    while (std::getline(ss, part, '.')) {
      ASSERT_TRUE((*node)["properties"].contains(part)) << r.path;
      node = &(*node)["properties"][part];
    }
    EXPECT_TRUE(node->contains("default")) << r.path;
    EXPECT_FALSE(r.doc.empty()) << r.path;
  }
  EXPECT_EQ(schema["additionalProperties"], false);
}

TEST(Config, ReadmeDocumentsEveryKey) {
  std::ifstream in(source("configs/README.md"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string readme = ss.str();
  ASSERT_FALSE(readme.empty());
  for (const auto& r : config_keys()) {
    EXPECT_NE(readme.find("`" + r.path + "`"), std::string::npos) << r.path << " is undocumented";
  }
}

}  // namespace
}  // namespace wallsim::runtime
