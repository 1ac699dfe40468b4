#include "serve/request.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/dispatch.h"

namespace vlrt::serve {

using nlohmann::json;

namespace {

// Deeper JSON is refused while parsing, so nothing recurses on attacker-chosen depth.
constexpr int kMaxJsonDepth = 64;
constexpr int64_t kMaxElements = int64_t(1) << 32;

json parse_json(const std::string& body) {
  if (body.empty()) refuse(400, "the body is empty; expected a JSON object");
  json::parser_callback_t limit_depth = [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) refuse(400, "JSON nested deeper than ", kMaxJsonDepth, " levels");
    return true;
  };
  try {
    json j = json::parse(body, limit_depth);
    if (!j.is_object()) refuse(400, "the body is JSON ", j.type_name(), "; expected a JSON object");
    return j;
  } catch (const json::exception& e) {
    refuse(400, "the body is not valid JSON: ", e.what());
  }
}

float threshold(const std::string& field, double v) {
  if (!(v >= 0 && v <= 1)) refuse(400, "'", field, "' is ", v, "; expected a number between 0 and 1");
  return float(v);
}

float threshold_text(const std::string& field, const std::string& s) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || errno != 0 || end != s.c_str() + s.size())
    refuse(400, "'", field, "' is '", s.substr(0, 40), "'; expected a number between 0 and 1");
  return threshold(field, v);
}

DetectRequest parse_multipart(const httplib::Request& req) {
  DetectRequest r;
  for (auto& [name, part] : req.files) {
    if (name == "image") {
      r.image = part.content;
    } else if (name == "prompt") {
      r.prompt = part.content;
    } else if (name == "box_threshold") {
      r.box_threshold = threshold_text(name, part.content);
    } else if (name == "text_threshold") {
      r.text_threshold = threshold_text(name, part.content);
    } else {
      refuse(400, "unknown form field '", name.substr(0, 64),
             "'; expected image (a file), prompt, box_threshold, text_threshold");
    }
  }
  if (!req.has_file("image")) refuse(400, "missing form field 'image' (the image file)");
  if (!req.has_file("prompt")) refuse(400, "missing form field 'prompt', e.g. \"person . bicycle .\"");
  return r;
}

DetectRequest parse_detect_json(const std::string& body) {
  json j = parse_json(body);
  DetectRequest r;
  for (auto& [key, v] : j.items()) {
    if (key == "image") {
      if (!v.is_string()) refuse(400, "'image' is JSON ", v.type_name(), "; expected a base64 string");
      r.image = base64_decode(v.get<std::string>());
    } else if (key == "prompt") {
      if (!v.is_string()) refuse(400, "'prompt' is JSON ", v.type_name(), "; expected a string");
      r.prompt = v.get<std::string>();
    } else if (key == "box_threshold" || key == "text_threshold") {
      if (!v.is_number())
        refuse(400, "'", key, "' is JSON ", v.type_name(), "; expected a number between 0 and 1");
      (key == "box_threshold" ? r.box_threshold : r.text_threshold) = threshold(key, v.get<double>());
    } else {
      refuse(400, "unknown field '", key.substr(0, 64),
             "'; expected image, prompt, box_threshold, text_threshold");
    }
  }
  if (!j.contains("image")) refuse(400, "missing field 'image' (the image file, base64-encoded)");
  if (!j.contains("prompt")) refuse(400, "missing field 'prompt', e.g. \"person . bicycle .\"");
  return r;
}

}  // namespace

DetectRequest parse_detect_request(const httplib::Request& req) {
  if (req.is_multipart_form_data()) return parse_multipart(req);
  std::string type = req.get_header_value("Content-Type");
  if (!type.empty() && type.rfind("application/json", 0) != 0)
    refuse(415, "Content-Type '", type.substr(0, 80),
           "' is not accepted; send multipart/form-data (image, prompt) or application/json");
  return parse_detect_json(req.body);
}

std::string base64_decode(const std::string& text) {
  size_t start = 0;
  if (text.rfind("data:", 0) == 0) {
    size_t comma = text.find(',');
    if (comma == std::string::npos || text.rfind(";base64", comma) == std::string::npos)
      refuse(400, "'image' is a data URL without ';base64,'");
    start = comma + 1;
  }
  std::string out;
  out.reserve((text.size() - start) / 4 * 3 + 3);
  uint32_t acc = 0;
  int bits = 0, pad = 0;
  size_t symbols = 0;
  for (size_t i = start; i < text.size(); i++) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
      continue;
    else if (c == '=') {
      pad++;
      continue;
    } else {
      refuse(400, "'image' is not valid base64: character ", i, " is byte 0x", "0123456789abcdef"[c >> 4],
             "0123456789abcdef"[c & 15]);
    }
    if (pad) refuse(400, "'image' is not valid base64: data after '=' padding at character ", i);
    symbols++;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xff));
    }
  }
  if (symbols % 4 == 1)
    refuse(400, "'image' is not valid base64: ", symbols, " symbols is not a possible length");
  if (pad > 2 || (pad && (symbols + pad) % 4 != 0))
    refuse(400, "'image' is not valid base64: wrong '=' padding");
  return out;
}

std::string base64_encode(const std::string& bytes) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) n |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) n |= uint8_t(bytes[i + 2]);
    out += digits[(n >> 18) & 63];
    out += digits[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? digits[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? digits[n & 63] : '=';
  }
  return out;
}

namespace {

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
  json j = parse_json(body);
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
