// The packed MatMul (backends/cpu/packed_matmul.h) against the reference kernels, on its AVX2
// tile and, where the CPU has it, its AVX-512 one: row counts around the 6- and 8-row tiles and
// the 48-row job, column counts around the 16-column panel, K of 1 and
// past the 256-deep block, transposed B, batched A, Gemm's bias forms, FusedMatMul's residual and
// activations; and which nodes it takes.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/onednn.h"
#include "backends/cpu/packed_matmul.h"
#include "op_test_util.h"

namespace vlrt::test {
namespace {

Node node_of(const std::string& op, const std::vector<Tensor>& inputs, std::map<std::string, Attribute> attrs) {
  Node n = make_node(op, inputs.size(), 1, std::move(attrs));
  if (op == "FusedMatMul") n.domain = "vlrt";
  for (size_t i = 0; i < inputs.size(); i++)
    if (!inputs[i].defined()) n.inputs[i] = "";
  return n;
}

size_t taken_bytes(const std::string& op, const std::vector<Tensor>& inputs, std::map<std::string, Attribute> attrs = {}) {
  ValueInfos infos(inputs);
  return packed_matmul_prepare_info(node_of(op, inputs, std::move(attrs)), infos.ptrs).bytes;
}

// The packed kernel takes the node, and the backend's result matches the reference kernels'.
void check(const std::string& op, const std::vector<Tensor>& inputs, std::map<std::string, Attribute> attrs = {}) {
  EXPECT_GT(taken_bytes(op, inputs, attrs), 0u) << op;
  Node n = node_of(op, inputs, attrs);
  expect_close(run_on_cpu(n, inputs, false), run_on_cpu(n, inputs, true), 1e-5, 1e-4);
}

bool packed_runs_here() { return cpu_isa() >= CpuIsa::avx2; }

// Runs `body` once on each instruction set level of the packed product this CPU has.
template <class Body>
void on_each_tile(Body body) {
  for (CpuIsa isa : {CpuIsa::avx2, CpuIsa::avx512}) {
    if (detected_cpu_isa() < isa) continue;
    SCOPED_TRACE(cpu_isa_name(isa));
    CpuIsa before = set_cpu_isa(isa);
    body();
    set_cpu_isa(before);
  }
}

TEST(CpuPackedMatMul, MatchesTheReferenceOnAwkwardShapes) {
  if (!packed_runs_here()) GTEST_SKIP() << "the packed MatMul needs AVX2";
  on_each_tile([] {
    uint32_t seed = 1;
    for (int64_t m : {1, 5, 7, 9, 48, 49, 100})
      for (int64_t n : {1, 15, 16, 17, 33})
        for (int64_t k : {1, 3, 40, 300}) {  // 300: two depth blocks
          SCOPED_TRACE(cat("m ", m, " n ", n, " k ", k));
          Tensor a = random_uniform({m, k}, seed++), b = random_uniform({k, n}, seed++),
                 bt = random_uniform({n, k}, seed++), bias = random_uniform({n}, seed++);
          check("MatMul", {a, b});
          check("Gemm", {a, bt, bias}, {{"transB", attr_i(1)}});
          check("Gemm", {a, b, random_uniform({1, n}, seed++)});
        }
    Tensor a3 = random_uniform({2, 7, 19}, 3), b = random_uniform({19, 21}, 4),
           bt = random_uniform({21, 19}, 5), bias = random_uniform({21}, 6),
           z = random_uniform({2, 7, 21}, 7);
    check("MatMul", {a3, b});
    for (const char* act : {"", "Relu", "Gelu", "Tanh", "HardSwish"}) {
      SCOPED_TRACE(act);
      std::map<std::string, Attribute> attrs;
      if (*act) attrs["activation"] = attr_s(act);
      check("FusedMatMul", {a3, b, bias, z}, attrs);
      check("FusedMatMul", {a3, b, Tensor(), z}, attrs);
      attrs["transB"] = attr_i(1);
      check("FusedMatMul", {a3, bt, bias}, attrs);
    }
  });
}

// An A larger than the last-level cache runs range by range through every panel, with the
// epilogue on each finished block: the ranges of 218 rows end on a partial one, K takes two depth
// blocks and N ends on a partial panel.
TEST(CpuPackedMatMul, AnALargerThanTheCacheMatchesTheReference) {
  if (!packed_runs_here()) GTEST_SKIP() << "the packed MatMul needs AVX2";
  Tensor a = random_uniform({1, 4100, 300}, 1), b = random_uniform({300, 33}, 2),
         bias = random_uniform({33}, 3), z = random_uniform({1, 4100, 33}, 4);
  on_each_tile([&] {
    check("MatMul", {a, b});
    check("FusedMatMul", {a, b, bias, z}, {{"activation", attr_s("Relu")}});
  });
}

// Both orders of jobs cover every row of every panel exactly once.
TEST(CpuPackedMatMul, JobsCoverEveryBlockOnce) {
  for (auto [m, k, n] :
       {std::tuple<int64_t, int64_t, int64_t>{100, 40, 33}, {4100, 300, 33}, {22223, 256, 2048}}) {
    SCOPED_TRACE(cat("m ", m, " k ", k, " n ", n));
    const packed::ProductJobs jobs(m, k, n);
    const int64_t panels = (n + 15) / 16;
    std::vector<int> seen(size_t(m * panels), 0);
    for (int64_t j = 0; j < jobs.count(); j++) {
      int64_t p, r0, r1;
      jobs.at(j, p, r0, r1);
      ASSERT_TRUE(p >= 0 && p < panels && r0 >= 0 && r0 < r1 && r1 <= m) << "job " << j;
      for (int64_t r = r0; r < r1; r++) seen[size_t(p * m + r)]++;
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), int64_t(seen.size()));
  }
}

// A float16 or bfloat16 B of FusedMatMul (a weight kept in half precision) stays so in the panels,
// half the bytes, and gives exactly what the packed product of the widened float32 B gives.
TEST(CpuPackedMatMul, HalfPrecisionWeightsMatchTheirFloat32Values) {
  if (!packed_runs_here()) GTEST_SKIP() << "the packed MatMul needs AVX2";
  for (DType dt : {DType::f16, DType::bf16})
    for (bool trans : {false, true}) {
      SCOPED_TRACE(cat(dtype_name(dt), trans ? " transB" : ""));
      Tensor a = random_uniform({2, 7, 300}, 1), bias = random_uniform({21}, 3);
      Tensor b = random_uniform(trans ? Shape{21, 300} : Shape{300, 21}, 2, -1, 1, dt);
      Tensor wide = b.converted(DType::f32);
      std::map<std::string, Attribute> attrs = {{"activation", attr_s("Relu")}, {"transB", attr_i(trans)}};
      EXPECT_EQ(taken_bytes("FusedMatMul", {a, b, bias}, attrs), size_t(2 * 300 * 16 * 2));
      check("FusedMatMul", {a, b, bias}, attrs);
      Node n = node_of("FusedMatMul", {a, b, bias}, attrs);
      expect_close(run_on_cpu(n, {a, b, bias}, false), run_on_cpu(n, {a, wide, bias}, false), 0, 0);
      // oneDNN's matmul (where the packed one is turned off) widens it when it packs.
      ValueInfos half_infos({a, b, bias}), wide_infos({a, wide, bias});
      const int threads = int(test_pool().size());
      EXPECT_GT(onednn_prepare_info(n, 17, half_infos.ptrs, threads).bytes, 0u);
      expect_close(run_prepared(make_onednn_kernel(n, 17, half_infos.ptrs, threads), {a, b, bias}, {2, 7, 21}),
                   run_prepared(make_onednn_kernel(n, 17, wide_infos.ptrs, threads), {a, wide, bias}, {2, 7, 21}), 0, 0);
    }
  Tensor a = random_uniform({5, 19}, 1), b = random_uniform({19, 21}, 2, -1, 1, DType::f16);
  EXPECT_EQ(taken_bytes("MatMul", {a, b}), 0u) << "MatMul itself takes float32 weights only";
}

// A Conv whose kernel tiles the image (stride = kernel, no padding) runs as a product of patches.
TEST(CpuPackedMatMul, PatchConvolutionsMatchTheReference) {
  if (!packed_runs_here()) GTEST_SKIP() << "the packed MatMul needs AVX2";
  struct Case {
    Shape x, w;
    bool bias;
  };
  for (const Case& c : std::vector<Case>{{{1, 3, 8, 12}, {17, 3, 4, 4}, true},
                                         {{2, 5, 6, 4}, {7, 5, 2, 2}, false},
                                         {{1, 3, 32, 32}, {40, 3, 16, 16}, true},
                                         {{1, 2, 9, 4}, {3, 2, 3, 1}, true}}) {
    SCOPED_TRACE(cat("x ", shape_str(c.x), " w ", shape_str(c.w)));
    Tensor x = random_uniform(c.x, 1), w = random_uniform(c.w, 2), b = random_uniform({c.w[0]}, 3);
    std::vector<Tensor> in = {x, w};
    if (c.bias) in.push_back(b);
    check("Conv", in, {{"strides", attr_ints({c.w[2], c.w[3]})}});
  }
  Tensor x = random_uniform({1, 3, 8, 8}, 4), w = random_uniform({5, 3, 2, 2}, 5);
  EXPECT_EQ(taken_bytes("Conv", {x, w}, {{"strides", attr_ints({1, 1})}}), 0u) << "overlapping windows";
  EXPECT_EQ(taken_bytes("Conv", {x, w}, {{"strides", attr_ints({2, 2})}, {"pads", attr_ints({1, 1, 1, 1})}}), 0u);
  EXPECT_EQ(taken_bytes("Conv", {random_uniform({1, 3, 7, 8}, 6), w}, {{"strides", attr_ints({2, 2})}}), 0u)
      << "a kernel that does not tile the image";
}

TEST(CpuPackedMatMul, TakesOnlyWhatItComputes) {
  if (!packed_runs_here()) GTEST_SKIP() << "the packed MatMul needs AVX2";
  Tensor a = random_uniform({5, 19}, 1), b = random_uniform({19, 21}, 2), bias = random_uniform({21}, 3);
  // B in panels of 16 columns: 2 panels of 19 rows.
  EXPECT_EQ(taken_bytes("MatMul", {a, b}), size_t(2 * 19 * 16 * 4));
  {
    ValueInfos infos({a, b});
    CpuBackend cpu(0, test_pool());
    cpu.set_reference_kernels(false);
    PrepareInfo info = cpu.prepare_info(node_of("MatMul", {a, b}, {}), 17, infos.ptrs);
    EXPECT_EQ(info.bytes, size_t(2 * 19 * 16 * 4)) << "the CPU backend prefers it to oneDNN's matmul";
    EXPECT_EQ(info.replaced_inputs, std::vector<size_t>{1});
  }
  EXPECT_EQ(taken_bytes("Gemm", {random_uniform({19, 5}, 4), b}, {{"transA", attr_i(1)}}), 0u);
  EXPECT_EQ(taken_bytes("Gemm", {a, b, bias}, {{"alpha", attr_f(2.f)}}), 0u);
  EXPECT_EQ(taken_bytes("Gemm", {a, b, bias}, {{"beta", attr_f(0.5f)}}), 0u);
  EXPECT_EQ(taken_bytes("Gemm", {a, b, random_uniform({5, 21}, 5)}), 0u) << "C as a matrix is not a bias";
  EXPECT_EQ(taken_bytes("FusedMatMul", {a, b, bias, random_uniform({21}, 6)}), 0u) << "a broadcast residual";
  EXPECT_EQ(taken_bytes("MatMul", {a, random_uniform({2, 19, 21}, 7)}), 0u) << "a batched B";
  ValueInfos dynamic_b({a, b});
  dynamic_b.values[1].value = Tensor();  // B computed at run time
  EXPECT_EQ(packed_matmul_prepare_info(node_of("MatMul", {a, b}, {}), dynamic_b.ptrs).bytes, 0u);
}

}  // namespace
}  // namespace vlrt::test
