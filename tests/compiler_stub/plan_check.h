// Helpers for printed-plan tests (MLIR FileCheck style): compile a graph, verify every plan,
// print it with the disassembler, and check its lines in order or summarise them per stream.
// Pure compiler_stub + isa: no SystemC kernel.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../support/chip_arch.h"
#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/validate.h"
#include "wallsim/isa/disasm.h"
#include "wallsim/isa/verifier.h"

namespace wallsim::compiler_stub::test {

struct PrintedPlan {
  CompiledGraph compiled;
  std::string text;  // isa::disassemble of the whole sequence
  const isa::Plan& plan(size_t i = 0) const { return compiled.plans.plans.at(i); }
  const LowerStats& stats(size_t i = 0) const { return compiled.groups.at(i); }
};

// Options that keep the order the lowering emits in (no list schedule across ops,
// schedule.h): for tests of an op's emission order.
inline LoweringOptions emission_order(LoweringOptions o = {}) {
  o.schedule_across_ops = 0;
  return o;
}

// Compiles `g` (types inferred here), asserts success and that every plan passes the verifier.
inline PrintedPlan print_plan(Graph g, const isa::ArchSpec& arch = wallsim::test::trn2_arch(),
                              GroupPolicy policy = GroupPolicy::whole,
                              const LoweringOptions& options = {}) {
  infer_types(g);
  PrintedPlan out;
  auto r = compile_graph(g, arch, policy, {}, options);
  if (auto* err = std::get_if<CompileError>(&r)) {
    ADD_FAILURE() << "compile failed: " << err->message();
    return out;
  }
  out.compiled = std::get<CompiledGraph>(std::move(r));
  const auto diags = isa::verify(out.compiled.plans, arch);
  for (const auto& d : diags) ADD_FAILURE() << "verifier: " << d.to_string();
  out.text = isa::disassemble(out.compiled.plans);
  return out;
}

// The error a compile of `g` returns, or "compiled".
inline std::string compile_error(Graph g, const isa::ArchSpec& arch = wallsim::test::trn2_arch(),
                                 const LoweringOptions& options = {}) {
  infer_types(g);
  auto r = compile_graph(g, arch, GroupPolicy::whole, {}, options);
  if (auto* err = std::get_if<CompileError>(&r)) return err->message();
  return "compiled";
}

// FileCheck in miniature: each check is a substring that must occur after the previous match;
// "NOT: text" means `text` must not occur between the previous match and the next (or the end).
inline ::testing::AssertionResult check_in_order(const std::string& text,
                                                 const std::vector<std::string>& checks) {
  size_t at = 0;
  std::vector<std::string> nots;
  auto check_nots = [&](size_t end) -> std::string {
    for (const std::string& n : nots) {
      const size_t hit = text.find(n, at);
      if (hit != std::string::npos && hit < end) return n;
    }
    nots.clear();
    return {};
  };
  for (const std::string& c : checks) {
    if (c.rfind("NOT: ", 0) == 0) {
      nots.push_back(c.substr(5));
      continue;
    }
    const size_t hit = text.find(c, at);
    if (hit == std::string::npos) {
      return ::testing::AssertionFailure()
             << "not found after offset " << at << ": '" << c << "'\n--- plan ---\n"
             << text;
    }
    if (std::string bad = check_nots(hit); !bad.empty()) {
      return ::testing::AssertionFailure() << "'" << bad << "' before '" << c << "'\n" << text;
    }
    at = hit + c.size();
  }
  if (std::string bad = check_nots(std::string::npos); !bad.empty()) {
    return ::testing::AssertionFailure() << "'" << bad << "' after the last check\n" << text;
  }
  return ::testing::AssertionSuccess();
}

// Instruction lines per stream and mnemonic, one "stream: mnemonic xN" line each, streams in
// the order the disassembly lists them: "ld0: dma_copy x2\nscalar: activation.relu x2\n".
inline std::string stream_summary(const std::string& text) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::pair<std::string, int>>> counts;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("  ", 0) != 0) continue;
    const size_t bracket = line.find('[');
    if (bracket == std::string::npos || bracket < 3 || line[2] == ' ') continue;
    const std::string stream = line.substr(2, bracket - 2);
    if (stream.find(' ') != std::string::npos) continue;  // a header line
    std::istringstream fields(line.substr(line.find(']') + 1));
    std::string mnemonic;
    fields >> mnemonic;
    if (!counts.count(stream)) order.push_back(stream);
    auto& list = counts[stream];
    if (list.empty() || list.back().first != mnemonic) {
      list.push_back({mnemonic, 1});
    } else {
      ++list.back().second;
    }
  }
  std::string out;
  for (const std::string& s : order) {
    for (const auto& [m, n] : counts[s]) out += s + ": " + m + " x" + std::to_string(n) + "\n";
  }
  return out;
}

// Occurrences of `needle` in `text`.
inline int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace wallsim::compiler_stub::test
