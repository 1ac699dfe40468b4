#include "ops/linalg_semantics.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "core/error.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

// SAME_UPPER puts the odd element of the padding at the end, SAME_LOWER (and an explicit
// output_shape) at the start.
int64_t split_pad_total(const std::string& auto_pad, int64_t total) {
  return auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
}

}  // namespace

EinsumLabels einsum_labels(std::string eq, const std::vector<size_t>& ranks) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size())
    fail("equation '", eq, "' has ", terms.size(), " input terms but the node has ", ranks.size(), " inputs");
  // Letters of a term and where its ellipsis is (npos when none).
  auto split = [&](const std::string& term, std::string& letters) {
    size_t ell = term.find("...");
    if (ell != std::string::npos && term.find("...", ell + 3) != std::string::npos)
      fail("term '", term, "' of equation '", eq, "' has more than one ellipsis");
    letters = ell == std::string::npos ? term : term.substr(0, ell) + term.substr(ell + 3);
    for (char c : letters)
      if (!std::isalpha(static_cast<unsigned char>(c)))
        fail("equation '", eq, "' has an invalid character '", c,
             "' (expected letters, ',', '->' and '...')");
    return ell;
  };
  size_t n_ell = 0;
  bool any_ell = false;
  std::vector<std::string> letters(terms.size());
  std::vector<size_t> ell_pos(terms.size());
  for (size_t t = 0; t < terms.size(); t++) {
    ell_pos[t] = split(terms[t], letters[t]);
    bool has_ell = ell_pos[t] != std::string::npos;
    if (ranks[t] < letters[t].size() || (!has_ell && ranks[t] != letters[t].size()))
      fail("term '", terms[t], "' does not fit input ", t, " of rank ", ranks[t]);
    if (has_ell) n_ell = std::max(n_ell, ranks[t] - letters[t].size());
    any_ell = any_ell || has_ell;
  }
  auto expand = [&](const std::string& l, size_t pos, size_t count) {
    std::vector<int> ids;
    for (size_t i = 0; i < l.size(); i++) {
      if (i == pos)
        for (size_t j = n_ell - count; j < n_ell; j++) ids.push_back(256 + int(j));
      ids.push_back(l[i]);
    }
    if (pos != std::string::npos && pos >= l.size())
      for (size_t j = n_ell - count; j < n_ell; j++) ids.push_back(256 + int(j));
    return ids;
  };
  EinsumLabels r;
  std::map<int, int> counts;
  for (size_t t = 0; t < terms.size(); t++) {
    r.inputs.push_back(expand(letters[t], ell_pos[t], ranks[t] - letters[t].size()));
    for (int id : r.inputs.back()) counts[id]++;
  }
  if (arrow == std::string::npos) {
    for (size_t j = 0; any_ell && j < n_ell; j++) r.output.push_back(256 + int(j));
    for (auto [id, n] : counts)
      if (id < 256 && n == 1) r.output.push_back(id);
    return r;
  }
  std::string out_letters;
  size_t out_ell = split(eq.substr(arrow + 2), out_letters);
  if (out_ell == std::string::npos && n_ell > 0)
    fail("equation '", eq, "': the inputs' ellipsis stands for ", n_ell,
         " dims but the output has no ellipsis");
  r.output = expand(out_letters, out_ell, n_ell);
  std::set<int> seen;
  for (char c : out_letters) {
    if (!counts.count(c)) fail("equation '", eq, "': output label '", c, "' appears in no input");
    if (!seen.insert(c).second) fail("equation '", eq, "': output label '", c, "' appears twice");
  }
  return r;
}

std::vector<int64_t> spatial_attr(const Node& n, const char* name, size_t len, int64_t fallback,
                                  int64_t min) {
  std::vector<int64_t> v = n.attr_ints(name, std::vector<int64_t>(len, fallback));
  if (v.size() != len) fail("attribute '", name, "' has ", v.size(), " values, expected ", len);
  for (int64_t x : v)
    if (x < min) fail("attribute '", name, "' values must be >= ", min, ", got ", shape_str(v));
  return v;
}

