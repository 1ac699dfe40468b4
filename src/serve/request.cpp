#include "serve/request.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/dispatch.h"

namespace vlrt::serve {

using nlohmann::json;

namespace {

constexpr int64_t kMaxElements = int64_t(1) << 32;

const std::pair<DType, const char*> kDatatypes[] = {
    {DType::boolean, "BOOL"}, {DType::u8, "UINT8"}, {DType::u16, "UINT16"}, {DType::u32, "UINT32"},
    {DType::u64, "UINT64"},   {DType::i8, "INT8"},  {DType::i16, "INT16"},  {DType::i32, "INT32"},
    {DType::i64, "INT64"},    {DType::f16, "FP16"}, {DType::f32, "FP32"},   {DType::f64, "FP64"},
    {DType::bf16, "BF16"}};

// Appends the leaves of nested arrays in row-major order.
void flatten(const json& v, std::vector<const json*>& out, int depth) {
  if (!v.is_array()) {
    out.push_back(&v);
    return;
  }
  if (depth > 16) refuse(400, "'data' is nested deeper than 16 levels");
  for (auto& e : v) flatten(e, out, depth + 1);
}

template <class T>
T element(const json& v, const std::string& input, size_t i, DType dt) {
  auto bad = [&](const char* expected) -> T {
    refuse(400, "input '", input, "': data[", i, "] is ", v.is_string() ? "a string" : v.type_name(), " ",
           v.dump().substr(0, 40), "; ", kserve_datatype(dt), " expects ", expected);
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number_integer() && (v.get<int64_t>() == 0 || v.get<int64_t>() == 1))
      return v.get<int64_t>() == 1;
    return bad("true or false");
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return bad("a number");
    return T(v.get<double>());
  } else {
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > uint64_t(std::numeric_limits<T>::max())) return bad("an integer in its range");
      return T(u);
    }
    if (v.is_number_integer()) {
      int64_t s = v.get<int64_t>();
      if (s < int64_t(std::numeric_limits<T>::min()) ||
          (s > 0 && uint64_t(s) > uint64_t(std::numeric_limits<T>::max())))
        return bad("an integer in its range");
      return T(s);
    }
    return bad("an integer");
  }
}

Tensor parse_tensor(const json& in, size_t index) {
  if (!in.is_object()) refuse(400, "inputs[", index, "] is JSON ", in.type_name(), "; expected an object");
  auto field = [&](const char* key) -> const json& {
    auto it = in.find(key);
    if (it == in.end()) refuse(400, "inputs[", index, "] has no '", key, "'");
    return *it;
  };
  const json& name_v = field("name");
  if (!name_v.is_string())
    refuse(400, "inputs[", index, "].name is JSON ", name_v.type_name(), "; expected a string");
  std::string name = name_v.get<std::string>().substr(0, 200);
  const json& dt_v = field("datatype");
  if (!dt_v.is_string())
    refuse(400, "input '", name, "': datatype is JSON ", dt_v.type_name(), "; expected a string");
  DType dt = dtype_from_kserve(dt_v.get<std::string>());
  if (dt == DType::undefined)
    refuse(400, "input '", name, "': datatype '", dt_v.get<std::string>().substr(0, 40),
           "' is not supported; expected one of BOOL, INT8..INT64, UINT8..UINT64, FP16, FP32, FP64, BF16");
  const json& shape_v = field("shape");
  if (!shape_v.is_array())
    refuse(400, "input '", name, "': shape is JSON ", shape_v.type_name(), "; expected an array");
  if (shape_v.size() > 8) refuse(400, "input '", name, "': shape has rank ", shape_v.size(), "; at most 8");
  Shape shape;
  int64_t numel = 1;
  for (auto& d : shape_v) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      refuse(400, "input '", name, "': shape ", shape_v.dump().substr(0, 80),
             " has a dimension that is not a ", "non-negative integer");
    shape.push_back(d.get<int64_t>());
    if (shape.back() > 0 && numel > kMaxElements / shape.back())
      refuse(400, "input '", name, "': shape ", shape_v.dump().substr(0, 80), " has too many elements");
    numel *= shape.back();
  }
  const json& data_v = field("data");
  if (!data_v.is_array())
    refuse(400, "input '", name, "': data is JSON ", data_v.type_name(), "; expected an array");
  std::vector<const json*> flat;
  flatten(data_v, flat, 0);
  if (int64_t(flat.size()) != numel)
    refuse(400, "input '", name, "': data has ", flat.size(), " elements but shape ", shape_str(shape),
           " needs ", numel);
  Tensor t(dt, shape);
  if (dt == DType::f16 || dt == DType::bf16) {
    auto* p = static_cast<uint16_t*>(t.raw());
    for (size_t i = 0; i < flat.size(); i++) {
      float f = element<float>(*flat[i], name, i, dt);
      p[i] = dt == DType::f16 ? float_to_half(f) : float_to_bf16(f);
    }
    return t;
  }
  dispatch_all(dt, [&]<class T>() {
    T* p = t.data<T>();
    for (size_t i = 0; i < flat.size(); i++) p[i] = element<T>(*flat[i], name, i, dt);
  });
  return t;
}

