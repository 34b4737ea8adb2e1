// Mixed precision on a GPU (docs/design.md, "Precision"): the mixed-dtype
// ops the layers use (16-bit activations with f32 parameters and gradients)
// against the CPU's emulated path, and the criterion in full: the
// quickstart trained 300 updates in fp16 and in bf16 ends within 2% of the
// fp32 loss. Skipped (one line) when no GPU answers.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "ops/ops.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using test::random_floats;
using test::TempDir;

const Device kGpu = Device::cuda(0);
const DType kLowp[] = {DType::F16, DType::BF16};

// err(got vs ref) relative, as tests/gpu/test_ops_cuda.cpp: f32 results of
// the same 16-bit inputs differ only by summation order.
void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double tol,
                  const char* what) {
  EXPECT_LE(test::max_rel_error(got, ref), tol) << what;
}

// 16-bit rows accumulated into an f32 table gradient (the embedding backward
// with two dtypes; the kernel is instantiated per pair).
TEST(MixedPrecisionCuda, EmbeddingBackwardHalfRowsIntoF32) {
  ROTOR_REQUIRE_GPU();
  const int64_t n = 300, vocab = 37, d = 48;
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 7 + i / 5) % vocab);
  const auto vd = random_floats(n * d, 1), g0 = random_floats(vocab * d, 2);
  for (DType dt : kLowp) {
    Tensor c = Tensor::from_floats(g0, {vocab, d}),
           g = Tensor::from_floats(g0, {vocab, d}, DType::F32, kGpu);
    ops::embedding_backward(Tensor::from_ints(ids, {n}), Tensor::from_floats(vd, {n, d}, dt), 1.5f,
                            c, 0);
    ops::embedding_backward(Tensor::from_ints(ids, {n}, kGpu),
                            Tensor::from_floats(vd, {n, d}, dt, kGpu), 1.5f, g, 0);
    expect_close(g.to_floats(), c.to_floats(), 1e-5, dtype_name(dt));
  }
}

