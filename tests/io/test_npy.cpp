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

// A .npy header as NumPy writes it (version 1), then `data`.
std::string npy_bytes(const std::string& header, const std::string& data = "") {
  std::string h = header + "\n";
  return std::string("\x93NUMPY\x01\x00", 8) + char(h.size() & 0xff) + char(h.size() >> 8) + h + data;
}

std::string npy_error(const std::string& bytes) {
  try {
    parse_npy(bytes, "x.npy");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Npy, HugeDeclaredShapeIsRefusedBeforeAllocating) {
  std::string msg = npy_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 2000000000), }"));
  EXPECT_NE(msg.find("x.npy: the header declares float32 of shape [4000000000,2000000000] but 0 bytes"),
            std::string::npos) << msg;
}

TEST(Npy, ShapeThatIsNotSizesIsAnError) {
  for (const char* shape : {"(-3,)", "(2, x)", "(99999999999999999999,)", "(1e3,)"}) {
    std::string msg = npy_error(npy_bytes(std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") + shape + "}"));
    EXPECT_NE(msg.find("is not a size"), std::string::npos) << shape << ": " << msg;
  }
}

TEST(Npy, HeaderFieldWithoutValueOrEndIsAnError) {
  EXPECT_NE(npy_error(npy_bytes("{'descr'")).find("no value for 'descr'"), std::string::npos);
  EXPECT_NE(npy_error(npy_bytes("{'descr': '<f4")).find("'descr' has no end"), std::string::npos);
  EXPECT_NE(npy_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,")).find("'shape' has no end"),
            std::string::npos);
}

// An empty array whose other dims multiply past 64 bits (found by fuzz/npy_fuzzer: the element
// count overflowed while the data's size, 0, matched).
TEST(Npy, EmptyShapeWhoseOtherDimsOverflowIsRefused) {
  std::string msg = npy_error(npy_bytes(
      "{'descr': '|b1', 'fortran_order': False, 'shape': (3, 6582265, 82, 65820, 56582, 82, 0), }"));
  EXPECT_NE(msg.find("x.npy: .npy shape [3,6582265,82,65820,56582,82,0] has more elements than 64 bits count"),
            std::string::npos) << msg;
}

TEST(Npy, ParsesBytesWithZeroSizedDimension) {
  Tensor t = parse_npy(npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 5), }"), "x.npy");
  EXPECT_EQ(t.describe(), "int64[0,5]");
}

}  // namespace vlrt
