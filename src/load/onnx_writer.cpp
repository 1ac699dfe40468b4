#include "load/onnx_writer.h"

#include <algorithm>
#include <limits>

#include "io/files.h"
#include "load/proto_writer.h"

namespace vlrt {

using W = ProtoWriter::WireType;

namespace {

// Protobuf refuses messages of 2 GiB and more.
constexpr size_t kMaxProtoBytes = size_t(std::numeric_limits<int32_t>::max());

void write_string_entry(ProtoWriter& w, uint32_t field, const std::string& key, const std::string& value) {
  w.message_field(field, [&](ProtoWriter& e) {
    e.bytes_field(1, key);
    e.bytes_field(2, value);
  });
}

// A TensorProto with its values as raw_data (little-endian, as ONNX stores them).
void write_tensor(ProtoWriter& w, uint32_t field, const Tensor& t, const std::string& name) {
  VLRT_CHECK(t.is_tensor(), "tensor '", name, "': a ", value_kind_name(t.kind()), " cannot be stored in a model");
  std::string head;
  ProtoWriter h(head);
  h.packed_int64s(1, t.shape());
  h.int64_field(2, int64_t(t.dtype()));
  if (!name.empty()) h.bytes_field(8, name);
  std::string raw_key;
  ProtoWriter r(raw_key);
  r.key(9, W::length_delimited);
  r.write_varint(t.nbytes());
  head += raw_key;
  std::string_view raw(t.nbytes() ? static_cast<const char*>(t.raw()) : "", t.nbytes());
  if (head.size() + raw.size() >= kMaxProtoBytes)
    fail("tensor '", name, "' (", t.describe(), ") is over 2 GiB: models that need external data cannot be written");
  w.bytes_field(field, head, raw);
}

// A TypeProto: a tensor type, or a sequence or an optional of one.
void write_type(ProtoWriter& w, const ValueDecl& v, ValueKind kind) {
  auto tensor_type = [&](ProtoWriter& tt) {
    if (v.dtype != DType::undefined) tt.int64_field(1, int64_t(v.dtype));
    if (!v.has_shape) return;
    tt.message_field(2, [&](ProtoWriter& shape) {
      for (const Dim& d : v.dims)
        shape.message_field(1, [&](ProtoWriter& dim) {
          if (d.value >= 0) dim.int64_field(1, d.value);
          else if (!d.param.empty()) dim.bytes_field(2, d.param);
        });
    });
  };
  switch (kind) {
    case ValueKind::tensor: w.message_field(1, tensor_type); break;
    case ValueKind::sequence:
      w.message_field(4, [&](ProtoWriter& s) {
        s.message_field(1, [&](ProtoWriter& e) { write_type(e, v, ValueKind::tensor); });
      });
      break;
    case ValueKind::optional_tensor:
    case ValueKind::optional_sequence:
      w.message_field(9, [&](ProtoWriter& o) {
        o.message_field(1, [&](ProtoWriter& e) {
          write_type(e, v, kind == ValueKind::optional_tensor ? ValueKind::tensor : ValueKind::sequence);
        });
      });
      break;
  }
}

void write_value_info(ProtoWriter& w, uint32_t field, const ValueDecl& v) {
  w.message_field(field, [&](ProtoWriter& vi) {
    vi.bytes_field(1, v.name);
    // A type vlrt does not take (a map, a string) was not kept: the name alone is written.
    if (v.dtype != DType::undefined) vi.message_field(2, [&](ProtoWriter& t) { write_type(t, v, v.kind); });
  });
}

void write_graph(ProtoWriter& w, const Graph& g, const std::string& name, bool initializers_are_inputs);

// AttributeProto.type values, by Attribute::Kind.
int64_t attribute_type(Attribute::Kind kind) {
  switch (kind) {
    case Attribute::Kind::f: return 1;
    case Attribute::Kind::i: return 2;
    case Attribute::Kind::s: return 3;
    case Attribute::Kind::t: return 4;
    case Attribute::Kind::graph: return 5;
    case Attribute::Kind::floats: return 6;
    case Attribute::Kind::ints: return 7;
    case Attribute::Kind::strings: return 8;
    case Attribute::Kind::graphs: return 10;
    case Attribute::Kind::type: return 13;
    case Attribute::Kind::undefined: return 0;
  }
  return 0;
}

void write_attribute(ProtoWriter& w, const std::string& name, const Attribute& a) {
  using K = Attribute::Kind;
  w.message_field(5, [&](ProtoWriter& at) {
    at.bytes_field(1, name);
    // An attribute without a declared type (very old files) keeps whatever values it had.
    bool any = a.kind == K::undefined;
    if (a.kind == K::f || (any && a.f != 0)) at.float_field(2, a.f);
    if (a.kind == K::i || (any && a.i != 0)) at.int64_field(3, a.i);
    if (a.kind == K::s || (any && !a.s.empty())) at.bytes_field(4, a.s);
    if (a.kind == K::t || (any && a.t.defined())) write_tensor(at, 5, a.t, "");
    if (a.kind == K::graph || (any && a.graph))
      at.message_field(6, [&](ProtoWriter& g) { write_graph(g, *a.graph, name, false); });
    if (a.kind == K::floats || any) at.packed_floats(7, a.floats);
    if (a.kind == K::ints || any) at.packed_int64s(8, a.ints);
    for (const std::string& s : a.strings) at.bytes_field(9, s);
    for (const auto& sub : a.graphs)
      at.message_field(11, [&](ProtoWriter& g) { write_graph(g, *sub, name, false); });
    if (a.kind == K::type) at.message_field(14, [&](ProtoWriter& t) { write_type(t, a.type, a.type.kind); });
    if (a.kind != K::undefined) at.int64_field(20, attribute_type(a.kind));
  });
}

void write_node(ProtoWriter& w, const Node& n) {
  w.message_field(1, [&](ProtoWriter& nw) {
    for (const std::string& in : n.inputs) nw.bytes_field(1, in);
    for (const std::string& out : n.outputs) nw.bytes_field(2, out);
    nw.bytes_field(3, n.name);
    nw.bytes_field(4, n.op_type);
    for (const auto& [name, a] : n.attrs) {
      try {
        write_attribute(nw, name, a);
      } catch (const Error& e) {
        fail(n.label(), ": attribute '", name, "': ", e.what());
      }
    }
    if (!n.domain.empty()) nw.bytes_field(7, n.domain);
  });
}

// Initializers in name order, so that the same model always gives the same bytes.
std::vector<const std::pair<const std::string, Tensor>*> sorted_initializers(const Graph& g) {
  std::vector<const std::pair<const std::string, Tensor>*> v;
  for (const auto& entry : g.initializers) v.push_back(&entry);
  std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->first < b->first; });
  return v;
}