// 16-bit x with f32 gamma/beta; f32 dgamma/dbeta; and the 16-bit A, B into
// f32 C (beta 1) GEMM of the weight gradients; 16-bit rows summed into f32.
TEST(MixedPrecisionCuda, LayerNormGemmSumRowsMixed) {
  ROTOR_REQUIRE_GPU();
  const int64_t rows = 64, n = 96;
  const auto vx = random_floats(rows * n, 3, -2.0f, 2.0f), vdy = random_floats(rows * n, 4);
  const auto vg = random_floats(n, 5, 0.5f, 1.5f), vb = random_floats(n, 6);
  for (DType dt : kLowp) {
    std::vector<float> out[2][4];  // [cpu, gpu][y, dx, dgamma, dbeta]
    for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
      const Device dev = on_gpu ? kGpu : Device::cpu();
      Tensor x = Tensor::from_floats(vx, {rows, n}, dt, dev),
             dy = Tensor::from_floats(vdy, {rows, n}, dt, dev);
      Tensor gamma = Tensor::from_floats(vg, {n}, DType::F32, dev),
             beta = Tensor::from_floats(vb, {n}, DType::F32, dev);
      Tensor y = Tensor::empty({rows, n}, dt, dev), dx = Tensor::empty({rows, n}, dt, dev);
      Tensor mean = Tensor::empty({rows}, DType::F32, dev),
             rstd = Tensor::empty({rows}, DType::F32, dev);
      Tensor dg = Tensor::zeros({n}, DType::F32, dev), db = Tensor::zeros({n}, DType::F32, dev);
      ops::layer_norm_forward(x, gamma, beta, 1e-5f, y, mean, rstd);
      ops::layer_norm_backward(dy, x, gamma, mean, rstd, dx, dg, db);
      out[on_gpu][0] = y.to_floats();
      out[on_gpu][1] = dx.to_floats();
      out[on_gpu][2] = dg.to_floats();
      out[on_gpu][3] = db.to_floats();
    }
    const double lowp_tol = dt == DType::F16 ? 2e-3 : 1.6e-2;  // one rounding step apart at most
    expect_close(out[1][0], out[0][0], lowp_tol, "layer_norm y");
    expect_close(out[1][1], out[0][1], lowp_tol, "layer_norm dx");
    expect_close(out[1][2], out[0][2], 1e-4, "layer_norm dgamma");
    expect_close(out[1][3], out[0][3], 1e-4, "layer_norm dbeta");

    const auto c0 = random_floats(n * n, 7);
    Tensor cc = Tensor::from_floats(c0, {n, n}),
           gc = Tensor::from_floats(c0, {n, n}, DType::F32, kGpu);
    ops::GemmOptions o;
    o.trans_a = true;
    o.beta = 1.0f;
    ops::gemm(Tensor::from_floats(vdy, {rows, n}, dt), Tensor::from_floats(vx, {rows, n}, dt), cc,
              o);
    ops::gemm(Tensor::from_floats(vdy, {rows, n}, dt, kGpu),
              Tensor::from_floats(vx, {rows, n}, dt, kGpu), gc, o);
    expect_close(gc.to_floats(), cc.to_floats(), 1e-4, "gemm into f32 C");

    Tensor sc = Tensor::zeros({n}), sg = Tensor::zeros({n}, DType::F32, kGpu);
    ops::sum_rows(Tensor::from_floats(vdy, {rows, n}, dt), sc, true);
    ops::sum_rows(Tensor::from_floats(vdy, {rows, n}, dt, kGpu), sg, true);
    expect_close(sg.to_floats(), sc.to_floats(), 1e-5, "sum_rows");
  }
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int run_rotor(const TempDir& dir, const std::string& args, std::string* err) {
  const std::string e = dir / "stderr.txt";
  const std::string cmd = test::rotor_binary() + " " + args + " >/dev/null 2>" + e;
  const int status = std::system(cmd.c_str());
  *err = slurp(e);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The last metrics.jsonl record of `split` (null when there is none).
json_io::Json last_record(const std::string& run, const std::string& split) {
  json_io::Json last;
  std::ifstream f(run + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    json_io::Json v = json_io::parse(line, "metrics.jsonl");
    if (v.at("split").get<std::string>() == split) last = std::move(v);
  }
  return last;
}

// The goal: "fp16 and bf16 runs of the quickstart for 300 steps stay within 2%
// of the fp32 loss" -- the train loss of the last 50 updates and the
// validation loss at update 300.
TEST(MixedPrecisionCuda, QuickstartHalfPrecisionWithinTwoPercentOfFp32) {
  ROTOR_REQUIRE_GPU();
  TempDir dir;
  std::string err;
  ASSERT_EQ(run_rotor(dir, "synth numbers-en-de --output " + (dir / "data") + " --seed 1", &err), 0)
      << err;
  std::map<std::string, std::pair<double, double>> loss;
  for (const char* precision : {"fp32", "fp16", "bf16"}) {
    const std::string run = dir / precision;
    const std::string args =
        "train " + test::source_dir() + "/configs/quickstart/numbers_rope.yaml" +
        " --set device=cuda --set precision=" + precision + " --set output_dir=" + run +
        " --set data.train=" + (dir / "data/train") + " --set data.valid=" + (dir / "data/valid") +
        " --set train.max_updates=300 --set train.valid_interval=300 --set train.save_interval=300";
    ASSERT_EQ(run_rotor(dir, args, &err), 0) << precision << ": " << err;
    const json_io::Json tr = last_record(run, "train"), va = last_record(run, "valid");
    ASSERT_TRUE(tr.is_object() && va.is_object()) << precision << ": no train or valid record";
    ASSERT_EQ(tr.at("step").get<int64_t>(), 300) << precision;
    loss[precision] = {tr.at("loss").get<double>(), va.at("loss").get<double>()};
    std::printf("%s: train loss %.4f, valid loss %.4f\n", precision, loss[precision].first,
                loss[precision].second);
  }
  for (const char* precision : {"fp16", "bf16"}) {
    EXPECT_LE(std::abs(loss[precision].first - loss["fp32"].first), 0.02 * loss["fp32"].first)
        << precision << " train loss vs fp32";
    EXPECT_LE(std::abs(loss[precision].second - loss["fp32"].second), 0.02 * loss["fp32"].second)
        << precision << " valid loss vs fp32";
  }
}

}  // namespace
}  // namespace rotor
