// Horizontal fusion of sink kernels: the elementwise kernels of a schedule whose outputs no later
// step reads are launched together, as one segmented kernel (FusedKernel::segments) placed
// where the last of them was. The motivating case is an optimizer step: each parameter's update
// (moments and parameter, fused by grouping) is a kernel of its own shape, and a model's dozen
// parameters were a dozen launches at the end of every training step; now they are one, as
// PyTorch's fused and foreach optimizers do by hand.
//
// Moving a sink later is always safe: what it reads was computed before its old position and
// nothing reads what it writes. Only kernels that write whole buffers of their own move (an
// output written into a slice of a concat shares its buffer with other steps, one of which
// allocates it). buffer_reuse.cpp runs after this pass and lets an output take over an input's
// buffer only where no other segment of its kernel reads that input.
#include "engine/planner_impl.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::detail {

int64_t segment_param_fields(const FusedKernel& k) {
  const int64_t rank = k.shape.size();
  int64_t f = 2 + rank + (rank + 1) * int64_t(k.inputs.size() + k.outputs.size());
  for (const TapeInst& t : k.tape) // a value, or a seed and counter, or a start and step
    f += t.op == OpCode::constant || t.op == OpCode::iota || t.op == OpCode::rand_uniform ||
                 t.op == OpCode::rand_normal
             ? 2
             : 0;
  return f;
}

namespace {

// Whether step i may move: an elementwise kernel whose outputs are whole buffers it allocates,
// read by no later step.
bool movable_sink(const Schedule& s, int i, const std::vector<int>& last_read,
                  const std::vector<int>& writers) {
  const KernelStep* ks = s.steps[i].kernel();
  if (!ks) return false;
  const FusedKernel& k = ks->kernel;
  if (k.kind != FusedKernel::Kind::elementwise || !k.dots.empty() || k.segmented() ||
      k.shape.numel() == 0)
    return false;
  const std::vector<int>& writes = s.steps[i].writes;
  for (const KernelOutput& o : k.outputs)
    if (last_read[o.slot] > i || writers[o.slot] != 1 ||
        std::find(writes.begin(), writes.end(), o.slot) == writes.end())
      return false;
  return true;
}

// Steps `members` (ascending) as one segmented kernel step.
Step merge_steps(const Schedule& s, const std::vector<int>& members) {
  Step m;
  m.device = s.steps[members[0]].device;
  FusedKernel& k = m.work.emplace<KernelStep>().kernel;
  for (int i : members) {
    const Step& st = s.steps[i];
    k.append_segment(st.kernel()->kernel);
    m.writes.insert(m.writes.end(), st.writes.begin(), st.writes.end());
    m.realizes.insert(m.realizes.end(), st.realizes.begin(), st.realizes.end());
    m.notes.insert(m.notes.end(), st.notes.begin(), st.notes.end());
    m.fused.insert(m.fused.end(), st.fused.begin(), st.fused.end());
  }
  m.name = fmt::format("{} segments", members.size());
  return m;
}

// The sinks of one device, cut into runs that fit one kernel's parameters, and whose outputs
// together stay small enough for the step to run in a CUDA graph (kBatchStepBytes) when each
// of them would have.
std::vector<std::vector<int>> launch_sets(const Schedule& s, const std::vector<int>& sinks) {
  std::vector<std::vector<int>> sets(1);
  int64_t fields = 0;
  size_t bytes = 0;
  for (int i : sinks) {
    const int64_t f = segment_param_fields(s.steps[i].kernel()->kernel);
    const size_t b = written_bytes(s, s.steps[i]);
    if (!sets.back().empty() &&
        (fields + f > kMaxParamFields || sets.back().size() == kMaxKernelSegments ||
         (bytes + b > kBatchStepBytes && b <= kBatchStepBytes))) {
      sets.emplace_back();
      fields = 0, bytes = 0;
    }
    sets.back().push_back(i);
    fields += f, bytes += b;
  }
  return sets;
}

} // namespace

void fuse_sink_kernels(Schedule& s) {
  const int n = static_cast<int>(s.steps.size());
  std::vector<int> last_read(s.slots.size(), -1), writers(s.slots.size(), 0);
  for (int i = 0; i < n; ++i) {
    for_each_read(s.steps[i], [&](int slot) { last_read[slot] = i; });
    if (const KernelStep* ks = s.steps[i].kernel())
      for (const KernelOutput& o : ks->kernel.outputs) writers[o.slot]++;
  }
  std::vector<std::pair<Device, std::vector<int>>> by_device;
  for (int i = 0; i < n; ++i) {
    if (!movable_sink(s, i, last_read, writers)) continue;
    auto it = std::find_if(by_device.begin(), by_device.end(),
                           [&](const auto& d) { return d.first == s.steps[i].device; });
    if (it == by_device.end()) it = by_device.insert(by_device.end(), {s.steps[i].device, {}});
    it->second.push_back(i);
  }
  // Each set of two or more becomes one step where its last member was.
  std::vector<int> set_of(n, -1); // step -> its set, for members
  std::vector<std::vector<int>> sets;
  for (const auto& [device, sinks] : by_device)
    for (std::vector<int>& set : launch_sets(s, sinks))
      if (set.size() > 1) {
        for (int i : set) set_of[i] = static_cast<int>(sets.size());
        sets.push_back(std::move(set));
      }
  if (sets.empty()) return;

  // Where each old step's tape went: its new step and the position of its first instruction.
  std::vector<int> new_step(n, -1), tape_shift(n, 0);
  std::vector<Step> steps;
  steps.reserve(n);
  for (int i = 0; i < n; ++i) {
    if (set_of[i] < 0) {
      new_step[i] = static_cast<int>(steps.size());
      steps.push_back(std::move(s.steps[i]));
      continue;
    }
    const std::vector<int>& set = sets[set_of[i]];
    if (i != set.back()) continue;
    int shift = 0;
    for (int j : set) {
      new_step[j] = static_cast<int>(steps.size());
      tape_shift[j] = shift;
      shift += static_cast<int>(s.steps[j].kernel()->kernel.tape.size());
    }
    steps.push_back(merge_steps(s, set));
  }
  for (ConstantUse& c : s.constants) {
    c.inst += tape_shift[c.step];
    c.step = new_step[c.step];
  }
  s.steps = std::move(steps);
}

} // namespace kiln::detail
