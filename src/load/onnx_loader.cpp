#include "load/onnx_loader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unordered_set>

#include "io/files.h"
#include "load/proto_reader.h"

namespace vlrt {

namespace fs = std::filesystem;
using W = ProtoReader::WireType;

namespace {

// Where the tensors being parsed come from: the model's folder (external data lies beside it)
// and, when parsing a model file, the file itself, so large weights can be read again from it.
struct Source {
  std::string base_dir;
  const MappedFile* file = nullptr;
  std::string path;
  int graph_depth = 0;  // subgraphs (If, Loop, Scan bodies) the graph being parsed lies in
};

// Subgraphs nest at most this deep (real models nest a few levels; a file nesting thousands
// would overflow the stack of this recursive reader).
constexpr int kMaxGraphDepth = 64;

// Weights from this size up can be evicted and read again from their file (Buffer::evict).
constexpr size_t kRefillableBytes = 64 * 1024;

// Lets t's buffer be refilled from bytes [offset, offset + nbytes) of the file at path.
void refill_from(Tensor& t, const std::string& path, uint64_t offset) {
  size_t n = t.nbytes();
  if (n < kRefillableBytes) return;
  t.buffer()->refill = [path, offset, n](void* dst) { read_file_range(path, offset, dst, n); };
}

struct ExternalRef {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
};

// A StringStringEntryProto (external_data, metadata_props): key and value.
std::pair<std::string, std::string> parse_string_entry(ProtoReader r) {
  std::pair<std::string, std::string> kv;
  r.for_each_field([&](uint32_t field, W type) {
    if (field == 1) kv.first = r.read_string();
    else if (field == 2) kv.second = r.read_string();
    else r.skip(type);
  });
  return kv;
}

// An external-data offset or length: decimal digits (a file's key-value entry can hold any string).
int64_t parse_external_number(const std::string& value, const std::string& key) {
  VLRT_CHECK(!value.empty() && value.size() <= 18 && value.find_first_not_of("0123456789") == std::string::npos,
             "external data ", key, " '", value, "' is not a size");
  return std::stoll(value);
}

// The bytes a tensor of `dims` holds, checked before anything is allocated: a file can declare
// any shape, and one whose size overflows (even beside a zero dimension) is refused.
size_t declared_nbytes(DType dt, const Shape& dims, const std::string& label) {
  size_t bytes = dtype_size(dt);
  bool empty = false;
  for (int64_t d : dims) {
    VLRT_CHECK(d >= 0, label, ": negative dimension in ", shape_str(dims));
    if (d == 0) empty = true;
    else if (bytes > size_t(std::numeric_limits<int64_t>::max()) / size_t(d))
      fail(label, ": shape ", shape_str(dims), " is too large");
    else bytes *= size_t(d);
  }
  return empty ? 0 : bytes;
}

// Fills a tensor from ONNX's typed repeated fields (used when raw_data is absent).
template <class Dst, class Src> void copy_values(Tensor& t, const std::vector<Src>& v, const std::string& name) {
  VLRT_CHECK(int64_t(v.size()) == t.numel(), "initializer '", name, "' has ", v.size(), " values for shape ",
             shape_str(t.shape()));
  Dst* d = static_cast<Dst*>(t.raw());
  for (size_t i = 0; i < v.size(); i++) d[i] = static_cast<Dst>(v[i]);
}

Tensor parse_tensor(ProtoReader r, const Source& src, std::string* out_name) {
  Shape dims;
  int32_t data_type = 0;
  std::string name;
  std::string_view raw;
  bool has_raw = false;
  std::vector<float> floats;
  std::vector<int32_t> int32s;
  std::vector<int64_t> int64s;
  std::vector<double> doubles;
  std::vector<uint64_t> uint64s;
  ExternalRef ext;
  bool external = false;
  bool has_strings = false;
  r.for_each_field([&](uint32_t field, W type) {
    switch (field) {
      case 1: r.read_repeated(type, [&](ProtoReader& s) { dims.push_back(s.read_int64()); }); break;
      case 2: data_type = int32_t(r.read_varint()); break;
      case 4: r.read_repeated(type, [&](ProtoReader& s) { floats.push_back(s.read_float()); }); break;
      case 5: r.read_repeated(type, [&](ProtoReader& s) { int32s.push_back(int32_t(s.read_varint())); }); break;
      case 6: r.skip(type); has_strings = true; break;
      case 7: r.read_repeated(type, [&](ProtoReader& s) { int64s.push_back(s.read_int64()); }); break;
      case 8: name = r.read_string(); break;
      case 9: raw = r.read_bytes(); has_raw = true; break;
      case 10: r.read_repeated(type, [&](ProtoReader& s) { doubles.push_back(s.read_double()); }); break;
      case 11: r.read_repeated(type, [&](ProtoReader& s) { uint64s.push_back(s.read_varint()); }); break;
      case 13: {
        auto [key, value] = parse_string_entry(r.read_message());
        if (key == "location") ext.location = value;
        else if (key == "offset") ext.offset = parse_external_number(value, key);
        else if (key == "length") ext.length = parse_external_number(value, key);
        break;
      }
      case 14: external = r.read_varint() == 1; break;
      default: r.skip(type);
    }
  });
  if (out_name) *out_name = name;
  std::string label = name.empty() ? std::string("tensor") : cat("tensor '", name, "'");
  DType dt = dtype_from_onnx(data_type);
  if (dt == DType::string || has_strings) unsupported(label, ": string tensors are not supported");
  if (!dtype_supported(dt)) unsupported(label, ": data type ", data_type, " is not supported");
  size_t nbytes = declared_nbytes(dt, dims, label);
  size_t numel = nbytes / dtype_size(dt);

  if (external) {
    VLRT_CHECK(!ext.location.empty(), label, ": external data without a location");
    fs::path p = path_inside(src.base_dir, ext.location, label + ": external data");
    std::error_code ec;
    if (!fs::exists(p, ec))
      fail(label, ": external data file '", p.string(), "' is missing (expected beside the model)");
    int64_t fsize = int64_t(fs::file_size(p, ec));
    int64_t len = ext.length >= 0 ? ext.length : int64_t(nbytes);
    VLRT_CHECK(len == int64_t(nbytes), label, ": external data length ", len, " does not match ", dtype_name(dt),
               shape_str(dims), " (", nbytes, " bytes)");
    if (ext.offset < 0 || ext.offset > fsize - len)
      fail(label, ": external data file '", p.string(), "' is ", fsize, " bytes but the tensor needs bytes ",
           ext.offset, "..", ext.offset + len, ": the file is truncated");
    Tensor t(dt, dims);
    std::ifstream f(p, std::ios::binary);
    f.seekg(ext.offset);
    f.read(static_cast<char*>(t.raw()), std::streamsize(nbytes));
    VLRT_CHECK(f.good(), label, ": cannot read external data from '", p.string(), "'");
    refill_from(t, fs::absolute(p, ec).string(), uint64_t(ext.offset));
    return t;
  }
  if (has_raw) {
    VLRT_CHECK(raw.size() == nbytes, label, ": raw data is ", raw.size(), " bytes, ", dtype_name(dt),
               shape_str(dims), " needs ", nbytes);
    Tensor t(dt, dims);
    if (nbytes) std::memcpy(t.raw(), raw.data(), nbytes);
    std::string_view file = src.file ? src.file->bytes() : std::string_view();
    if (src.file && raw.data() >= file.data() && raw.data() + nbytes <= file.data() + file.size()) {
      refill_from(t, src.path, uint64_t(raw.data() - file.data()));
      src.file->drop(raw.data(), nbytes);  // read once: no need to keep these pages
    }
    return t;
  }
  size_t given = dt == DType::f32 ? floats.size() : dt == DType::f64 ? doubles.size() : dt == DType::i64 ? int64s.size()
               : dt == DType::u32 || dt == DType::u64 ? uint64s.size() : int32s.size();
  VLRT_CHECK(given == numel, "initializer '", name, "' has ", given, " values for shape ", shape_str(dims));
  Tensor t(dt, dims);
  switch (dt) {
    case DType::f32: copy_values<float>(t, floats, name); break;
    case DType::f64: copy_values<double>(t, doubles, name); break;
    case DType::i64: copy_values<int64_t>(t, int64s, name); break;
    case DType::i32: copy_values<int32_t>(t, int32s, name); break;
    case DType::i16: copy_values<int16_t>(t, int32s, name); break;
    case DType::i8: copy_values<int8_t>(t, int32s, name); break;
    case DType::u16: case DType::f16: case DType::bf16: copy_values<uint16_t>(t, int32s, name); break;
    case DType::u8: copy_values<uint8_t>(t, int32s, name); break;
    case DType::boolean: copy_values<bool>(t, int32s, name); break;
    case DType::u32: copy_values<uint32_t>(t, uint64s, name); break;
    case DType::u64: copy_values<uint64_t>(t, uint64s, name); break;
    default: unsupported(label, ": data type ", dtype_name(dt));
  }
  return t;
}

// A TensorShapeProto.Dimension: a size or a symbolic name.
Dim parse_dim(ProtoReader r) {
  Dim d;
  r.for_each_field([&](uint32_t field, W type) {
    if (field == 1) d.value = r.read_int64();
    else if (field == 2) d.param = r.read_string();
    else r.skip(type);
  });
  return d;
}

// A TypeProto.Tensor: the element type and, when declared, the shape.
void parse_tensor_type(ProtoReader r, ValueDecl& v) {
  r.for_each_field([&](uint32_t field, W type) {
    if (field == 1) {
      v.dtype = dtype_from_onnx(int32_t(r.read_varint()));
    } else if (field == 2) {
      v.has_shape = true;
      r.read_message().for_each_message(1, [&](ProtoReader dim) { v.dims.push_back(parse_dim(dim)); });
    } else {
      r.skip(type);
    }
  });
}

// A TypeProto: a tensor, a sequence of tensors, or an optional of either; anything else
// (maps, sequences of sequences) leaves dtype undefined.
void parse_type(ProtoReader r, ValueDecl& v, int depth = 0) {
  r.for_each_field([&](uint32_t field, W type) {
    if (field == 1) {
      parse_tensor_type(r.read_message(), v);
    } else if ((field == 4 || field == 9) && depth < 2) {  // sequence_type, optional_type: elem_type is field 1
      ValueDecl element;
      r.read_message().for_each_message(1, [&](ProtoReader t) { parse_type(t, element, depth + 1); });
      v.dtype = element.dtype;
      v.has_shape = element.has_shape;
      v.dims = element.dims;
      if (field == 4 && element.kind == ValueKind::tensor) v.kind = ValueKind::sequence;
      else if (field == 9 && element.kind == ValueKind::tensor) v.kind = ValueKind::optional_tensor;
      else if (field == 9 && element.kind == ValueKind::sequence) v.kind = ValueKind::optional_sequence;
      else v.dtype = DType::undefined;
    } else {
      r.skip(type);
      v.dtype = DType::undefined;
    }
  });
}

ValueDecl parse_value_info(ProtoReader r) {
  ValueDecl v;
  r.for_each_field([&](uint32_t field, W type) {
    if (field == 1) v.name = r.read_string();
    else if (field == 2) parse_type(r.read_message(), v);
    else r.skip(type);
  });
  return v;
}

Graph parse_graph(ProtoReader r, const Source& src);

Attribute parse_attribute(ProtoReader r, const Source& src, std::string& name) {
  Attribute a;
  Source inner = src;
  inner.graph_depth++;
  auto subgraph = [&](ProtoReader g) {
    VLRT_CHECK(inner.graph_depth <= kMaxGraphDepth, "subgraphs nested more than ", kMaxGraphDepth, " deep");
    return std::make_shared<Graph>(parse_graph(g, inner));
  };
  int32_t declared = 0;
  r.for_each_field([&](uint32_t field, W type) {
    switch (field) {
      case 1: name = r.read_string(); break;
      case 2: a.f = r.read_float(); break;
      case 3: a.i = r.read_int64(); break;
      case 4: a.s = r.read_string(); break;
      case 5: a.t = parse_tensor(r.read_message(), src, nullptr); break;
      case 6:
        a.graph = subgraph(r.read_message());
        declared = declared ? declared : 5;
        break;
      case 11:
        a.graphs.push_back(subgraph(r.read_message()));
        declared = declared ? declared : 10;
        break;
      case 7: r.read_repeated(type, [&](ProtoReader& s) { a.floats.push_back(s.read_float()); }); break;
      case 8: r.read_repeated(type, [&](ProtoReader& s) { a.ints.push_back(s.read_int64()); }); break;
      case 9: a.strings.push_back(r.read_string()); break;
      case 14: parse_type(r.read_message(), a.type); break;
      case 20: declared = int32_t(r.read_varint()); break;
      default: r.skip(type);
    }
  });
  switch (declared) {
    case 1: a.kind = Attribute::Kind::f; break;
    case 2: a.kind = Attribute::Kind::i; break;
    case 3: a.kind = Attribute::Kind::s; break;
    case 4: a.kind = Attribute::Kind::t; break;
    case 5: a.kind = Attribute::Kind::graph; break;
    case 6: a.kind = Attribute::Kind::floats; break;
    case 7: a.kind = Attribute::Kind::ints; break;
    case 8: a.kind = Attribute::Kind::strings; break;
    case 10: a.kind = Attribute::Kind::graphs; break;
    case 13: a.kind = Attribute::Kind::type; break;
    default: a.kind = Attribute::Kind::undefined;
  }
  return a;
}

Node parse_node(ProtoReader r, const Source& src) {
  Node n;
  r.for_each_field([&](uint32_t field, W type) {
    switch (field) {
      case 1: n.inputs.push_back(r.read_string()); break;
      case 2: n.outputs.push_back(r.read_string()); break;
      case 3: n.name = r.read_string(); break;
      case 4: n.op_type = r.read_string(); break;
      case 5: {
        std::string name;
        try {
          Attribute a = parse_attribute(r.read_message(), src, name);
          n.attrs[name] = std::move(a);
        } catch (const Truncated&) {
          throw;
        } catch (const Error& e) {
          rethrow_as(e, cat(n.label(), ": attribute '", name, "': ", e.what()));
        }
        break;
      }
      case 7: n.domain = r.read_string(); break;
      default: r.skip(type);
    }
  });
  if (n.domain == "ai.onnx") n.domain.clear();
  return n;
}

Graph parse_graph(ProtoReader r, const Source& src) {
  Graph g;
  std::vector<ValueDecl> declared_inputs;
  r.for_each_field([&](uint32_t field, W type) {
    switch (field) {
      case 1: g.nodes.push_back(parse_node(r.read_message(), src)); break;
      case 5: {
        std::string name;
        Tensor t = parse_tensor(r.read_message(), src, &name);
        g.initializers[name] = std::move(t);
        break;
      }
      case 11: declared_inputs.push_back(parse_value_info(r.read_message())); break;
      case 12: g.outputs.push_back(parse_value_info(r.read_message())); break;
      case 13: g.value_infos.push_back(parse_value_info(r.read_message())); break;
      case 15: unsupported("sparse initializers are not supported");
      default: r.skip(type);
    }
  });
  // Before IR version 4 initializers were also listed as inputs; they are not runtime inputs.
  for (auto& v : declared_inputs)
    if (!g.initializers.count(v.name)) g.inputs.push_back(std::move(v));
  int unnamed = 0;
  for (auto& n : g.nodes)
    if (n.name.empty()) n.name = cat(n.op_type, "_", unnamed++);
  return g;
}

// An OperatorSetIdProto: the domain ("" for the default one, however written) and its version.
std::pair<std::string, int64_t> parse_opset(ProtoReader r) {
  std::pair<std::string, int64_t> op{"", 0};
  r.for_each_field([&](uint32_t field, W type) {
    if (field == 1) op.first = r.read_string();
    else if (field == 2) op.second = r.read_int64();
    else r.skip(type);
  });
  if (op.first == "ai.onnx") op.first.clear();
  return op;
}

// Adds a TensorProto's external-data location to `out`, once.
void scan_tensor_locations(ProtoReader r, std::vector<std::string>& out) {
  r.for_each_message(13, [&](ProtoReader entry) {
    auto [key, value] = parse_string_entry(entry);
    if (key == "location" && std::find(out.begin(), out.end(), value) == out.end()) out.push_back(value);
  });
}

// Walks initializers and tensor attributes, subgraphs included.
void scan_graph_locations(ProtoReader r, std::vector<std::string>& out, int depth = 0) {
  VLRT_CHECK(depth <= kMaxGraphDepth, "subgraphs nested more than ", kMaxGraphDepth, " deep");
  r.for_each_field([&](uint32_t field, W type) {
    if (field == 5) {
      scan_tensor_locations(r.read_message(), out);
    } else if (field == 1) {
      r.read_message().for_each_message(5, [&](ProtoReader attr) {
        attr.for_each_field([&](uint32_t f, W t) {
          if (f == 5 || f == 10) scan_tensor_locations(attr.read_message(), out);
          else if (f == 6 || f == 11) scan_graph_locations(attr.read_message(), out, depth + 1);
          else attr.skip(t);
        });
      });
    } else {
      r.skip(type);
    }
  });
}

}  // namespace

std::vector<std::string> external_data_files(const std::string& path) {
  std::string data = read_file(path);
  std::vector<std::string> out;
  try {
    ProtoReader r(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    r.for_each_message(7, [&](ProtoReader graph) { scan_graph_locations(graph, out); });
  } catch (const Truncated& e) {
    fail(path, ": the file is truncated (", data.size(), " bytes; ", e.what(), ")");
  }
  return out;
}

Tensor parse_tensor_proto(const std::string& bytes, const std::string& base_dir, std::string* name) {
  ProtoReader r(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return parse_tensor(r, Source{base_dir, nullptr, {}, 0}, name);
}

namespace {

// A SequenceProto (kind sequence) or an OptionalProto (an optional kind) of tensors or,
// for an optional, of a sequence. Fields: 1 name, 2 elem_type, 3 tensors, 5 sequences.
Tensor parse_value(ProtoReader r, ValueKind kind, DType element_type, const Source& src,
                   std::string* out_name) {
  std::string name;
  std::vector<Tensor> tensors;
  std::vector<Tensor> sequences;
  int32_t elem_type = 0;
  r.for_each_field([&](uint32_t field, W type) {
    switch (field) {
      case 1: name = r.read_string(); break;
      case 2: elem_type = int32_t(r.read_varint()); break;
      case 3: tensors.push_back(parse_tensor(r.read_message(), src, nullptr)); break;
      case 5:
        sequences.push_back(parse_value(r.read_message(), ValueKind::sequence, element_type, src, nullptr));
        break;
      case 4: case 6: case 7: unsupported("value '", name, "': sparse tensors, maps and nested optionals are not supported");
      default: r.skip(type);
    }
  });
  if (out_name) *out_name = name;
  std::string label = cat("value '", name, "'");
  if (kind == ValueKind::sequence) {
    if (elem_type != 0 && elem_type != 1) unsupported(label, ": sequences of non-tensors are not supported");
    if (!sequences.empty()) fail(label, ": a sequence of sequences where a sequence of tensors was expected");
    DType dt = tensors.empty() ? element_type : tensors[0].dtype();
    return Tensor::sequence(dt, std::move(tensors));
  }
  VLRT_CHECK(is_optional(kind), label, ": expected a tensor, a sequence or an optional");
  ValueKind of = kind == ValueKind::optional_tensor ? ValueKind::tensor : ValueKind::sequence;
  std::vector<Tensor>& held = of == ValueKind::tensor ? tensors : sequences;
  if (tensors.size() + sequences.size() > held.size() || held.size() > 1)
    fail(label, ": the optional holds something other than one ", value_kind_name(of));
  if (held.empty()) return Tensor::empty_optional(of, element_type);
  return Tensor::optional(std::move(held[0]));
}

}  // namespace

Tensor parse_value_proto(const std::string& bytes, ValueKind kind, DType element_type, const std::string& base_dir,
                         std::string* name) {
  ProtoReader r(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (kind == ValueKind::tensor) return parse_tensor(r, Source{base_dir, nullptr, {}, 0}, name);
  return parse_value(r, kind, element_type, Source{base_dir, nullptr, {}, 0}, name);
}

Model load_onnx(const std::string& path) {
  MappedFile file(path);
  std::string_view data = file.bytes();
  if (data.empty()) fail(path, ": the file is empty");
  Model m;
  m.path = path;
  fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  Source src{dir.empty() ? std::string(".") : dir.string(), &file, fs::absolute(path, ec).string()};
  bool has_graph = false;
  try {
    ProtoReader r(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    r.for_each_field([&](uint32_t field, W type) {
      // Top-level fields of a ModelProto have fixed wire types; anything else is not ONNX.
      W expected = field == 1 || field == 5 ? W::varint : W::length_delimited;
      if ((field <= 8 || field == 14 || field == 20) && type != expected)
        fail("field ", field, " at byte ", r.offset(), " has the wrong wire type");
      switch (field) {
        case 1: m.ir_version = r.read_int64(); break;
        case 2: m.producer = r.read_string(); break;
        case 7: m.graph = parse_graph(r.read_message(), src); has_graph = true; break;
        case 14: {  // metadata_props
          auto [key, value] = parse_string_entry(r.read_message());
          m.metadata[key] = value;
          break;
        }
        case 8: {
          auto [domain, version] = parse_opset(r.read_message());
          m.opsets[domain] = version;
          break;
        }
        default: r.skip(type);
      }
    });
  } catch (const Truncated& e) {
    fail(path, ": the file is truncated (", data.size(), " bytes; ", e.what(),
         "). Download or export it again; `vlrt verify` checks a model against its manifest.");
  } catch (const OutOfMemory& e) {
    throw OutOfMemory(cat(path, ": ", e.what()));
  } catch (const Unsupported& e) {
    throw Unsupported(cat(path, ": ", e.what()));
  } catch (const Error& e) {
    fail(path, ": not a valid ONNX model (", e.what(), ")");
  }
  if (!has_graph || m.ir_version == 0)
    fail(path, ": not an ONNX model (no graph or IR version found in ", data.size(), " bytes)");
  if (m.opsets.empty()) m.opsets[""] = 1;
  try {
    topo_sort(m.graph);
  } catch (const Error& e) {
    rethrow_as(e, cat(path, ": ", e.what()));
  }
  return m;
}

}  // namespace vlrt
