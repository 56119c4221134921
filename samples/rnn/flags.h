#pragma once
// Command-line flags of kiln-rnn (a small hand-written parser: CLI11 is not a dependency).
#include <cstdint>
#include <stdexcept>
#include <string>

namespace rnn {

struct Config {
  std::string device = "auto"; // auto | cpu | cuda
  int64_t steps = 0;           // 0: the device's default (kDefaultSteps*)
  int64_t hidden = 256;
  int64_t window = 64;
  int64_t batch = 32;
  double lr = 1e-3;
  double clip = 1.0; // max global gradient norm; 0 turns clipping off
  bool eager = false;
  bool compile = true;       // each training step replays a step traced by kiln::compile
  bool f64 = false;          // train in double precision
  bool reproducible = false; // kiln::set_reproducible: the same bits on every device
  bool cublas = true;        // false: kiln::set_cublas(false), every matmul in kiln's kernels
  uint64_t seed = 0;
  std::string out = "rnn-out";
  int64_t log_every = 50;
  int64_t val_every = 0; // 0: 1000, or about a tenth of the steps when that is less
  int64_t checkpoint_every = 1000;
  bool resume = false;
};

inline constexpr int64_t kDefaultStepsGpu = 10000;
inline constexpr int64_t kDefaultStepsCpu = 300;

/// A bad command line; the message says what and how to fix it.
struct FlagError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Parses argv. Prints the usage and exits 0 on --help; throws FlagError on a bad flag.
Config parse_flags(int argc, char** argv);

/// Fills in the defaults that depend on the device (steps, val_every).
void resolve_defaults(Config& c, bool on_gpu);

} // namespace rnn
