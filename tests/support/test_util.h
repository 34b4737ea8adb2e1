// Shared helpers for the GoogleTest suites.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/philox.h"
#include "core/tensor.h"

namespace rotor::test {

// Skips the current test with a one-line reason when no GPU answers.
#define ROTOR_REQUIRE_GPU()                                                                  \
  do {                                                                                       \
    if (::rotor::cuda_device_count() == 0) GTEST_SKIP() << "no GPU found: GPU test skipped"; \
  } while (0)

// The source tree (configs/) and the rotor binary the tests use: those of
// the build, or, for test programs installed with a relocatable tree and run
// elsewhere (scripts/gpu/measure.sh --prefix), ROTOR_TEST_SOURCE_DIR and
// ROTOR_TEST_BINARY.
inline std::string source_dir() {
  const char* env = std::getenv("ROTOR_TEST_SOURCE_DIR");
  return env && *env ? env : ROTOR_SOURCE_DIR;
}
inline std::string rotor_binary() {
  const char* env = std::getenv("ROTOR_TEST_BINARY");
  return env && *env ? env : ROTOR_BINARY;
}

// ../shared/data beside the checkout, or "" when absent (tests then skip).
inline std::string shared_data_dir() {
  namespace fs = std::filesystem;
  fs::path p = fs::path(ROTOR_SOURCE_DIR) / ".." / "shared" / "data";
  if (const char* env = std::getenv("ROTOR_SHARED_DATA")) p = env;
  return fs::exists(p) ? fs::canonical(p).string() : std::string();
}

#define ROTOR_REQUIRE_SHARED_DATA(sub)                                            \
  do {                                                                            \
    if (::rotor::test::shared_data_dir().empty() ||                               \
        !std::filesystem::exists(::rotor::test::shared_data_dir() + "/" + (sub))) \
      GTEST_SKIP() << "../shared/data/" << (sub) << " absent: test skipped";      \
  } while (0)

// A fresh temporary directory, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    namespace fs = std::filesystem;
    std::string tmpl = (fs::temp_directory_path() / "rotor_test_XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path_ = mkdtemp(buf.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Uniform values in [lo, hi) from a Philox test stream.
// A tensor's values in double, for the references the ops are held against.
inline std::vector<double> to_double(const Tensor& t) {
  const std::vector<float> f = t.to_floats();
  return {f.begin(), f.end()};
}

// Central differences of the scalar f at x, in double.
inline std::vector<double> fd_grad(const std::function<double(const std::vector<double>&)>& f,
                                   std::vector<double> x, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double o = x[i];
    x[i] = o + h;
    const double fp = f(x);
    x[i] = o - h;
    const double fm = f(x);
    x[i] = o;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::vector<float> v(n);
  PhiloxRng rng(seed, static_cast<uint64_t>(RngPurpose::Test));
  for (auto& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

inline Tensor random_tensor(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return Tensor::from_floats(random_floats(static_cast<size_t>(shape_numel(shape)), seed, lo, hi),
                             shape);
}

// max |a - b| / max(1, |b|) over elements: a relative error robust near 0.
inline double max_rel_error(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1.0, std::abs(b[i])));
  return worst;
}
inline double max_rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  return max_rel_error(a, std::vector<double>(b.begin(), b.end()));
}

// s with every `from` replaced by `to`, searching on after each
// replacement (so a `to` that holds `from`, such as a temporary
// directory's random name, never loops).
inline std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

}  // namespace rotor::test
