// Shape inference for pooling, resizing, sampling, padding and block rearrangement ops.
#include <algorithm>
#include <cmath>
#include <set>

#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

bool is_numeric(DType t) { return dtype_supported(t) && t != DType::boolean; }

void require_float(const InferContext& ctx, size_t i, const char* what) {
  if (!dtype_is_float(ctx.input_dtype(i)))
    fail(what, " must be a float tensor, got ", dtype_name(ctx.input_dtype(i)));
}

std::string attr_choice(const Node& n, const char* name, const std::string& fallback,
                        std::initializer_list<const char*> allowed) {
  std::string v = n.attr_string(name, fallback);
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return v;
    list += cat(list.empty() ? "" : ", ", "'", a, "'");
  }
  fail("attribute '", name, "' is '", v, "'; expected one of ", list);
}

std::vector<int64_t> ints_attr(const Node& n, const char* name, size_t len, int64_t fallback, int64_t min) {
  std::vector<int64_t> v = n.attr_ints(name, std::vector<int64_t>(len, fallback));
  if (v.empty()) v.assign(len, fallback);
  if (v.size() != len) fail("attribute '", name, "' has ", v.size(), " values, expected ", len);
  for (int64_t x : v)
    if (x < min) fail("attribute '", name, "' values must be >= ", min, ", got ", shape_str(v));
  return v;
}

// ---- Pooling -------------------------------------------------------------------------------

// Output length of one pooled axis (the kernel recomputes the pads the same way).
int64_t pool_out_len(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                     const std::string& auto_pad, bool ceil_mode) {
  int64_t extent = (k - 1) * d + 1;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") return ceil_div(in, s);
  if (auto_pad == "VALID") pb = pe = 0;
  int64_t span = in + pb + pe - extent;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? ceil_div(span, s) : span / s) + 1;
  // A window may not start in the end padding (PyTorch and the ONNX reference agree).
  if (ceil_mode && (out - 1) * s >= in + pb) out--;
  return out;
}