json tensor_data(const Tensor& t) {
  json data = json::array();
  auto& arr = data.get_ref<json::array_t&>();
  arr.reserve(size_t(t.numel()));
  if (t.dtype() == DType::f16 || t.dtype() == DType::bf16) {
    auto* p = static_cast<const uint16_t*>(t.raw());
    for (int64_t i = 0; i < t.numel(); i++) {
      float f = t.dtype() == DType::f16 ? half_to_float(p[i]) : bf16_to_float(p[i]);
      arr.emplace_back(std::isfinite(f) ? json(f) : json(nullptr));
    }
    return data;
  }
  dispatch_all(t.dtype(), [&]<class T>() {
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); i++) {
      if constexpr (std::is_floating_point_v<T>) {
        arr.emplace_back(std::isfinite(p[i]) ? json(p[i]) : json(nullptr));  // JSON has no inf/NaN
      } else {
        arr.emplace_back(p[i]);
      }
    }
  });
  return data;
}

json decl_json(const ValueDecl& d) {
  json shape = json::array();
  for (auto& dim : d.dims) shape.push_back(dim.value >= 0 ? dim.value : -1);
  std::string dt = kserve_datatype(d.dtype);
  return {{"name", d.name}, {"datatype", dt.empty() ? dtype_name(d.dtype) : dt}, {"shape", shape}};
}

}  // namespace

std::string kserve_datatype(DType t) {
  for (auto& [d, n] : kDatatypes)
    if (d == t) return n;
  return "";
}

DType dtype_from_kserve(const std::string& name) {
  for (auto& [d, n] : kDatatypes)
    if (name == n) return d;
  return DType::undefined;
}

InferRequest parse_infer_request(const std::string& body, const Model& model) {
  json j = parse_json_object(body);
  InferRequest r;
  for (auto& [key, v] : j.items()) {
    if (key == "id") {
      if (!v.is_string()) refuse(400, "'id' is JSON ", v.type_name(), "; expected a string");
      r.id = v.get<std::string>().substr(0, 256);
    } else if (key == "inputs") {
      if (!v.is_array()) refuse(400, "'inputs' is JSON ", v.type_name(), "; expected an array of tensors");
      for (size_t i = 0; i < v.size(); i++) {
        std::string name = v[i].is_object() && v[i].contains("name") && v[i]["name"].is_string()
                               ? v[i]["name"].get<std::string>()
                               : "";
        if (r.inputs.count(name)) refuse(400, "input '", name.substr(0, 200), "' is given twice");
        r.inputs[name] = parse_tensor(v[i], i);
      }
    } else if (key == "outputs") {
      if (!v.is_array())
        refuse(400, "'outputs' is JSON ", v.type_name(), "; expected an array of {\"name\": ...}");
      for (auto& o : v) {
        if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
          refuse(400, "'outputs' entries must be objects with a string 'name'");
        std::string name = o["name"].get<std::string>();
        bool known = false;
        std::string names;
        for (auto& d : model.graph.outputs) {
          known = known || d.name == name;
          names += (names.empty() ? "" : ", ") + d.name;
        }
        if (!known)
          refuse(400, "unknown output '", name.substr(0, 200), "'; the model's outputs are ", names);
        r.outputs.push_back(name);
      }
    } else if (key != "parameters") {
      refuse(400, "unknown field '", key.substr(0, 64), "'; expected id, inputs, outputs, parameters");
    }
  }
  if (!j.contains("inputs")) refuse(400, "missing field 'inputs'");
  return r;
}

json infer_response(const std::string& model_name, const std::string& id, const TensorMap& outputs,
                    const std::vector<std::string>& names) {
  json j = {{"model_name", model_name}, {"outputs", json::array()}};
  if (!id.empty()) j["id"] = id;
  for (auto& name : names) {
    const Tensor& t = outputs.at(name);
    std::string dt = kserve_datatype(t.dtype());
    j["outputs"].push_back({{"name", name},
                            {"datatype", dt.empty() ? dtype_name(t.dtype()) : dt},
                            {"shape", t.shape()},
                            {"data", tensor_data(t)}});
  }
  return j;
}

json model_metadata(const std::string& name, const Model& model) {
  json j = {{"name", name},
            {"versions", {"1"}},
            {"platform", "onnx"},
            {"inputs", json::array()},
            {"outputs", json::array()}};
  for (auto& d : model.graph.inputs) j["inputs"].push_back(decl_json(d));
  for (auto& d : model.graph.outputs) j["outputs"].push_back(decl_json(d));
  return j;
}

}  // namespace vlrt::serve
