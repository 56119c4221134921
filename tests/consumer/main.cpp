// Built against an installed kiln (see CMakeLists.txt here; .ci/run also builds it through
// pkg-config). Computes a few small values and exits nonzero if any is wrong.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {
int failures = 0;

void check(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); ++i) ok = std::fabs(got[i] - want[i]) <= 1e-5f;
  std::printf("%-22s %s\n", what, ok ? "ok" : "MISMATCH");
  if (!ok) {
    ++failures;
    std::printf("  got:  ");
    for (float v : got) std::printf(" %g", v);
    std::printf("\n  want: ");
    for (float v : want) std::printf(" %g", v);
    std::printf("\n");
  }
}
} // namespace

int main() try {
  kiln::set_default_device(kiln::Device::cpu());
  auto a = kiln::from_vector<float>({1, 2, 3, 4}, {2, 2});
  auto b = a * 2.0f + 1.0f; // 3 5 7 9
  check("elementwise", b.to_vector<float>(), {3, 5, 7, 9});
  check("sum", {kiln::sum(b).item<float>()}, {24});
  check("sum over axis 1", kiln::sum(b, {1}).to_vector<float>(), {8, 16});
  check("matmul", kiln::matmul(a, a).to_vector<float>(), {7, 10, 15, 22});
  check("relu(a - 2.5)", kiln::relu(a - 2.5f).to_vector<float>(), {0, 0, 0.5f, 1.5f});
  // The headers' version (macros) is the library's (kiln::version()).
  const bool same = std::string(kiln::version()) == KILN_VERSION_STRING;
  std::printf("%-22s %s (%s)\n", "version", same ? "ok" : "MISMATCH", kiln::version());
  failures += same ? 0 : 1;
  std::printf("kiln consumer: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
} catch (const std::exception& e) {
  std::printf("kiln consumer: exception: %s\n", e.what());
  return 2;
}