ConvAttrs conv_attrs(const Node& n, const Shape& x, const Shape& w) {
  if (x.size() < 3) fail("X must be [N,C,D1,...], got ", shape_str(x));
  if (w.size() != x.size()) fail("W has rank ", w.size(), " but X has rank ", x.size(), "; they must match");
  size_t nsp = x.size() - 2;
  if (nsp > 3) unsupported(nsp, "-D convolution (vlrt supports 1-D to 3-D)");
  ConvAttrs a;
  a.kernel.assign(w.begin() + 2, w.end());
  if (n.has_attr("kernel_shape") && n.attr_ints("kernel_shape") != a.kernel)
    fail("kernel_shape ", shape_str(n.attr_ints("kernel_shape")),
         " does not match the weight's spatial shape ", shape_str(a.kernel));
  a.strides = spatial_attr(n, "strides", nsp, 1, 1);
  a.dilations = spatial_attr(n, "dilations", nsp, 1, 1);
  a.pads = spatial_attr(n, "pads", 2 * nsp, 0, 0);
  a.auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (a.auto_pad != "NOTSET" && !a.same_pad() && a.auto_pad != "VALID")
    fail("auto_pad '", a.auto_pad, "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  if (n.attr_int("group", 1) < 1) fail("group must be >= 1, got ", n.attr_int("group", 1));
  return a;
}

int64_t conv_pad_begin(const ConvAttrs& a, size_t i, int64_t in, int64_t out) {
  if (!a.same_pad()) return a.auto_pad == "NOTSET" ? a.pads[i] : 0;
  int64_t total = std::max<int64_t>(0, (out - 1) * a.strides[i] + a.kernel_extent(i) - in);
  return split_pad_total(a.auto_pad, total);
}

int64_t conv_transpose_pad_begin(const ConvAttrs& a, size_t i, int64_t in, int64_t out,
                                 int64_t output_padding, bool has_output_shape) {
  if (!a.same_pad() && !has_output_shape) return a.auto_pad == "NOTSET" ? a.pads[i] : 0;
  // Negative totals mean a larger output than the input covers; the excess stays zero.
  int64_t total = std::max<int64_t>(0, a.strides[i] * (in - 1) + output_padding + a.kernel_extent(i) - out);
  return split_pad_total(a.auto_pad, total);
}

Shape matmul_output_shape(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty())
    fail("MatMul operands must have rank >= 1, got ", shape_str(a), " and ", shape_str(b));
  Shape a2 = a.size() == 1 ? Shape{1, a[0]} : a;
  Shape b2 = b.size() == 1 ? Shape{b[0], 1} : b;
  int64_t k_a = a2.back(), k_b = b2[b2.size() - 2];
  if (k_a != k_b)
    fail("inner dimensions do not match: ", shape_str(a), " x ", shape_str(b), " (", k_a, " vs ", k_b, ")");
  Shape batch = broadcast_shapes(Shape(a2.begin(), a2.end() - 2), Shape(b2.begin(), b2.end() - 2));
  if (a.size() > 1) batch.push_back(a2[a2.size() - 2]);
  if (b.size() > 1) batch.push_back(b2.back());
  return batch;
}

MatMulDims matmul_dims(Shape as, Shape bs) {
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  MatMulDims d;
  d.m = as[as.size() - 2];
  d.k = as.back();
  d.n = bs.back();
  Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  d.batch = broadcast_shapes(a_batch, b_batch);
  d.count = shape_numel(d.batch);
  if (shape_numel(b_batch) == 1 && shape_numel(a_batch) == d.count) {
    d.m *= d.count;
    d.count = 1;
    d.batch.clear();
    return d;
  }
  d.a_strides = broadcast_strides(a_batch, d.batch);
  d.b_strides = broadcast_strides(b_batch, d.batch);
  for (auto& s : d.a_strides) s *= d.m * d.k;
  for (auto& s : d.b_strides) s *= d.k * d.n;
  return d;
}

Shape conv_output_shape(const Node& n, const Shape& x, const Shape& w) {
  ConvAttrs a = conv_attrs(n, x, w);
  int64_t group = n.attr_int("group", 1);
  if (group < 1 || w[1] * group != x[1] || w[0] % group != 0)
    fail("with group=", group, ", W [M, C/group, ...] = ", shape_str(w), " does not fit X with C=", x[1],
         " (needs W[1]*group == C and M divisible by group)");
  size_t nsp = x.size() - 2;
  Shape y{x[0], w[0]};
  for (size_t i = 0; i < nsp; i++) {
    int64_t in = x[i + 2], s = a.strides[i], ek = a.kernel_extent(i);
    int64_t padded = in + a.pads[i] + a.pads[i + nsp];
    if (a.same_pad()) {
      y.push_back((in + s - 1) / s);
      continue;
    }
    if (a.auto_pad == "VALID") padded = in;
    if (padded < ek)
      fail("spatial axis ", i, ": input size ", in, " (padded to ", padded,
           ") is smaller than the dilated kernel ", ek);
    y.push_back((padded - ek) / s + 1);
  }
  return y;
}

ConvGeometry conv_geometry(const Node& node, const Shape& x, const Shape& w, const Shape& y, bool transpose) {
  ConvAttrs a = conv_attrs(node, x, w);
  size_t nsp = x.size() - 2, o = 3 - nsp;
  ConvGeometry g;
  g.batch = x[0];
  g.c = x[1];
  g.m = y[1];
  g.group = node.attr_int("group", 1);
  std::vector<int64_t> out_pad =
      transpose ? spatial_attr(node, "output_padding", nsp, 0, 0) : std::vector<int64_t>();
  for (size_t i = 0; i < nsp; i++) {
    int64_t in = x[i + 2], out = y[i + 2];
    g.in[o + i] = in;
    g.out[o + i] = out;
    g.k[o + i] = a.kernel[i];
    g.stride[o + i] = a.strides[i];
    g.dil[o + i] = a.dilations[i];
    g.pad[o + i] = transpose
                       ? conv_transpose_pad_begin(a, i, in, out, out_pad[i], node.has_attr("output_shape"))
                       : conv_pad_begin(a, i, in, out);
  }
  return g;
}

}  // namespace vlrt
