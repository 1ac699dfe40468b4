#include "integrity/load_model.h"

#include <cmath>

#include "integrity/manifest.h"
#include "load/onnx_loader.h"

namespace vlrt {

namespace {

// f16 and bf16 are stored as raw bits: all-ones exponent means Inf or NaN.
bool all_non_finite(const Tensor& t) {
  const int64_t n = t.numel();
  auto all = [n](auto&& non_finite) {
    for (int64_t i = 0; i < n; i++)
      if (!non_finite(i)) return false;
    return true;
  };
  switch (t.dtype()) {
    case DType::f32:
      return all([p = t.data<float>()](int64_t i) { return !std::isfinite(p[i]); });
    case DType::f64:
      return all([p = t.data<double>()](int64_t i) { return !std::isfinite(p[i]); });
    case DType::f16: {
      auto p = static_cast<const uint16_t*>(t.raw());
      return all([p](int64_t i) { return (p[i] & 0x7c00) == 0x7c00; });
    }
    case DType::bf16: {
      auto p = static_cast<const uint16_t*>(t.raw());
      return all([p](int64_t i) { return (p[i] & 0x7f80) == 0x7f80; });
    }
    default:
      return false;
  }
}

}  // namespace

void check_initializers_finite(const Model& model) {
  for (auto& [name, t] : model.graph.initializers) {
    if (t.numel() < 2 || !all_non_finite(t)) continue;
    fail(model.path, ": initializer '", name, "' ", t.describe(),
         " holds only NaN/Inf values: the weights are ",
         "corrupted or the export failed (e.g. an fp16 overflow). Export or download the model again and "
         "check "
         "it with `vlrt verify`");
  }
}

Model load_model(const std::string& path, const LoadOptions& options) {
  VerifyReport report = verify_manifest(path, options.verify_hash);
  if (!report.ok()) fail(path, ": ", report.problems());
  Model m = load_onnx(path);
  check_initializers_finite(m);
  return m;
}

}  // namespace vlrt
