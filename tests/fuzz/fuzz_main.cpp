// kiln_fuzz: differential fuzzing of random programs (tests/fuzz/program.h).
//
// For each seed: lazy vs eager, bit for bit, under each small-matmul mode; the lazy run against
// the same program run twice more in a row (recorded from loop templates), bit for bit; the
// lazy result against the same program in f64 within its propagated error bound; with --device cuda
// also CUDA vs the CPU backend within that bound (and lazy vs eager on CUDA, bit for bit). The
// first mismatch prints the seed, the check and the program as C++, and exits 1.
//
// With --mode loops each seed is a loop instead (loop_program.h): lazily with loop templates
// against lazily without them (the same bits, kernels and stats) and against eager (the same
// bits), on the device given.
//
//   kiln_fuzz [--mode programs|loops] [--programs N] [--seed S] [--seconds T]
//             [--device cpu|cuda] [--show 1] [--steps N] [--drop MASK] [--train 0]
//             [--train-blas 1]
//   (--show 1 prints the programs of the seeds instead of checking them; --steps and --drop
//   narrow a loop down: its first N steps, without the body's statements whose bits are set)
//
// docs/testing.md describes the checks and how to reproduce a seed.
#include "loop_program.h"
#include "program.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include <execinfo.h>
#include <unistd.h>

