// The ONNX loader: the protobuf wire format of a ModelProto (graphs, subgraphs in attributes,
// initializers, external-data references, which resolve beside the model in a scratch folder
// holding the data file of the seed ext_affine.onnx), and a lone TensorProto as the test suite's .pb files hold it.
#include "fuzz_util.h"
#include "load/onnx_loader.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vlrt::fuzz::write_scratch("ext_affine.weights", std::string(256, '\x01'));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes = vlrt::fuzz::bytes_of(data, size);
  try {
    vlrt::Model m = vlrt::load_onnx(vlrt::fuzz::write_scratch("model.onnx", bytes));
    (void)m.graph.nodes.size();
  } catch (const vlrt::Error&) {
  }
  try {
    (void)vlrt::external_data_files(vlrt::fuzz::scratch_dir() + "/model.onnx");
  } catch (const vlrt::Error&) {
  }
  try {
    (void)vlrt::parse_tensor_proto(std::string(bytes), vlrt::fuzz::scratch_dir());
  } catch (const vlrt::Error&) {
  }
  return 0;
}
