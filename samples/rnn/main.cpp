// kiln-rnn: trains an LSTM to predict a noisy multi-sine series one step ahead, with truncated
// backpropagation through time, validation, checkpoints and --resume; writes loss.csv,
// prediction.csv and training.svg. See samples/rnn/README.md.
#include "flags.h"
#include "progress.h"
#include "train.h"

#include <kiln/kiln.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

namespace {

// auto: kiln's default device, which is KILN_DEVICE when set, else CUDA when
// kiln::is_available(cuda(0)), else the CPU.
kiln::Device choose_device(const std::string& flag) {
  if (flag == "cpu") return kiln::Device::cpu();
  if (flag == "auto") return kiln::default_device();
  if (!kiln::is_available(kiln::Device::cuda(0)))
    throw rnn::RunError("--device cuda: no usable CUDA device (a build without CUDA, no GPU or "
                        "no driver); use --device cpu or auto");
  return kiln::Device::cuda(0);
}

void print_setup(const rnn::Config& c, kiln::Device d) {
  std::cout << "kiln-rnn on " << d << (c.eager ? " (eager)" : "")
            << (c.compile ? "" : " (not compiled)") << (c.f64 ? " in f64" : "")
            << (c.reproducible ? " (reproducible)" : "") << (c.cublas ? "" : " (no cuBLAS)")
            << ": LSTM hidden " << c.hidden << ", window " << c.window << ", batch " << c.batch
            << ", Adam lr " << c.lr << ", clip " << c.clip << ", " << c.steps
            << " steps, validation every " << c.val_every << ", output in " << c.out << "/\n";
}

void print_summary(const rnn::Summary& s, const rnn::Config& c) {
  const int64_t steps = s.last_step - s.first_step;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "done: step %lld, train loss %.5f, validation loss %.5f\n"
                "time %s (%.1f s) for %lld steps: %.2f steps/s\n",
                static_cast<long long>(s.last_step), s.train_loss, s.val_loss,
                rnn::format_duration(s.seconds).c_str(), s.seconds, static_cast<long long>(steps),
                s.seconds > 0 ? double(steps) / s.seconds : 0.0);
  std::cout << buf;
  const std::filesystem::path out(c.out);
  std::cout << "wrote " << (out / "loss.csv").string() << ", " << (out / "prediction.csv").string()
            << ", " << (out / "checkpoint.safetensors").string() << "\n"
            << "picture: " << (out / "training.svg").string() << " (open it in a web browser)\n";
}

} // namespace

int main(int argc, char** argv) try {
  rnn::Config c = rnn::parse_flags(argc, argv);
  // Before the device is first touched, which would load cuBLAS to check it (else KILN_CUBLAS).
  if (!c.cublas) kiln::set_cublas(false);
  const kiln::Device device = choose_device(c.device);
  rnn::resolve_defaults(c, device.is_cuda());
  kiln::set_default_device(device);
  kiln::set_eager(c.eager);
  if (c.reproducible) kiln::set_reproducible(true); // else KILN_REPRODUCIBLE decides
  kiln::manual_seed(c.seed);
  print_setup(c, device);
  rnn::Trainer trainer(c);
  print_summary(trainer.run(), c);
} catch (const rnn::FlagError& e) {
  std::cerr << "kiln-rnn: " << e.what() << "\n";
  return 2;
} catch (const rnn::RunError& e) {
  std::cerr << "kiln-rnn: " << e.what() << "\n";
  return 1;
} catch (const std::exception& e) { // kiln::Error, I/O errors
  std::cerr << "kiln-rnn: error: " << e.what() << "\n";
  return 1;
}
