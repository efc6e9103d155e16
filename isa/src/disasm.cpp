// The disassembler.
#include "wallsim/isa/disasm.h"

#include <sstream>

namespace wallsim::isa {
namespace {

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

std::string format_access(const AccessPattern& ap, const Plan& plan) {
  std::ostringstream os;
  os << plan.target_name(ap) << '<' << name_of(ap.dtype) << ">[";
  if (is_on_chip(ap.space)) {
    os << 'p' << ap.partition_start << ':' << int64_t{ap.partition_start} + ap.partitions;
  } else {
    os << 'r' << ap.partitions << '*' << ap.partition_stride;
  }
  os << "][+" << ap.offset;
  if (ap.scalar >= 0 && ap.scalar < static_cast<int>(plan.scalars.size())) {
    os << '+' << plan.scalars[ap.scalar].name << '*' << ap.scalar_stride;
  }
  for (int d = 0; d < ap.num_free; ++d) {
    os << (d ? ", " : "; ") << ap.free[d].size << '*' << ap.free[d].stride;
  }
  os << ']';
  return os.str();
}

std::string disassemble(const Instruction& in, const Plan& plan) {
  const OpcodeInfo& oi = info(in.op);
  std::ostringstream os;
  os << oi.name;
  if (in.uses(F_Alu)) os << '.' << name_of(in.alu);
  if (in.uses(F_Act)) os << '.' << name_of(in.act);
  if (in.uses(F_Dst)) os << " dst=" << format_access(in.dst, plan);
  for (int k = 0; k < 3; ++k) {
    if (in.uses(static_cast<OpField>(F_Src0 << k))) {
      os << ' ' << oi.src_roles[k] << '=' << format_access(in.src[k], plan);
    }
  }
  if (in.uses(F_Accum)) os << " accum=" << format_access(in.accum, plan);
  if (in.uses(F_Act) && (in.scale != 1.0 || in.bias != 0.0)) {
    os << " scale=" << num(in.scale) << " bias=" << num(in.bias);
  }
  if (in.uses(F_Scalar)) {
    os << " scalar=";
    if (in.scalar.scalar >= 0 && in.scalar.scalar < static_cast<int>(plan.scalars.size())) {
      os << '$' << plan.scalars[in.scalar.scalar].name;
    } else {
      os << num(in.scalar.imm);
    }
  }
  if (in.uses(F_Reverse) && in.reverse) os << " reverse";
  if (in.uses(F_Value) || in.uses(F_Iota)) os << " value=" << num(in.value);
  if (in.uses(F_Iota))
    os << " partition_step=" << num(in.partition_step) << " step=" << num(in.step);
  if (in.uses(F_MatmulFlags)) {
    if (in.start) os << " start";
    if (in.stop) os << " stop";
  }
  if (in.uses(F_Comm)) {
    os << " comm="
       << (in.comm >= 0 && in.comm < static_cast<int>(plan.comms.size()) ? plan.comms[in.comm].name
                                                                         : "?");
  }
  if (in.uses(F_Peer)) os << " peer=" << in.peer;
  auto sem = [&](int32_t s) -> std::string {
    return s >= 0 && s < static_cast<int>(plan.semaphores.size()) ? plan.semaphores[s] : "?";
  };
  for (const SemWait& w : in.waits) os << " wait(" << sem(w.sem) << ">=" << w.value << ')';
  for (const SemSignal& g : in.signals) os << " signal(" << sem(g.sem) << "+=" << g.add << ')';
  if (in.node >= 0) os << " @node " << in.node;
  return os.str();
}

std::string disassemble(const PlanSequence& seq) {
  std::ostringstream os;
  for (size_t i = 0; i < seq.plans.size(); ++i) {
    const Plan& p = seq.plans[i];
    os << "plan " << i << " '" << p.name << "': " << p.instruction_count() << " instructions in "
       << p.streams.size() << " streams\n";
    for (const ScalarDecl& s : p.scalars) {
      os << "  scalar    $" << s.name << " in [" << s.min << ", " << s.max << "]\n";
    }
    for (const CommDecl& c : p.comms)
      os << "  comm      " << c.name << " of " << c.size << " ranks\n";
    if (!p.semaphores.empty()) {
      os << "  semaphores";
      for (const auto& s : p.semaphores) os << ' ' << s;
      os << '\n';
    }
    for (const TensorDecl& t : p.tensors) {
      os << "  tensor    " << t.name << ' ' << name_of(t.role) << ' ' << name_of(t.space) << ' '
         << name_of(t.dtype) << '[';
      for (size_t d = 0; d < t.shape.size(); ++d) os << (d ? "," : "") << t.shape[d];
      os << "]\n";
    }
    for (const BufferDecl& b : p.buffers) {
      os << "  buffer    " << b.name << ' ' << name_of(b.space) << " p" << b.partition_start << ':'
         << int64_t{b.partition_start} + b.partitions << " bytes " << b.offset_bytes << ':'
         << b.offset_bytes + b.bytes << '\n';
    }
    for (const NodeInfo& n : p.nodes) {
      os << "  node      " << n.id << ' ' << n.name << " (" << n.op << ")\n";
    }
    for (const Stream& s : p.streams) {
      for (size_t k = 0; k < s.instructions.size(); ++k) {
        std::string label = s.name + "[" + std::to_string(k) + "]";
        if (label.size() < 12) label.resize(12, ' ');
        os << "  " << label << ' ' << disassemble(s.instructions[k], p) << '\n';
      }
    }
  }
  return os.str();
}

}  // namespace wallsim::isa
