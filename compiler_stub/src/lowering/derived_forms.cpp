// Derived forms: buffers one op builds from a value on chip and later ops reuse while the
// value lives. A decode step's layernorm output is read by the q, k and v projections, each of
// which transposed the same row into the same A^T stationaries through the array (six
// transposes and evacuations a projection, on the token's dependent chain); the first now
// builds them and the other two read them.
#include <algorithm>

#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

std::optional<Slot> LoweringContext::derived_form(int32_t id, const FormKey& key) {
  auto it = m_forms.find({id, key});
  if (it == m_forms.end()) return std::nullopt;
  it->second.user = current_node();
  return it->second.slot;
}

void LoweringContext::keep_derived_form(int32_t id, const FormKey& key, Slot s) {
  Kept& k = m_forms[{id, key}];
  if (k.slot.valid() && k.slot.index != s.index) release(k.slot);  // rebuilt: the old one goes
  k = {s, current_node()};
}

bool LoweringContext::matmul_reads_a_later(int32_t id) const {
  auto it = m_uses.find(id);
  if (it == m_uses.end()) return false;
  for (auto p = std::upper_bound(it->second.begin(), it->second.end(), position());
       p != it->second.end(); ++p) {
    const Node& n = node(m_order[static_cast<size_t>(*p)]);
    if (n.op == OpKind::matmul && !n.inputs.empty() && n.inputs[0] == id) return true;
  }
  return false;
}

bool LoweringContext::drop_derived_forms() { return drop_unasked(m_forms); }

}  // namespace wallsim::compiler_stub::lowering
