#include "serve/request.h"

#include <algorithm>
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

// The binary part of a request body, handed to the inputs that give a binary_data_size in
// the order they are listed.
class BinaryData {
 public:
  explicit BinaryData(std::string_view data) : rest_(data) {}
  std::string_view take(const std::string& input, size_t n) {
    if (n > rest_.size())
      refuse(400, "input '", input, "': binary_data_size ", n, " runs past the end of the body (",
             rest_.size(), " bytes of binary data left after the JSON header)");
    std::string_view part = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return part;
  }
  size_t left() const { return rest_.size(); }

 private:
  std::string_view rest_;
};

uint32_t read_u32_le(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | uint8_t(p[i]);
  return v;
}

void append_u32_le(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; i++) out += char((v >> (8 * i)) & 0xff);
}

// BYTES elements in the binary form: each a 4-byte little-endian length and its bytes.
std::vector<std::string> bytes_elements(const std::string& input, std::string_view data, int64_t numel) {
  std::vector<std::string> elements;
  while (!data.empty()) {
    if (data.size() < 4 || read_u32_le(data.data()) > data.size() - 4)
      refuse(400, "input '", input, "': BYTES element ", elements.size(),
             " runs past its binary_data_size; each element is a 4-byte little-endian length and its bytes");
    uint32_t n = read_u32_le(data.data());
    elements.emplace_back(data.substr(4, n));
    data.remove_prefix(4 + size_t(n));
  }
  if (int64_t(elements.size()) != numel)
    refuse(400, "input '", input, "': binary data holds ", elements.size(),
           " BYTES elements but its shape needs ", numel);
  return elements;
}

// The binary_data_size of an input's parameters, or npos when it has none.
size_t binary_data_size(const json& in, const std::string& name) {
  auto params = in.find("parameters");
  if (params == in.end()) return std::string::npos;
  if (!params->is_object())
    refuse(400, "input '", name, "': parameters is JSON ", params->type_name(), "; expected an object");
  auto size = params->find("binary_data_size");
  if (size == params->end()) return std::string::npos;
  if (!size->is_number_unsigned())
    refuse(400, "input '", name, "': binary_data_size is ", size->dump().substr(0, 40),
           "; expected a non-negative integer");
  return size->get<size_t>();
}

// One input: a numeric tensor into `tensors` or a BYTES tensor into `bytes`.
void parse_tensor(const json& in, size_t index, BinaryData& binary, TensorMap& tensors,
                  std::map<std::string, BytesTensor>& bytes) {
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
  if (tensors.count(name) || bytes.count(name)) refuse(400, "input '", name, "' is given twice");
  const json& dt_v = field("datatype");
  if (!dt_v.is_string())
    refuse(400, "input '", name, "': datatype is JSON ", dt_v.type_name(), "; expected a string");
  bool is_bytes = dt_v.get<std::string>() == "BYTES";
  DType dt = dtype_from_kserve(dt_v.get<std::string>());
  if (dt == DType::undefined && !is_bytes)
    refuse(400, "input '", name, "': datatype '", dt_v.get<std::string>().substr(0, 40),
           "' is not supported; expected one of BOOL, INT8..INT64, UINT8..UINT64, FP16, FP32, FP64, BF16, "
           "BYTES");
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

  size_t binary_size = binary_data_size(in, name);
  if (binary_size != std::string::npos) {
    if (in.contains("data"))
      refuse(400, "input '", name, "' has both 'data' and parameters.binary_data_size; give one");
    std::string_view data = binary.take(name, binary_size);
    if (is_bytes) {
      bytes[name] = {shape, bytes_elements(name, data, numel)};
      return;
    }
    size_t expected = size_t(numel) * dtype_size(dt);
    if (binary_size != expected)
      refuse(400, "input '", name, "': binary_data_size is ", binary_size, " bytes but shape ",
             shape_str(shape), " of ", dt_v.get<std::string>(), " needs ", expected);
    Tensor t(dt, shape);
    std::memcpy(t.raw(), data.data(), expected);
    if (dt == DType::boolean)
      for (size_t i = 0; i < expected; i++)
        if (uint8_t(data[i]) > 1) refuse(400, "input '", name, "': BOOL byte ", i, " is neither 0 nor 1");
    tensors[name] = std::move(t);
    return;
  }

  const json& data_v = field("data");
  if (!data_v.is_array())
    refuse(400, "input '", name, "': data is JSON ", data_v.type_name(), "; expected an array");
  std::vector<const json*> flat;
  flatten(data_v, flat, 0);
  if (int64_t(flat.size()) != numel)
    refuse(400, "input '", name, "': data has ", flat.size(), " elements but shape ", shape_str(shape),
           " needs ", numel);
  if (is_bytes) {
    BytesTensor b{shape, {}};
    for (size_t i = 0; i < flat.size(); i++) {
      if (!flat[i]->is_string())
        refuse(400, "input '", name, "': data[", i, "] is JSON ", flat[i]->type_name(),
               "; BYTES expects a string");
      b.elements.push_back(flat[i]->get<std::string>());
    }
    bytes[name] = std::move(b);
    return;
  }
  Tensor t(dt, shape);
  if (dt == DType::f16 || dt == DType::bf16) {
    auto* p = static_cast<uint16_t*>(t.raw());
    for (size_t i = 0; i < flat.size(); i++) {
      float f = element<float>(*flat[i], name, i, dt);
      p[i] = dt == DType::f16 ? float_to_half(f) : float_to_bf16(f);
    }
  } else {
    dispatch_all(dt, [&]<class T>() {
      T* p = t.data<T>();
      for (size_t i = 0; i < flat.size(); i++) p[i] = element<T>(*flat[i], name, i, dt);
    });
  }
  tensors[name] = std::move(t);
}