namespace {

using kfuzz::Outcome;
using kfuzz::RunOptions;
using kiln::DType;

struct Args {
  uint64_t programs = 1000, seed = 1;
  double seconds = 0; // > 0: also stop once this much time has passed
  bool show = false;
  bool loops = false;      // --mode loops
  kfuzz::LoopOptions loop; // --steps, --drop, --train, --train-blas
  kiln::Device device = kiln::Device::cpu();
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--programs")
      a.programs = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--seed")
      a.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--seconds")
      a.seconds = std::strtod(v.c_str(), nullptr);
    else if (k == "--show")
      a.show = v != "0";
    else if (k == "--mode" && (v == "loops" || v == "programs"))
      a.loops = v == "loops";
    else if (k == "--steps")
      a.loop.steps = std::strtoll(v.c_str(), nullptr, 10);
    else if (k == "--drop")
      a.loop.drop = std::strtoull(v.c_str(), nullptr, 0);
    else if (k == "--train")
      a.loop.train = v != "0";
    else if (k == "--train-blas")
      a.loop.train_blas = v != "0";
    else if (k == "--device")
      a.device = v == "cuda" ? kiln::Device::cuda(0) : kiln::Device::cpu();
    else {
      std::fprintf(stderr, "kiln_fuzz: unknown argument %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

bool is_nan_bits(const uint8_t* p, DType t) {
  switch (t) {
  case DType::f32: {
    float f;
    std::memcpy(&f, p, 4);
    return std::isnan(f);
  }
  case DType::f64: {
    double d;
    std::memcpy(&d, p, 8);
    return std::isnan(d);
  }
  case DType::f16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return (h & 0x7c00) == 0x7c00 && (h & 0x03ff);
  }
  case DType::bf16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return (h & 0x7f80) == 0x7f80 && (h & 0x007f);
  }
  default:
    return false;
  }
}

/// "" when x and y hold the same values bit for bit (any NaN equals any NaN), else where not.
std::string compare_bits(const Outcome& x, const Outcome& y) {
  if (x.outputs.size() != y.outputs.size() || x.errors != y.errors)
    return "different programs ran (outputs or errors differ)";
  for (size_t i = 0; i < x.outputs.size(); ++i) {
    const kiln::Tensor &a = x.outputs[i].t, &b = y.outputs[i].t;
    if (a.dtype() != b.dtype() || a.shape() != b.shape())
      return x.outputs[i].name + ": dtype or shape differs";
    std::vector<uint8_t> p = kfuzz::read_bytes(a), q = kfuzz::read_bytes(b);
    const size_t n = size_t(kiln::itemsize(a.dtype()));
    for (size_t e = 0; e * n < p.size(); ++e) {
      const uint8_t *u = p.data() + e * n, *v = q.data() + e * n;
      if (std::memcmp(u, v, n) != 0 && !(is_nan_bits(u, a.dtype()) && is_nan_bits(v, a.dtype()))) {
        const std::vector<double> xa = a.to_vector<double>(), ya = b.to_vector<double>();
        char both[96];
        std::snprintf(both, sizeof both, " (%a vs %a)", xa[e], ya[e]);
        return x.outputs[i].name + " element " + std::to_string(e) + " differs in its bits" + both;
      }
    }
  }
  return "";
}

/// "" when every checked value of x is within twice its error bound of y's (integers and
/// bools with no error exactly equal), else where not.
std::string compare_bounded(const Outcome& x, const Outcome& y) {
  if (x.outputs.size() != y.outputs.size()) return "different programs ran";
  for (size_t i = 0; i < x.outputs.size(); ++i) {
    const kfuzz::Value& v = x.outputs[i];
    if (!v.checked) continue;
    std::vector<double> a = v.t.to_vector<double>(), b = y.outputs[i].t.to_vector<double>();
    if (a.size() != b.size()) return v.name + ": sizes differ";
    const double tol = 2 * v.err + 1e-12 * v.mag + 1e-300;
    for (size_t e = 0; e < a.size(); ++e) {
      const bool both_nan = std::isnan(a[e]) && std::isnan(b[e]);
      if (!both_nan && !(std::abs(a[e] - b[e]) <= tol))
        return v.name + " element " + std::to_string(e) + ": " + std::to_string(a[e]) + " vs " +
               std::to_string(b[e]) + " (bound " + std::to_string(tol) + ")";
    }
  }
  return "";
}

Outcome run(uint64_t seed, kiln::Device dev, bool eager, kiln::SmallMatmul mode,
            bool reference = false) {
  kiln::set_eager(eager);
  kiln::set_small_matmul(mode);
  RunOptions opt;
  opt.device = dev;
  opt.reference = reference;
  return kfuzz::run_program(seed, opt);
}

const char* mode_name(kiln::SmallMatmul m) {
  return m == kiln::SmallMatmul::blas     ? "blas"
         : m == kiln::SmallMatmul::on_gpu ? "on_gpu"
                                          : "everywhere";
}

/// "" or what failed for this seed.
std::string check_seed(uint64_t seed, kiln::Device dev, uint64_t& rejected) {
  using kiln::SmallMatmul;
  const kiln::Device cpu = kiln::Device::cpu();
  for (SmallMatmul m : {SmallMatmul::blas, SmallMatmul::on_gpu, SmallMatmul::everywhere}) {
    if (dev.is_cpu() && m == SmallMatmul::on_gpu) continue; // same as blas on the CPU
    Outcome lazy = run(seed, dev, false, m), eager = run(seed, dev, true, m);
    if (std::string w = compare_bits(lazy, eager); !w.empty())
      return std::string("lazy vs eager (") + mode_name(m) + "): " + w;
    if (dev.is_cuda()) {
      Outcome host = run(seed, cpu, false, SmallMatmul::blas);
      if (std::string w = compare_bounded(lazy, host); !w.empty())
        return std::string("cuda vs cpu (") + mode_name(m) + "): " + w;
    }
  }
  Outcome lazy = run(seed, cpu, false, SmallMatmul::blas);
  // The program twice more in a row: by now the recorder has seen it repeat and records these
  // runs from loop templates (engine/loop_template.h) where it can. Their values must be the
  // first lazy run's, bit for bit.
  for (int again = 0; again < 2; ++again)
    if (std::string w = compare_bits(lazy, run(seed, cpu, false, SmallMatmul::blas)); !w.empty())
      return "repeated (loop templates): " + w;
  Outcome ref = run(seed, cpu, false, SmallMatmul::blas, /*reference=*/true);
  rejected += uint64_t(lazy.errors);
  if (std::string w = compare_bounded(lazy, ref); !w.empty()) return "vs the f64 reference: " + w;
  return "";
}

/// "" or what differs between the stats of a loop run with templates and without.
std::string compare_stats(const kiln::Stats& a, const kiln::Stats& b) {
  for (auto field :
       {&kiln::Stats::ops_recorded, &kiln::Stats::ops_merged, &kiln::Stats::flushes,
        &kiln::Stats::loop_flushes, &kiln::Stats::plan_misses, &kiln::Stats::kernels_run,
        &kiln::Stats::buffers_materialized, &kiln::Stats::nodes_fused, &kiln::Stats::fused_ops})
    if (a.*field != b.*field) {
      std::ostringstream o;
      o << "stats differ: with templates " << a << "; without " << b;
      return o.str();
    }
  return b.ops_from_template == 0 ? "" : "templates ran while switched off";
}

/// The program of a seed as C++ (the reproducer).
std::string program_code(const Args& a, uint64_t seed) {
  if (a.loops) return kfuzz::loop_code(seed, a.loop);
  return run(seed, kiln::Device::cpu(), false, kiln::SmallMatmul::blas).code;
}

/// Op calls of the loops run with templates: how many came from them.
struct TemplateCount {
  int64_t templated = 0, recorded = 0;
};

/// "" or what failed for the loop of this seed.
std::string check_loop_seed(uint64_t seed, const Args& args, TemplateCount& count) {
  kfuzz::LoopOptions opt = args.loop;
  opt.device = args.device;
  const kfuzz::LoopOutcome with = kfuzz::run_loop(seed, opt);
  opt.templates = false;
  const kfuzz::LoopOutcome without = kfuzz::run_loop(seed, opt);
  if (with.history_left > 0 || without.history_left > 0)
    return "gradient history left alive after the loop: " +
           std::to_string(std::max(with.history_left, without.history_left)) + " records";
  count.templated += with.stats.ops_from_template;
  count.recorded += with.stats.ops_recorded;
  if (std::string w = compare_bits(with.out, without.out); !w.empty())
    return "loop with templates vs without: " + w;
  if (with.kernels != without.kernels) {
    std::string only;
    for (const std::string& k : with.kernels)
      if (!without.kernels.count(k)) only += "\n  with templates only: " + k;
    for (const std::string& k : without.kernels)
      if (!with.kernels.count(k)) only += "\n  without only: " + k;
    std::ostringstream o;
    o << "\n  stats with templates: " << with.stats << "\n  without: " << without.stats;
    return "loop with templates vs without: other kernels ran" + only + o.str();
  }
  if (std::string w = compare_stats(with.stats, without.stats); !w.empty())
    return "loop with templates vs without: " + w;
  opt.templates = true;
  opt.eager = true;
  if (std::string w = compare_bits(with.out, kfuzz::run_loop(seed, opt).out); !w.empty())
    return "loop lazy vs eager: " + w;
  return "";
}

// A crash names the seed it ran (0: after the last one, at exit) and where, so that it can be
// run again alone; so does a SIGTERM (`timeout` stopping a seed that hangs).
volatile uint64_t g_seed = 0;

void on_crash(int sig) {
  char msg[96];
  const int n = std::snprintf(msg, sizeof msg, "kiln_fuzz: signal %d at seed %llu\n", sig,
                              static_cast<unsigned long long>(g_seed));
  (void)!::write(2, msg, size_t(n));
  void* frames[48];
  backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

} // namespace

int main(int argc, char** argv) {
  // Line-buffered: a process stopped by `timeout` (a slow exit) keeps the lines it printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const Args args = parse(argc, argv);
  std::signal(SIGSEGV, on_crash);
  std::signal(SIGABRT, on_crash);
  std::signal(SIGTERM, on_crash);
  if (!kiln::is_available(args.device)) {
    std::printf("kiln_fuzz: %s is not available; skipped\n", args.device.str().c_str());
    return 77;
  }
  kiln::set_idle_flush(0); // where early flushes cut depends on timing: keep runs repeatable
  const auto start = std::chrono::steady_clock::now();
  uint64_t n = 0, errors = 0;
  TemplateCount loop_count;
  for (uint64_t seed = args.seed;; ++seed, ++n) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (n >= args.programs || (args.seconds > 0 && elapsed >= args.seconds)) break;
    if (args.show) {
      std::printf("// seed %llu\n%s\n", static_cast<unsigned long long>(seed),
                  program_code(args, seed).c_str());
      continue;
    }
    std::string failure;
    g_seed = seed;
    const auto seed_start = std::chrono::steady_clock::now();
    try {
      failure = args.loops ? check_loop_seed(seed, args, loop_count)
                           : check_seed(seed, args.device, errors);
    } catch (const kiln::Error& e) {
      failure = std::string("kiln::Error while running: ") + e.what();
    }
    // Slow seeds are named: a run that overshoots --seconds says which seed took the time.
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - seed_start).count();
    if (took > 10)
      std::fprintf(stderr, "kiln_fuzz: seed %llu took %.1f s\n",
                   static_cast<unsigned long long>(seed), took);
    if (!failure.empty()) {
      kiln::set_eager(false);
      std::printf("kiln_fuzz: MISMATCH at seed %llu on %s: %s\nThe program:\n%s",
                  static_cast<unsigned long long>(seed), args.device.str().c_str(), failure.c_str(),
                  program_code(args, seed).c_str());
      return 1;
    }
  }
  g_seed = 0;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (args.loops) {
    std::printf("kiln_fuzz: %llu loops on %s (seeds %llu..%llu), 0 mismatches, %.1f s (%lld of "
                "%lld op calls from loop templates where they were on)\n",
                static_cast<unsigned long long>(n), args.device.str().c_str(),
                static_cast<unsigned long long>(args.seed),
                static_cast<unsigned long long>(args.seed + n - 1), secs,
                static_cast<long long>(loop_count.templated),
                static_cast<long long>(loop_count.recorded));
    return 0;
  }
  // A seed's runs record the same program again and again (lazy, eager, each small-matmul mode),
  // so the recorder finds the repetition and records later runs from loop templates.
  const kiln::Stats st = kiln::stats();
  std::printf("kiln_fuzz: %llu programs on %s (seeds %llu..%llu), 0 mismatches, %.1f s (%llu "
              "rejected op calls, each a kiln::Error in every run; %lld of %lld op calls from "
              "loop templates)\n",
              static_cast<unsigned long long>(n), args.device.str().c_str(),
              static_cast<unsigned long long>(args.seed),
              static_cast<unsigned long long>(args.seed + n - 1), secs,
              static_cast<unsigned long long>(errors), static_cast<long long>(st.ops_from_template),
              static_cast<long long>(st.ops_recorded));
  return 0;
}
