// kiln quickstart: tensors look eager, work is recorded and runs fused when a value is needed.
// Build and run: scripts/quickstart
#include <kiln/kiln.h>

#include <iostream>

int main() try {
  std::cout << "device: " << kiln::default_device() << "\n\n"; // GPU if present, else CPU
  kiln::manual_seed(0);
  kiln::reset_stats();

  auto x = kiln::randn({4, 3}); // lazy: nothing runs yet
  auto w = kiln::from_vector<float>({1, 0, -1, 2, 0.5f, 0, 0, 1, 1}, {3, 3});

  auto y = kiln::tanh(x * 2.0f + 1.0f) * kiln::sigmoid(x); // elementwise: fuses
  auto total = kiln::sum(y);                               // reduction
  auto z = kiln::matmul(y, w);                             // GEMM

  kiln::eval(y, total, z); // run everything pending
  auto stats = kiln::stats();
  auto plan = kiln::last_plan();
  std::cout << "x =\n" << x << "\n\n";
  std::cout << "y = tanh(2x + 1) * sigmoid(x) =\n" << y << "\n\n";
  std::cout << "sum(y) = " << total.item<float>() << "\n\n";
  std::cout << "y @ w =\n" << z << "\n\n";

  std::cout << "stats: " << stats << "\n\n";
  std::cout << "plan of the eval:\n" << plan << "\n";
} catch (const kiln::Error& e) { // e.g. KILN_DEVICE=cuda on a machine without a GPU
  std::cerr << "kiln error: " << e.what() << "\n";
  return 1;
}