// Whether an output's parameters ask for binary data: Triton's binary_data, or binary_data_output.
bool wants_binary(const json& output, const std::string& name) {
  auto params = output.find("parameters");
  if (params == output.end()) return false;
  if (!params->is_object()) refuse(400, "output '", name, "': parameters must be an object");
  if (params->contains("classification"))
    refuse(400, "output '", name, "': the classification extension is not supported; ask for the tensor");
  for (const char* key : {"binary_data", "binary_data_output"}) {
    auto it = params->find(key);
    if (it == params->end()) continue;
    if (!it->is_boolean()) refuse(400, "output '", name, "': ", key, " must be true or false");
    if (it->get<bool>()) return true;
  }
  return false;
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

InferRequest parse_infer_request(std::string_view body, size_t json_length) {
  std::string_view header = body, binary_part;
  if (json_length != std::string::npos) {
    if (json_length > body.size())
      refuse(400, "Inference-Header-Content-Length is ", json_length, " but the body has only ", body.size(),
             " bytes");
    header = body.substr(0, json_length);
    binary_part = body.substr(json_length);
  }
  json j = parse_json_object(header);
  InferRequest r;
  BinaryData binary(binary_part);
  for (auto& [key, v] : j.items()) {
    if (key == "id") {
      if (!v.is_string()) refuse(400, "'id' is JSON ", v.type_name(), "; expected a string");
      r.id = v.get<std::string>().substr(0, 256);
    } else if (key == "inputs") {
      if (!v.is_array()) refuse(400, "'inputs' is JSON ", v.type_name(), "; expected an array of tensors");
      for (size_t i = 0; i < v.size(); i++) parse_tensor(v[i], i, binary, r.inputs, r.bytes_inputs);
    } else if (key == "outputs") {
      if (!v.is_array())
        refuse(400, "'outputs' is JSON ", v.type_name(), "; expected an array of {\"name\": ...}");
      for (auto& o : v) {
        if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
          refuse(400, "'outputs' entries must be objects with a string 'name'");
        std::string name = o["name"].get<std::string>().substr(0, 200);
        r.outputs.push_back({name, wants_binary(o, name)});
      }
    } else if (key == "parameters") {
      if (!v.is_object()) refuse(400, "'parameters' is JSON ", v.type_name(), "; expected an object");
      r.parameters = v;
      auto b = v.find("binary_data_output");
      if (b != v.end()) {
        if (!b->is_boolean()) refuse(400, "parameters.binary_data_output must be true or false");
        r.binary_outputs = b->get<bool>();
      }
    } else {
      refuse(400, "unknown field '", key.substr(0, 64), "'; expected id, inputs, outputs, parameters");
    }
  }
  if (!j.contains("inputs")) refuse(400, "missing field 'inputs'");
  if (binary.left() > 0)
    refuse(400, "the body has ", binary.left(),
           " bytes after the JSON header that no input's binary_data_size accounts for");
  return r;
}

void check_output_names(const InferRequest& request, const std::vector<std::string>& names) {
  for (auto& o : request.outputs) {
    if (std::find(names.begin(), names.end(), o.name) != names.end()) continue;
    std::string list;
    for (auto& n : names) list += (list.empty() ? "" : ", ") + n;
    refuse(400, "unknown output '", o.name, "'; the model's outputs are ", list);
  }
}

InferReply infer_response(const std::string& model_name, const InferRequest& request,
                          const InferOutputs& outputs) {
  std::vector<RequestedOutput> wanted = request.outputs;
  if (wanted.empty())
    for (auto& name : outputs.names) wanted.push_back({name, request.binary_outputs});
  json j = {{"model_name", model_name}, {"model_version", "1"}, {"outputs", json::array()}};
  if (!request.id.empty()) j["id"] = request.id;
  std::string binary;
  for (auto& [name, as_binary] : wanted) {
    json out = {{"name", name}};
    size_t before = binary.size();
    auto bytes = outputs.bytes.find(name);
    if (bytes != outputs.bytes.end()) {
      out["datatype"] = "BYTES";
      out["shape"] = bytes->second.shape;
      if (as_binary) {
        for (auto& e : bytes->second.elements) {
          append_u32_le(binary, uint32_t(e.size()));
          binary += e;
        }
      } else {
        out["data"] = bytes->second.elements;
      }
    } else {
      const Tensor& t = outputs.tensors.at(name);
      std::string dt = kserve_datatype(t.dtype());
      out["datatype"] = dt.empty() ? dtype_name(t.dtype()) : dt;
      out["shape"] = t.shape();
      if (as_binary)
        binary.append(static_cast<const char*>(t.raw()), t.nbytes());
      else
        out["data"] = tensor_data(t);
    }
    if (as_binary) out["parameters"] = {{"binary_data_size", binary.size() - before}};
    j["outputs"].push_back(std::move(out));
  }
  InferReply reply;
  reply.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  bool any_binary = std::any_of(wanted.begin(), wanted.end(), [](auto& o) { return o.binary; });
  if (any_binary) {
    reply.json_length = reply.body.size();
    reply.body += binary;
  }
  return reply;
}

json model_metadata(const std::string& name, const Model& model) {
  json j = {{"name", name},
            {"versions", {"1"}},
            {"platform", "onnxruntime_onnx"},
            {"inputs", json::array()},
            {"outputs", json::array()}};
  for (auto& d : model.graph.inputs) j["inputs"].push_back(decl_json(d));
  for (auto& d : model.graph.outputs) j["outputs"].push_back(decl_json(d));
  return j;
}

json model_config(const std::string& name, const Model& model) {
  auto tensors = [](const std::vector<ValueDecl>& decls) {
    json list = json::array();
    for (auto& d : decls) {
      json dims = json::array();
      for (auto& dim : d.dims) dims.push_back(dim.value >= 0 ? dim.value : -1);
      std::string dt = kserve_datatype(d.dtype);
      list.push_back(
          {{"name", d.name}, {"data_type", dt.empty() ? "TYPE_INVALID" : "TYPE_" + dt}, {"dims", dims}});
    }
    return list;
  };
  return {{"name", name},
          {"platform", "onnxruntime_onnx"},
          {"backend", "vlrt"},
          {"version_policy", {{"latest", {{"num_versions", 1}}}}},
          {"max_batch_size", 0},
          {"input", tensors(model.graph.inputs)},
          {"output", tensors(model.graph.outputs)}};
}

}  // namespace vlrt::serve