void infer_pool(InferContext& ctx) {
  const Node& n = ctx.node;
  const std::string& op = n.op_type;
  DType dt = ctx.input_dtype(0);
  if (op == "MaxPool") {
    if (!is_numeric(dt)) fail("MaxPool needs a numeric tensor, got ", dtype_name(dt));
  } else {
    require_float(ctx, 0, "X");
  }
  const Shape& x = ctx.input_shape(0);
  if (x.size() < 3) fail(op, " needs an input of rank >= 3 (N, C, spatial...), got ", shape_str(x));
  size_t nd = x.size() - 2;
  if (!n.has_attr("kernel_shape")) fail("attribute 'kernel_shape' is required");
  auto k = ints_attr(n, "kernel_shape", nd, 1, 1);
  auto s = ints_attr(n, "strides", nd, 1, 1);
  auto d = ints_attr(n, "dilations", nd, 1, 1);
  auto pads = ints_attr(n, "pads", 2 * nd, 0, 0);
  std::string auto_pad =
      attr_choice(n, "auto_pad", "NOTSET", {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"});
  int64_t ceil_mode = n.attr_int("ceil_mode", 0);
  if (ceil_mode != 0 && ceil_mode != 1) fail("attribute 'ceil_mode' must be 0 or 1, got ", ceil_mode);
  if (op == "MaxPool") {
    int64_t so = n.attr_int("storage_order", 0);
    if (so != 0 && so != 1) fail("attribute 'storage_order' must be 0 or 1, got ", so);
  }
  if (op == "AveragePool") {
    int64_t cip = n.attr_int("count_include_pad", 0);
    if (cip != 0 && cip != 1) fail("attribute 'count_include_pad' must be 0 or 1, got ", cip);
  }
  if (op == "LpPool" && n.attr_int("p", 2) < 1) fail("attribute 'p' must be >= 1, got ", n.attr_int("p", 2));
  Shape y = {x[0], x[1]};
  for (size_t i = 0; i < nd; i++) {
    int64_t extent = (k[i] - 1) * d[i] + 1;
    if (auto_pad == "NOTSET" && (pads[i] >= extent || pads[i + nd] >= extent))
      fail("pads ", shape_str(pads), " must be smaller than the (dilated) kernel ", shape_str(k));
    int64_t o = pool_out_len(x[i + 2], k[i], s[i], d[i], pads[i], pads[i + nd], auto_pad, ceil_mode);
    if (o < 1 && x[i + 2] > 0)
      fail("kernel ", shape_str(k), " with dilations ", shape_str(d), " does not fit the input ",
           shape_str(x), " padded by ", shape_str(pads));
    y.push_back(std::max<int64_t>(o, 0));
  }
  ctx.set_output(0, dt, y);
  if (ctx.output_count() > 1) {
    if (op != "MaxPool") fail(op, " has one output, the node names ", ctx.output_count());
    ctx.set_output(1, DType::i64, y);
  }
}

void infer_global_pool(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  DType dt = ctx.input_dtype(0);
  if (ctx.node.op_type == "GlobalMaxPool" ? !is_numeric(dt) : !dtype_is_float(dt))
    fail(ctx.node.op_type, " does not take ", dtype_name(dt), " input");
  if (x.size() < 3)
    fail(ctx.node.op_type, " needs an input of rank >= 3 (N, C, spatial...), got ", shape_str(x));
  if (ctx.node.op_type == "GlobalLpPool" && ctx.node.attr_int("p", 2) < 1)
    fail("attribute 'p' must be >= 1, got ", ctx.node.attr_int("p", 2));
  Shape y(x.size(), 1);
  y[0] = x[0];
  y[1] = x[1];
  ctx.set_output(0, dt, y);
}

void infer_max_unpool(InferContext& ctx) {
  require_float(ctx, 0, "X");
  if (ctx.input_dtype(1) != DType::i64) fail("indices must be int64, got ", dtype_name(ctx.input_dtype(1)));
  const Shape& x = ctx.input_shape(0);
  if (x.size() < 3) fail("MaxUnpool needs an input of rank >= 3, got ", shape_str(x));
  if (ctx.input_shape(1) != x)
    fail("indices ", shape_str(ctx.input_shape(1)), " must have the shape of X ", shape_str(x));
  size_t nd = x.size() - 2;
  const Node& n = ctx.node;
  if (!n.has_attr("kernel_shape")) fail("attribute 'kernel_shape' is required");
  auto k = ints_attr(n, "kernel_shape", nd, 1, 1);
  auto s = ints_attr(n, "strides", nd, 1, 1);
  auto pads = ints_attr(n, "pads", 2 * nd, 0, 0);
  Shape y = {x[0], x[1]};
  for (size_t i = 0; i < nd; i++) {
    int64_t o = (x[i + 2] - 1) * s[i] + k[i] - pads[i] - pads[i + nd];
    if (o < 0) fail("pads ", shape_str(pads), " are larger than the unpooled size");
    y.push_back(o);
  }
  if (ctx.has_input(2)) {
    std::vector<int64_t> shape = ctx.input_value(2).to_int64_vector();
    if (shape.size() != x.size())
      fail("output_shape ", shape_str(shape), " must have ", x.size(), " values (the rank of X)");
    bool ok = shape[0] == x[0] && shape[1] == x[1];
    for (size_t i = 2; i < shape.size(); i++) ok = ok && shape[i] >= y[i];
    if (!ok)
      fail("output_shape ", shape_str(shape), " must keep N and C of X ", shape_str(x),
           " and be at least the unpooled shape ", shape_str(y));
    y = shape;
  }
  ctx.set_output(0, ctx.input_dtype(0), y);
}

// ---- Resize / Upsample ---------------------------------------------------------------------

// Axes that roi, scales and sizes refer to ('axes'; all axes when absent).
std::vector<int64_t> resize_axes(const InferContext& ctx, int64_t rank) {
  std::vector<int64_t> axes;
  if (ctx.node.has_attr("axes")) {
    std::set<int64_t> seen;
    for (int64_t a : ctx.node.attr_ints("axes")) {
      if (a < -rank || a >= rank) fail("axes value ", a, " is out of range for rank ", rank);
      a = a < 0 ? a + rank : a;
      if (!seen.insert(a).second) fail("axes ", shape_str(ctx.node.attr_ints("axes")), " repeat an axis");
      axes.push_back(a);
    }
  } else {
    for (int64_t i = 0; i < rank; i++) axes.push_back(i);
  }
  return axes;
}

bool has_nonempty(const InferContext& ctx, size_t i) {
  return ctx.has_input(i) && shape_numel(ctx.input_shape(i)) > 0;
}

void check_resize_attrs(const InferContext& ctx, size_t num_axes) {
  const Node& n = ctx.node;
  attr_choice(n, "mode", "nearest", {"nearest", "linear", "cubic"});
  std::string ctm = attr_choice(n, "coordinate_transformation_mode", "half_pixel",
                                {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                 "asymmetric", "tf_crop_and_resize", "tf_half_pixel_for_nn"});
  attr_choice(n, "nearest_mode", "round_prefer_floor",
              {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
  int64_t eo = n.attr_int("exclude_outside", 0);
  if (eo != 0 && eo != 1) fail("attribute 'exclude_outside' must be 0 or 1, got ", eo);
  attr_choice(n, "keep_aspect_ratio_policy", "stretch", {"stretch", "not_larger", "not_smaller"});
  int64_t aa = n.attr_int("antialias", 0);
  if (aa != 0 && aa != 1) fail("attribute 'antialias' must be 0 or 1, got ", aa);
  if (ctm == "tf_crop_and_resize") {
    if (!has_nonempty(ctx, 1))
      fail("coordinate_transformation_mode 'tf_crop_and_resize' needs the roi input");
    require_float(ctx, 1, "roi");
    int64_t len = ctx.input_value(1).numel();
    if (len != int64_t(2 * num_axes))
      fail("roi has ", len, " values, expected ", 2 * num_axes, " (the starts, then the ends of each axis)");
  }
}

// Resize (X, roi, scales, sizes); canonicalize() turns Upsample and Resize-10 into this form.
void infer_resize(InferContext& ctx) {
  const Node& n = ctx.node;
  DType dt = ctx.input_dtype(0);
  if (!is_numeric(dt)) fail(n.op_type, " does not take ", dtype_name(dt), " input");
  const Shape& x = ctx.input_shape(0);
  int64_t rank = int64_t(x.size());
  std::vector<int64_t> axes = resize_axes(ctx, rank);
  check_resize_attrs(ctx, axes.size());

  Shape y = x;
  std::vector<double> scales;
  const size_t si = 2;
  bool has_sizes = has_nonempty(ctx, 3);
  if (has_nonempty(ctx, si)) {
    if (has_sizes) fail("only one of 'scales' and 'sizes' may be given");
    if (ctx.input_dtype(si) != DType::f32)
      fail("scales must be float32, got ", dtype_name(ctx.input_dtype(si)));
    scales = ctx.input_value(si).to_double_vector();
  } else if (!has_sizes) {
    fail("one of 'scales' and 'sizes' must be given");
  }
  if (!has_sizes) {
    if (scales.size() != axes.size())
      fail("scales has ", scales.size(), " values, expected ", axes.size(), " (one per resized axis)");
    for (size_t i = 0; i < axes.size(); i++) {
      if (!(scales[i] > 0) || !std::isfinite(scales[i])) fail("scales must be positive, got ", scales[i]);
      // float like the ONNX shape inference and ONNX Runtime, so 10 * 0.7f gives 7.
      y[axes[i]] = int64_t(std::floor(float(x[axes[i]]) * float(scales[i])));
    }
  } else {
    if (ctx.input_dtype(3) != DType::i64) fail("sizes must be int64, got ", dtype_name(ctx.input_dtype(3)));
    std::vector<int64_t> sizes = ctx.input_value(3).to_int64_vector();
    if (sizes.size() != axes.size())
      fail("sizes has ", sizes.size(), " values, expected ", axes.size(), " (one per resized axis)");
    for (int64_t v : sizes)
      if (v < 0) fail("sizes must be non-negative, got ", shape_str(sizes));
    std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t i = 0; i < axes.size(); i++) y[axes[i]] = sizes[i];
    } else {
      double scale = policy == "not_larger" ? INFINITY : 0;
      for (size_t i = 0; i < axes.size(); i++) {
        double r = double(sizes[i]) / double(x[axes[i]]);
        scale = policy == "not_larger" ? std::min(scale, r) : std::max(scale, r);
      }
      for (size_t i = 0; i < axes.size(); i++) y[axes[i]] = int64_t(scale * double(x[axes[i]]) + 0.5);
    }
  }
  for (int64_t i = 0; i < rank; i++)
    if (x[i] == 0 && y[i] > 0) fail("cannot resize the empty axis ", i, " of ", shape_str(x), " to ", y[i]);
  ctx.set_output(0, dt, y);
}

// ---- GridSample, RoiAlign ------------------------------------------------------------------

void infer_grid_sample(InferContext& ctx) {
  const Node& n = ctx.node;
  require_float(ctx, 0, "X");
  require_float(ctx, 1, "grid");
  attr_choice(n, "mode", "bilinear", {"bilinear", "nearest", "bicubic", "linear", "cubic"});
  attr_choice(n, "padding_mode", "zeros", {"zeros", "border", "reflection"});
  int64_t ac = n.attr_int("align_corners", 0);
  if (ac != 0 && ac != 1) fail("attribute 'align_corners' must be 0 or 1, got ", ac);
  const Shape& x = ctx.input_shape(0);
  const Shape& g = ctx.input_shape(1);
  if (x.size() != 4) unsupported("GridSample of a rank-", x.size(), " input (vlrt supports 4-D N,C,H,W)");
  if (g.size() != 4 || g[3] != 2 || g[0] != x[0])
    fail("grid must have shape [N, H_out, W_out, 2] with N = ", x[0], ", got ", shape_str(g));
  ctx.set_output(0, ctx.input_dtype(0), {x[0], x[1], g[1], g[2]});
}

void infer_roi_align(InferContext& ctx) {
  const Node& n = ctx.node;
  require_float(ctx, 0, "X");
  if (ctx.input_dtype(1) != ctx.input_dtype(0))
    fail("rois (", dtype_name(ctx.input_dtype(1)), ") must have the type of X (",
         dtype_name(ctx.input_dtype(0)), ")");
  if (ctx.input_dtype(2) != DType::i64)
    fail("batch_indices must be int64, got ", dtype_name(ctx.input_dtype(2)));
  attr_choice(n, "mode", "avg", {"avg", "max"});
  attr_choice(n, "coordinate_transformation_mode", "half_pixel", {"half_pixel", "output_half_pixel"});
  int64_t oh = n.attr_int("output_height", 1), ow = n.attr_int("output_width", 1);
  if (oh < 1 || ow < 1) fail("output_height and output_width must be >= 1, got ", oh, " and ", ow);
  if (n.attr_int("sampling_ratio", 0) < 0)
    fail("sampling_ratio must be >= 0, got ", n.attr_int("sampling_ratio", 0));
  const Shape& x = ctx.input_shape(0);
  const Shape& rois = ctx.input_shape(1);
  const Shape& bi = ctx.input_shape(2);
  if (x.size() != 4) fail("X must be 4-D (N, C, H, W), got ", shape_str(x));
  if (rois.size() != 2 || rois[1] != 4) fail("rois must have shape [num_rois, 4], got ", shape_str(rois));
  if (bi.size() != 1 || bi[0] != rois[0])
    fail("batch_indices must have shape [", rois[0], "] to match rois, got ", shape_str(bi));
  ctx.set_output(0, ctx.input_dtype(0), {rois[0], x[1], oh, ow});
}

// ---- Pad -----------------------------------------------------------------------------------

void infer_pad(InferContext& ctx) {
  const Node& n = ctx.node;
  DType dt = ctx.input_dtype(0);
  if (!dtype_supported(dt)) fail("Pad does not take ", dtype_name(dt), " input");
  std::string mode = attr_choice(n, "mode", "constant", {"constant", "reflect", "edge", "wrap"});
  const Shape& x = ctx.input_shape(0);
  int64_t rank = int64_t(x.size());
  if (!ctx.has_input(1)) fail("the pads input is required");
  if (ctx.input_dtype(1) != DType::i64) fail("pads must be int64, got ", dtype_name(ctx.input_dtype(1)));
  std::vector<int64_t> pads = ctx.input_value(1).to_int64_vector();
  std::vector<int64_t> axes;
  if (ctx.has_input(2)) {
    if (ctx.input_dtype(2) != dt)
      fail("constant_value is ", dtype_name(ctx.input_dtype(2)), " but data is ", dtype_name(dt));
    if (shape_numel(ctx.input_shape(2)) != 1)
      fail("constant_value must hold one value, got shape ", shape_str(ctx.input_shape(2)));
  }
  if (ctx.has_input(3)) {
    DType at = ctx.input_dtype(3);
    if (at != DType::i64 && at != DType::i32) fail("axes must be int32 or int64, got ", dtype_name(at));
    std::set<int64_t> seen;
    for (int64_t a : ctx.input_value(3).to_int64_vector()) {
      a = normalize_axis(a, rank);
      if (!seen.insert(a).second) fail("axes repeat axis ", a);
      axes.push_back(a);
    }
  }
  if (axes.empty() && !(ctx.has_input(3)))
    for (int64_t i = 0; i < rank; i++) axes.push_back(i);
  size_t na = axes.size();
  if (pads.size() != 2 * na)
    fail("pads has ", pads.size(), " values, expected ", 2 * na, " (begins then ends of ", na, " axes)");
  Shape y = x;
  for (size_t i = 0; i < na; i++) {
    int64_t a = axes[i], pb = pads[i], pe = pads[i + na];
    int64_t len = x[a] + pb + pe;
    if (len < 0) fail("pads ", shape_str(pads), " crop axis ", a, " of ", shape_str(x), " below zero");
    // Cropping happens first; the other modes then need a non-empty remainder to copy from.
    int64_t kept = std::min(x[a], x[a] + pe) - std::max<int64_t>(0, -pb);
    if (mode != "constant" && (pb > 0 || pe > 0) && kept <= 0)
      fail("mode '", mode, "' cannot pad axis ", a, " of ", shape_str(x),
           ": no values are left after cropping");
    y[a] = len;
  }
  ctx.set_output(0, dt, y);
}

// ---- DepthToSpace, SpaceToDepth ------------------------------------------------------------

void infer_depth_space(InferContext& ctx) {
  const Node& n = ctx.node;
  DType dt = ctx.input_dtype(0);
  if (!dtype_supported(dt)) fail(n.op_type, " does not take ", dtype_name(dt), " input");
  const Shape& x = ctx.input_shape(0);
  if (x.size() != 4) fail(n.op_type, " needs a 4-D input (N, C, H, W), got ", shape_str(x));
  if (!n.has_attr("blocksize")) fail("attribute 'blocksize' is required");
  int64_t b = n.attr_int("blocksize", 0);
  if (b < 1) fail("attribute 'blocksize' must be >= 1, got ", b);
  if (n.op_type == "DepthToSpace") {
    attr_choice(n, "mode", "DCR", {"DCR", "CRD"});
    if (x[1] % (b * b) != 0) fail("channels ", x[1], " are not divisible by blocksize^2 = ", b * b);
    ctx.set_output(0, dt, {x[0], x[1] / (b * b), x[2] * b, x[3] * b});
  } else {
    // 'mode' arrived with opset 24; accepting it early is harmless.
    attr_choice(n, "mode", "DCR", {"DCR", "CRD"});
    if (x[2] % b != 0 || x[3] % b != 0)
      fail("height and width of ", shape_str(x), " must be divisible by blocksize ", b);
    ctx.set_output(0, dt, {x[0], x[1] * b * b, x[2] / b, x[3] / b});
  }
}

}  // namespace

void register_spatial_schemas(SchemaTable& t) {
  t["MaxPool"] = {infer_pool, 1, 1};
  t["AveragePool"] = {infer_pool, 1, 1};
  t["LpPool"] = {infer_pool, 1, 1};
  t["GlobalAveragePool"] = {infer_global_pool, 1, 1};
  t["GlobalMaxPool"] = {infer_global_pool, 1, 1};
  t["GlobalLpPool"] = {infer_global_pool, 1, 1};
  t["MaxUnpool"] = {infer_max_unpool, 2, 3};
  t["Resize"] = {infer_resize, 1, 4};
  // Rewritten to Resize by canonicalize(); registered so that support checks before the pass accept it.
  t["Upsample"] = {infer_resize, 1, 2};
  t["GridSample"] = {infer_grid_sample, 2, 2};
  t["RoiAlign"] = {infer_roi_align, 3, 3};
  t["Pad"] = {infer_pad, 1, 4};
  t["DepthToSpace"] = {infer_depth_space, 1, 1};
  t["SpaceToDepth"] = {infer_depth_space, 1, 1};
}

}  // namespace vlrt
