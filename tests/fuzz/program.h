#pragma once
// A random kiln program, made again from its seed every time it is run, so that one program
// can be run lazily, eagerly, under each small-matmul mode, on each device and with every
// floating dtype widened to f64 (the reference), and the results compared. What a run
// records depends only on the seed and on shapes and dtypes, never on values, so every run of
// a seed records the same ops (the reference run the same ops in f64).
//
// Alongside each value the generator keeps a bound on its magnitude and on its absolute
// rounding error (in "unit roundoffs of each op"), propagated op by op, so that the reference
// comparison has a principled tolerance. Ops whose error a bound cannot follow (exp, log, pow,
// division, softmax, a float compared or cast to an integer) mark their results unchecked
// against the reference; they are still compared bit for bit lazy vs eager.
#include <kiln/kiln.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kfuzz {

struct RunOptions {
  kiln::Device device = kiln::Device::cpu();
  bool reference = false; // every floating dtype becomes f64
};

struct Value {
  kiln::Tensor t;
  std::string name;    // its variable in the reproducer
  bool checked = true; // err is a valid bound: comparable against the f64 reference
  bool exact = true;   // no rounding on its path (integers, bools, views and copies of inputs)
  double mag = 0;      // bound on |element| (finite when checked)
  double err = 0;      // bound on |element - exact value| (absolute)
};

struct Outcome {
  std::vector<Value> outputs; // the values still held at the end
  std::string code;           // the program as C++ (the reproducer)
  int errors = 0;             // op calls that threw kiln::Error (skipped, as in every run)
};

/// Records and runs the program of `seed`; outputs are evaluated (read with read_bytes).
Outcome run_program(uint64_t seed, const RunOptions& opt);

/// The raw bytes of a tensor's elements in its own dtype, row-major.
std::vector<uint8_t> read_bytes(const kiln::Tensor& t);

} // namespace kfuzz
