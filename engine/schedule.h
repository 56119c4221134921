#pragma once
// Schedule: the ordered steps of one evaluation, and the buffer slots they read and write.
#include "engine/fused_kernel.h"
#include "engine/node.h"

#include <string>
#include <vector>

namespace kiln::detail {

struct Slot {
  BufferRef buffer;         // set for realized inputs; allocated when the producing step runs
  size_t bytes = 0;         // for produced slots
  Node* producer = nullptr; // the node this slot will realize (produced slots)
};

/// Why a value crossed memory at a step boundary. Reasons are string literals.
struct Note {
  Origin value;
  bool written = false; // written by this step (else read from memory)
  const char* reason = "";
};

struct Step {
  enum class Kind : uint8_t { kernel, gemm, transfer } kind = Kind::kernel;
  Device device; // where the step runs (for a transfer: the destination)
  struct {
    Device from;
    int src_slot = 0, dst_slot = 0;
    size_t src_offset = 0, bytes = 0; // bytes
  } transfer;
  FusedKernel kernel;
  GemmStep gemm;
  std::vector<int> writes;     // slots this step produces (allocated before it runs)
  std::vector<Node*> realizes; // nodes that become realized when the step is done
  std::string name;            // readable kernel name
  std::vector<Note> notes;     // why fusion stopped at this step's inputs and outputs
  std::vector<Node*> fused;    // nodes computed in registers, never stored
  int fused_count = 0;         // fused.size(), kept for the dump after the nodes are gone
  /// Outputs written in place into an input's buffer instead of a new one (buffer_reuse.cpp).
  struct InPlace {
    int output = 0; // index into kernel.outputs
    int input = 0;  // index into kernel.inputs: the slot whose buffer the output takes over
  };
  std::vector<InPlace> in_place;
};

struct Schedule {
  std::vector<Slot> slots;
  std::vector<Step> steps;
  std::vector<Node*> aliases; // pending views realized as aliases of their root afterwards
  std::vector<uint64_t> alias_ids;
};

/// Plan the evaluation of `targets` (pending nodes; views allowed).
Schedule plan(llvm::ArrayRef<Node*> targets);
/// Human-readable dump of a schedule (kiln::last_plan()). Reads no Node.
std::string dump_schedule(const Schedule& s);
/// The last schedule run, without buffers or nodes (for kiln::last_plan()).
const Schedule& last_schedule();

} // namespace kiln::detail