void write_graph(ProtoWriter& w, const Graph& g, const std::string& name, bool initializers_are_inputs) {
  for (const Node& n : g.nodes) write_node(w, n);
  w.bytes_field(2, name);
  auto inits = sorted_initializers(g);
  for (auto* entry : inits) write_tensor(w, 5, entry->second, entry->first);
  for (const ValueDecl& v : g.inputs) write_value_info(w, 11, v);
  // Before IR version 4 every initializer had to be listed among the graph's inputs too.
  if (initializers_are_inputs)
    for (auto* entry : inits) {
      ValueDecl v{entry->first, entry->second.dtype(), true, {}, ValueKind::tensor};
      for (int64_t d : entry->second.shape()) v.dims.push_back(Dim{d, ""});
      write_value_info(w, 11, v);
    }
  for (const ValueDecl& v : g.outputs) write_value_info(w, 12, v);
  for (const ValueDecl& v : g.value_infos) write_value_info(w, 13, v);
}

// ModelProto bytes in two parts: the fields before the graph (with the graph's key and
// length), then the graph itself, so that a writer can send them without joining them.
std::pair<std::string, std::string> serialize_parts(const Model& m) {
  std::string graph;
  ProtoWriter gw(graph);
  write_graph(gw, m.graph, "main_graph", m.ir_version < 4);
  if (graph.size() >= kMaxProtoBytes)
    fail("the model's graph is ", graph.size(), " bytes: models over 2 GiB need external data, ",
         "which cannot be written; keep the original precision or split the model");
  std::string head;
  ProtoWriter w(head);
  w.int64_field(1, m.ir_version);
  if (!m.producer.empty()) w.bytes_field(2, m.producer);
  for (const auto& opset : m.opsets)  // clang before 16 cannot capture structured bindings
    w.message_field(8, [&](ProtoWriter& o) {
      if (!opset.first.empty()) o.bytes_field(1, opset.first);
      o.int64_field(2, opset.second);
    });
  for (const auto& [key, value] : m.metadata) write_string_entry(w, 14, key, value);
  w.key(7, W::length_delimited);
  w.write_varint(graph.size());
  return {std::move(head), std::move(graph)};
}

}  // namespace

std::string serialize_onnx(const Model& model) {
  auto [head, graph] = serialize_parts(model);
  return head + graph;
}

void write_onnx(const Model& model, const std::string& path) {
  auto [head, graph] = serialize_parts(model);
  write_file_atomically(path, {head, graph});
}

}  // namespace vlrt
