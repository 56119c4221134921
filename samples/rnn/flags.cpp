// The flag table and its parser: --name value, --name=value, and bare --name for switches.
#include "flags.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <vector>

namespace rnn {

namespace {

struct Flag {
  std::string name, arg, help; // arg empty: a switch
  std::function<void(const std::string&)> set;
};

int64_t to_int(const std::string& name, const std::string& v, int64_t min) {
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || x < min)
    throw FlagError("--" + name + " needs an integer >= " + std::to_string(min) + ", got '" + v +
                    "'");
  return x;
}

double to_double(const std::string& name, const std::string& v) {
  size_t used = 0;
  double x = -1;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || !(x >= 0))
    throw FlagError("--" + name + " needs a number >= 0, got '" + v + "'");
  return x;
}

std::vector<Flag> flag_table(Config& c) {
  auto integer = [](int64_t& field, const char* name, int64_t min) {
    return [&field, name, min](const std::string& v) { field = to_int(name, v, min); };
  };
  return {
      {"device", "auto|cpu|cuda", "where to train (auto: CUDA when available)",
       [&c](const std::string& v) {
         if (v != "auto" && v != "cpu" && v != "cuda")
           throw FlagError("--device must be auto, cpu or cuda, got '" + v + "'");
         c.device = v;
       }},
      {"steps", "N", "training steps (default 10000 on a GPU, 300 on the CPU)",
       integer(c.steps, "steps", 1)},
      {"hidden", "N", "LSTM hidden size (default 256)", integer(c.hidden, "hidden", 1)},
      {"window", "N", "time steps per training window (default 64)",
       integer(c.window, "window", 1)},
      {"batch", "N", "windows per step (default 32)", integer(c.batch, "batch", 1)},
      {"lr", "X", "Adam learning rate (default 1e-3)",
       [&c](const std::string& v) { c.lr = to_double("lr", v); }},
      {"clip", "X", "max global gradient norm, 0 for none (default 1)",
       [&c](const std::string& v) { c.clip = to_double("clip", v); }},
      {"eager", "", "run every op at once (kiln::set_eager), for A/B timing",
       [&c](const std::string&) { c.eager = true; }},
      {"no-compile", "",
       "record every training step instead of replaying one traced by kiln::compile (A/B)",
       [&c](const std::string&) { c.compile = false; }},
      {"f64", "", "train in double precision (to check the CPU and GPU runs against each other)",
       [&c](const std::string&) { c.f64 = true; }},
      {"reproducible", "",
       "the same bits on the CPU and the GPU (kiln::set_reproducible): both runs follow one curve",
       [&c](const std::string&) { c.reproducible = true; }},
      {"no-cublas", "",
       "every matmul in kiln's kernels, none in cuBLAS (kiln::set_cublas): libcublas is never "
       "loaded, later steps are slightly slower",
       [&c](const std::string&) { c.cublas = false; }},
      {"seed", "N", "seed of the initialisation and the batches (default 0)",
       [&c](const std::string& v) { c.seed = static_cast<uint64_t>(to_int("seed", v, 0)); }},
      {"out", "DIR", "output directory (default rnn-out)",
       [&c](const std::string& v) { c.out = v; }},
      {"log-every", "N", "read the train loss every N steps (default 50)",
       integer(c.log_every, "log-every", 1)},
      {"val-every", "N", "validate every N steps (default 1000, or about steps/10 if less)",
       integer(c.val_every, "val-every", 1)},
      {"checkpoint-every", "N", "save a checkpoint every N steps (default 1000)",
       integer(c.checkpoint_every, "checkpoint-every", 1)},
      {"resume", "", "continue from DIR/checkpoint.safetensors",
       [&c](const std::string&) { c.resume = true; }},
  };
}

void print_usage(const std::vector<Flag>& flags) {
  std::cout << "kiln-rnn: trains an LSTM to predict a noisy multi-sine series one step ahead.\n"
               "usage: kiln-rnn [flags]\n";
  for (const Flag& f : flags) {
    std::string lhs = "--" + f.name + (f.arg.empty() ? "" : " " + f.arg);
    std::cout << "  " << lhs << std::string(std::max<size_t>(2, 26 - lhs.size()), ' ') << f.help
              << "\n";
  }
  std::cout << "  --help                    this text\n";
}

} // namespace

Config parse_flags(int argc, char** argv) {
  Config c;
  std::vector<Flag> flags = flag_table(c);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      print_usage(flags);
      std::exit(0);
    }
    if (a.rfind("--", 0) != 0) throw FlagError("unexpected argument '" + a + "' (see --help)");
    size_t eq = a.find('=');
    std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    auto f =
        std::find_if(flags.begin(), flags.end(), [&](const Flag& x) { return x.name == name; });
    if (f == flags.end()) throw FlagError("unknown flag --" + name + " (see --help)");
    const bool has_value = eq != std::string::npos;
    if (f->arg.empty() && has_value) throw FlagError("--" + name + " takes no value");
    if (!f->arg.empty() && !has_value && i + 1 == argc)
      throw FlagError("--" + name + " needs a value: --" + name + " " + f->arg);
    f->set(has_value ? a.substr(eq + 1) : f->arg.empty() ? std::string() : std::string(argv[++i]));
  }
  return c;
}

void resolve_defaults(Config& c, bool on_gpu) {
  if (c.steps == 0) c.steps = on_gpu ? kDefaultStepsGpu : kDefaultStepsCpu;
  if (c.val_every == 0) { // 1000, or about a tenth of the run, on a logged step
    const int64_t tenth = std::min<int64_t>(1000, c.steps / 10);
    c.val_every = std::max(c.log_every, tenth / c.log_every * c.log_every);
  }
}

} // namespace rnn
