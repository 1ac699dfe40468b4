#include <gtest/gtest.h>

#include <fstream>

#include "cli_util.h"
#include "io/npy.h"

namespace vlrt {

TEST(Npy, RoundTripTypesAndShapes) {
  std::string dir = test::temp_dir("npy");
  Tensor a = Tensor::from_vector<float>({1.5f, -2, 3, 4, 5, 6}, {2, 3});
  write_npy(dir + "/a.npy", a);
  Tensor b = read_npy(dir + "/a.npy");
  EXPECT_EQ(b.describe(), "float32[2,3]");
  EXPECT_EQ(b.data<float>()[0], 1.5f);
  Tensor s = Tensor::scalar<int64_t>(42);
  write_npy(dir + "/s.npy", s);
  EXPECT_EQ(read_npy(dir + "/s.npy").describe(), "int64[]");
  Tensor v = Tensor::from_vector<bool>({true, false, true}, {3});
  write_npy(dir + "/v.npy", v);
  EXPECT_EQ(read_npy(dir + "/v.npy").data<bool>()[2], true);
}

TEST(Npy, ReadsNumpyWrittenFile) {
  Tensor t = read_npy(test::source_path("models/tiny/image.npy"));
  EXPECT_EQ(t.describe(), "float32[1,3,32,32]");
}

TEST(Npy, TruncatedFileIsAnError) {
  std::string dir = test::temp_dir("npy_bad");
  Tensor a = Tensor::zeros(DType::f32, {100});
  write_npy(dir + "/a.npy", a);
  std::string bytes;
  {
    std::ifstream f(dir + "/a.npy", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  std::ofstream(dir + "/cut.npy", std::ios::binary).write(bytes.data(), 200);
  try {
    read_npy(dir + "/cut.npy");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  std::ofstream(dir + "/text.npy") << "hello";
  EXPECT_THROW(read_npy(dir + "/text.npy"), Error);
}

}  // namespace vlrt
