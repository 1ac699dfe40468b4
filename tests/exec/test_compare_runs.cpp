// compare_values and compare_runs (the library under `vlrt check`): errors of single values,
// a planted fault found at its node, identical runs, a shape mismatch as a row, and the CPU
// against OpenCL where an OpenCL device exists. Models: tools/make_check_models.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "cli_util.h"
#include "exec/compare_runs.h"
#include "load/onnx_loader.h"
#include "session_util.h"

namespace vlrt {

namespace {

std::string fixture(const std::string& name) {
  return test::source_path("tests/fixtures/check/" + name + ".onnx");
}

// Every node as written: the rows are the model's own nodes.
SessionOptions unfused(const std::string& device) {
  SessionOptions o = test::on_devices(device);
  o.fusion = FusionOptions::none();
  o.fuse_qdq = false;
  return o;
}

TensorMap ramp_input() {
  std::vector<float> v(4 * 8 * 8);
  for (size_t i = 0; i < v.size(); i++) v[i] = float(std::sin(double(i)));
  return {{"x", Tensor::from_vector(v, {1, 4, 8, 8})}};
}

RunComparison compare(const std::string& a, const std::string& b, const std::string& device_b = "cpu",
                      size_t memory_budget = kDefaultCheckMemory) {
  Session sa(load_onnx(fixture(a)), unfused("cpu"));
  Session sb(load_onnx(fixture(b)), unfused(device_b));
  return compare_runs(sa, sb, ramp_input(), Tolerance{}, memory_budget);
}

}  // namespace

TEST(CompareValues, ErrorsAreMaxAbsAndMaxAbsOverPeak) {
  Tensor a = Tensor::from_vector<float>({1, -4, 0, 2}, {4});
  Tensor b = Tensor::from_vector<float>({1, -4, 0.5f, 2.25f}, {4});
  ValueDiff d = compare_values(a, b);
  EXPECT_TRUE(d.comparable);
  EXPECT_DOUBLE_EQ(d.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(d.peak_a, 4);
  EXPECT_DOUBLE_EQ(d.max_rel, 0.125);
  EXPECT_FALSE(within(d, Tolerance{}));
  EXPECT_TRUE(within(d, Tolerance{.atol = 0, .rtol = 0.125}));
  EXPECT_TRUE(within(compare_values(a, a), Tolerance{.atol = 0, .rtol = 0}));
}

TEST(CompareValues, NanOnOneSideIsInfiniteAndOnBothIsEqual) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = Tensor::from_vector<float>({nan, 1}, {2});
  ValueDiff same = compare_values(a, Tensor::from_vector<float>({nan, 1}, {2}));
  EXPECT_EQ(same.max_abs, 0);
  EXPECT_TRUE(same.nan_a && same.nan_b);
  ValueDiff one = compare_values(Tensor::from_vector<float>({0, 1}, {2}), a);
  EXPECT_TRUE(std::isinf(one.max_abs));
  EXPECT_TRUE(one.nan_b && !one.nan_a);
  EXPECT_FALSE(within(one, Tolerance{}));
}

TEST(CompareValues, ShapeOrDtypeMismatchIsNotComparable) {
  Tensor a = Tensor::zeros(DType::f32, {2, 2});
  ValueDiff shape = compare_values(a, Tensor::zeros(DType::f32, {4}));
  EXPECT_FALSE(shape.comparable);
  EXPECT_FALSE(within(shape, Tolerance{}));
  ValueDiff dtype = compare_values(a, Tensor::zeros(DType::f64, {2, 2}));
  EXPECT_FALSE(dtype.comparable);
}

TEST(CompareRuns, PlantedFaultIsTheFirstNodeOutOfTolerance) {
  RunComparison c = compare("base", "shift_fault");
  ASSERT_EQ(c.rows.size(), 6u);
  std::vector<std::string> order;
  for (auto& r : c.rows) order.push_back(r.node);
  EXPECT_EQ(order, (std::vector<std::string>{"conv", "relu", "mul", "add", "gap", "flatten"}));
  ASSERT_EQ(c.first_over, 3);
  EXPECT_EQ(c.rows[3].op_type, "Add");
  EXPECT_EQ(c.rows[3].value, "add_out");
  EXPECT_NEAR(c.rows[3].diff.max_abs, 0.5, 1e-6);
  for (int i = 0; i < 3; i++) EXPECT_EQ(c.rows[size_t(i)].diff.max_abs, 0) << c.rows[size_t(i)].node;
  std::vector<size_t> worst = c.worst(10);
  ASSERT_EQ(worst.size(), 6u);
  EXPECT_GT(c.rows[worst[0]].diff.max_rel, 0);
  EXPECT_EQ(c.rows[worst.back()].diff.max_rel, 0);
}

// The first run's values past the memory budget wait in a temporary file: with no budget, or one
// that holds some of them, every row is the one held all in memory gives.
TEST(CompareRuns, ValuesPastTheMemoryBudgetComeBackFromATemporaryFile) {
  RunComparison held = compare("base", "shift_fault");
  for (size_t budget : {size_t(0), size_t(1024)}) {
    SCOPED_TRACE(budget);
    RunComparison spilled = compare("base", "shift_fault", "cpu", budget);
    ASSERT_EQ(spilled.rows.size(), held.rows.size());
    EXPECT_EQ(spilled.first_over, held.first_over);
    EXPECT_EQ(spilled.only_a, held.only_a);
    for (size_t i = 0; i < held.rows.size(); i++) {
      EXPECT_EQ(spilled.rows[i].value, held.rows[i].value);
      EXPECT_EQ(spilled.rows[i].diff.max_abs, held.rows[i].diff.max_abs) << held.rows[i].value;
      EXPECT_EQ(spilled.rows[i].diff.peak_a, held.rows[i].diff.peak_a) << held.rows[i].value;
    }
  }
}

// A temporary folder that cannot take the file is an error that says what to do.
TEST(CompareRuns, AnUnwritableTemporaryFolderIsAClearError) {
  const char* before = std::getenv("TMPDIR");
  std::string saved = before ? before : "";
  setenv("TMPDIR", "/nonexistent-folder-for-vlrt-check", 1);
  try {
    compare("base", "shift_fault", "cpu", 0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("set TMPDIR to a writable folder"), std::string::npos) << e.what();
  }
  if (before)
    setenv("TMPDIR", saved.c_str(), 1);
  else
    unsetenv("TMPDIR");
}

TEST(CompareRuns, IdenticalModelsHaveNoError) {
  RunComparison c = compare("base", "base");
  ASSERT_EQ(c.rows.size(), 6u);
  EXPECT_EQ(c.first_over, -1);
  for (auto& r : c.rows) {
    EXPECT_TRUE(r.within) << r.node;
    EXPECT_EQ(r.diff.max_abs, 0) << r.node;
    EXPECT_EQ(r.device_a, "cpu");
    EXPECT_EQ(r.device_b, "cpu");
  }
  EXPECT_EQ(c.only_a + c.only_b + c.non_tensor_skipped, 0u);
}

TEST(CompareRuns, ShapeMismatchIsARowNotAnError) {
  RunComparison c = compare("base", "shift_shape");
  ASSERT_EQ(c.rows.size(), 6u);
  ASSERT_EQ(c.first_over, 3);
  const ValueDiff& d = c.rows[3].diff;
  EXPECT_FALSE(d.comparable);
  EXPECT_EQ(d.shape_a, (Shape{1, 4, 8, 8}));
  EXPECT_EQ(d.shape_b, (Shape{2, 4, 8, 8}));
}

TEST(CompareRuns, NoSharedNamesIsCountedBeforeRunning) {
  EXPECT_EQ(shared_value_names(load_onnx(fixture("base")).graph, load_onnx(fixture("renamed")).graph), 0u);
  EXPECT_EQ(shared_value_names(load_onnx(fixture("base")).graph, load_onnx(fixture("shift_fault")).graph),
            6u);
}

TEST(ValueObserver, SeesEveryNodeOutputUntilCleared) {
  Session sa(load_onnx(fixture("base")), unfused("cpu"));
  size_t seen = 0;
  sa.executor().set_value_observer([&](const Node&, const std::string&, const Tensor&) { seen++; });
  sa.run(ramp_input());
  EXPECT_EQ(seen, 6u);
  sa.executor().set_value_observer(nullptr);
  sa.run(ramp_input());
  EXPECT_EQ(seen, 6u);
}

TEST(CompareRuns, CpuAndOpenClAgreeOnASmallModel) {
  try {
    create_backend(parse_device("opencl:0"), 1);
  } catch (const Error& e) {
    GTEST_SKIP() << "no OpenCL device: " << e.what();
  }
  RunComparison c = compare("base", "base", "opencl:0");
  ASSERT_EQ(c.rows.size(), 6u);
  EXPECT_EQ(c.first_over, -1);
  size_t on_opencl = 0;
  for (auto& r : c.rows) {
    EXPECT_TRUE(r.within) << r.node << " max abs " << r.diff.max_abs;
    on_opencl += r.device_b == "opencl:0";
  }
  EXPECT_GT(on_opencl, 0u);
}

}  // namespace vlrt
