// _vlrt: the compiled half of `import vlrt`. InferenceSession runs any model (shaped like
// onnxruntime's); _Detector is the grounding pipeline's detector and _Segmenter the SAM
// pipeline's segmenter, which vlrt/__init__.py wraps.
// Every vlrt::Error becomes vlrt.Error (a RuntimeError) with vlrt's message. A model runs
// with the GIL released; one mutex per object lets Python threads share it (runs take turns,
// since a Session's executor holds the state of the run in progress).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <mutex>
#include <optional>

#include "apps/commands.h"
#include "exec/session.h"
#include "integrity/load_model.h"
#include "pipelines/grounding/detector.h"
#include "pipelines/segment/segmenter.h"
#include "vision/image.h"

namespace py = pybind11;

namespace vlrt::python {

namespace {

// The vlrt dtype of a NumPy array's elements; fails naming the input when vlrt has none.
DType dtype_of(const py::array& array, const std::string& what) {
  static const DType kinds[] = {DType::f32, DType::f64, DType::f16, DType::i8,  DType::i16,    DType::i32, DType::i64,
                                DType::u8,  DType::u16, DType::u32, DType::u64, DType::boolean};
  for (DType t : kinds)
    if (array.dtype().equal(py::dtype(dtype_name(t)))) return t;
  fail(what, ": NumPy dtype ", std::string(py::str(array.dtype())), " has no vlrt type; give one of float32, float64, "
       "float16, int8..int64, uint8..uint64, bool (in native byte order)");
}

// onnxruntime's name of a value's type: "tensor(float)", "seq(tensor(int64))", ...
std::string ort_type(const ValueDecl& d) {
  std::string element = d.dtype == DType::f32   ? "float"
                        : d.dtype == DType::f64 ? "double"
                        : d.dtype == DType::undefined ? "undefined"
                                                      : dtype_name(d.dtype);
  std::string tensor = cat("tensor(", element, ")");
  switch (d.kind) {
    case ValueKind::tensor: return tensor;
    case ValueKind::sequence: return cat("seq(", tensor, ")");
    case ValueKind::optional_tensor: return cat("optional(", tensor, ")");
    case ValueKind::optional_sequence: return cat("optional(seq(", tensor, "))");
  }
  return tensor;
}

// An input, as onnxruntime's NodeArg: name, shape (ints; a symbolic dim by its name, an
// unnamed dynamic one None; None when the model declares no shape), type.
struct NodeArg {
  std::string name;
  py::object shape;
  std::string type;
};

NodeArg node_arg(const ValueDecl& d) {
  py::object shape = py::none();
  if (d.has_shape) {
    py::list dims;
    for (auto& dim : d.dims) {
      if (dim.value >= 0) dims.append(dim.value);
      else if (!dim.param.empty()) dims.append(dim.param);
      else dims.append(py::none());
    }
    shape = dims;
  }
  return {d.name, shape, ort_type(d)};
}

// Byte strides of a C-contiguous array. (Given explicitly, and bytes counted from vlrt's
// dtype: pybind11 before 2.12 reads an element's size where NumPy 1 kept it, not NumPy 2.)
std::vector<py::ssize_t> c_strides(const Shape& shape, size_t element_bytes) {
  std::vector<py::ssize_t> strides(shape.size());
  auto stride = py::ssize_t(element_bytes);
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= py::ssize_t(shape[i]);
  }
  return strides;
}

// A C-contiguous, aligned array is read in place (no copy); any other is copied once into
// a C-contiguous one first. `keep` holds the arrays while the model reads them.
Tensor tensor_from_array(py::array array, const std::string& name, std::vector<py::array>& keep) {
  DType dtype = dtype_of(array, cat("input '", name, "'"));
  constexpr int kInPlace = int(py::array::c_style) | int(py::detail::npy_api::NPY_ARRAY_ALIGNED_);
  if ((array.flags() & kInPlace) != kInPlace)
    array = py::module_::import("numpy").attr("require")(array, py::none(), "CA").cast<py::array>();
  auto buffer = std::make_shared<Buffer>();  // no release: NumPy owns the memory
  buffer->data = const_cast<void*>(array.data());
  Shape shape(array.shape(), array.shape() + array.ndim());
  buffer->bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  keep.push_back(array);
  return Tensor(dtype, std::move(shape), std::move(buffer), 0);
}

// A host tensor as a NumPy array over the same memory (the array keeps the tensor alive).
py::object array_from_tensor(const Tensor& t) {
  if (t.kind() == ValueKind::sequence) {
    py::list items;
    for (auto& e : t.elements()) items.append(array_from_tensor(e));
    return items;
  }
  if (is_optional(t.kind())) return t.elements().empty() ? py::none() : array_from_tensor(t.elements()[0]);
  if (t.dtype() == DType::bf16) fail("output ", t.describe(), " is bfloat16, which NumPy has no type for");
  auto* owned = new Tensor(t);
  py::capsule owner(owned, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(py::dtype(dtype_name(t.dtype())), t.shape(), c_strides(t.shape(), dtype_size(t.dtype())),
                   owned->raw(), owner);
}

// "cpu=2GiB" strings from {device: size}, a size being bytes (int) or a string such as "2GiB".
std::vector<std::string> memory_caps(const py::object& memory) {
  std::vector<std::string> caps;
  if (memory.is_none()) return caps;
  if (!py::isinstance<py::dict>(memory)) fail("memory: expected a dict {device: size}, e.g. {'cpu': '2GiB'}");
  for (auto [device, size] : memory.cast<py::dict>())
    caps.push_back(cat(std::string(py::str(device)), "=", std::string(py::str(size))));
  return caps;
}

PlanOptions plan_options_for(const std::vector<std::string>& devices, const py::object& memory,
                             const std::string& precision = "fp32") {
  if (devices.empty()) fail("devices is empty; give e.g. ['cpu'] or ['opencl:0', 'cpu']");
  if (precision != "fp32" && precision != "bf16")
    fail("precision: expected 'fp32' or 'bf16' (products in bfloat16 on a CPU with AVX512-BF16), got '",
         precision, "'");
  DeviceArgs args;
  args.precision = precision;
  args.devices.clear();
  for (auto& d : devices) args.devices += (args.devices.empty() ? "" : ",") + d;
  args.memory = memory_caps(memory);
  return plan_options(args);
}

class InferenceSession {
 public:
  InferenceSession(const std::string& path, const std::vector<std::string>& devices, int threads,
                   const py::object& memory, const std::string& precision)
      : path_(path) {
    SessionOptions options;
    options.threads = threads;
    options.plan = plan_options_for(devices, memory, precision);
    py::gil_scoped_release unlocked;
    session_ = std::make_unique<Session>(load_model(path), options);
  }

  std::vector<NodeArg> get_inputs() const { return node_args(open().model().graph.inputs); }
  std::vector<NodeArg> get_outputs() const { return node_args(open().model().graph.outputs); }

  // Outputs in the order asked (all, in the model's order, for None).
  py::list run(const std::optional<std::vector<std::string>>& output_names, const py::dict& feeds) {
    std::vector<std::string> names;
    if (output_names) names = *output_names;
    else
      for (auto& d : open().model().graph.outputs) names.push_back(d.name);
    for (auto& name : names) {
      bool known = false;
      for (auto& d : open().model().graph.outputs) known = known || d.name == name;
      if (!known) fail(path_, " has no output '", name, "'; its outputs: ", list_names(open().model().graph.outputs));
    }
    TensorMap inputs;
    std::vector<py::array> keep;
    for (auto [key, value] : feeds) {
      std::string name = py::str(key);
      if (!py::isinstance<py::array>(value))
        fail("input '", name, "' is a ", std::string(py::str(py::type::of(value).attr("__name__"))),
             "; give a NumPy array");
      inputs[name] = tensor_from_array(value.cast<py::array>(), name, keep);
    }
    TensorMap outputs;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      outputs = open().run(inputs);
    }
    py::list result;
    for (auto& name : names) result.append(array_from_tensor(outputs.at(name)));
    return result;
  }

  // The plan for these input shapes ({name: [dims]}; declared fixed dims need not be given),
  // as `vlrt plan --json` prints it.
  std::string plan(const std::map<std::string, std::vector<int64_t>>& shapes) {
    std::vector<std::string> shape_args;
    for (auto& [name, dims] : shapes) {
      std::string s = name + "=";
      for (size_t i = 0; i < dims.size(); i++) s += cat(i ? "x" : "", dims[i]);
      shape_args.push_back(s);
    }
    py::gil_scoped_release unlocked;
    std::lock_guard lock(mutex_);
    Session& session = open();
    auto sig = input_signature(session.model(), shape_args);
    const Plan& p = session.plan(sig);
    BatchSizing batches = session.size_batches(sig, 256);
    return plan_json(path_, sig, p, batches, session.fusion_report()).dump();
  }

  void close() {
    py::gil_scoped_release unlocked;
    std::lock_guard lock(mutex_);
    session_.reset();
  }
  bool closed() const { return !session_; }

 private:
  Session& open() const {
    if (!session_) fail("this InferenceSession (", path_, ") is closed; make a new one");
    return *session_;
  }
  static std::vector<NodeArg> node_args(const std::vector<ValueDecl>& decls) {
    std::vector<NodeArg> args;
    for (auto& d : decls) args.push_back(node_arg(d));
    return args;
  }
  static std::string list_names(const std::vector<ValueDecl>& decls) {
    std::string s;
    for (auto& d : decls) s += cat(s.empty() ? "" : ", ", d.name);
    return s;
  }

  std::string path_;
  std::unique_ptr<Session> session_;
  std::mutex mutex_;
};

// An image given from Python: a path (str), encoded bytes, or a uint8 [H,W,3] RGB array.
vision::Image image_argument(const py::object& image) {
  if (py::isinstance<py::str>(image)) {
    auto path = image.cast<std::string>();
    py::gil_scoped_release unlocked;
    return vision::load_image(path);
  }
  if (py::isinstance<py::bytes>(image)) {
    auto bytes = image.cast<std::string>();
    py::gil_scoped_release unlocked;
    return vision::decode_image(bytes, "image bytes");
  }
  if (!py::isinstance<py::array>(image))
    fail("image: expected a path, encoded bytes or an HxWx3 uint8 array, got ",
         std::string(py::str(py::type::of(image).attr("__name__"))));
  auto rgb = image.cast<py::array>();
  if (!rgb.dtype().equal(py::dtype::of<uint8_t>()) || rgb.ndim() != 3 || rgb.shape(2) != 3)
    fail("image: expected an HxWx3 uint8 array (RGB; bgr=True for OpenCV's BGR), got ",
         std::string(py::str(rgb.dtype())), " ", std::string(py::str(rgb.attr("shape"))));
  auto pixels = py::array_t<uint8_t, py::array::c_style>::ensure(rgb);
  return {int(rgb.shape(1)), int(rgb.shape(0)),
          std::vector<uint8_t>(pixels.data(), pixels.data() + pixels.size())};
}

// One image's detections as arrays: xyxy float32 [N,4], confidence float32 [N], class_id
// int64 [N] (the phrase's index in the prompt, -1 when none passed the text threshold),
// labels, the prompt's phrases and truncation warning, and the image's width and height.
py::tuple detections_tuple(const std::vector<vision::Detection>& dets, const grounding::EncodedCaption& caption,
                           const vision::Image& image) {
  auto n = py::ssize_t(dets.size());
  py::array_t<float> xyxy({n, py::ssize_t(4)}, {py::ssize_t(4 * sizeof(float)), py::ssize_t(sizeof(float))});
  py::array_t<float> confidence({n}, {py::ssize_t(sizeof(float))});
  py::array_t<int64_t> class_id({n}, {py::ssize_t(sizeof(int64_t))});
  py::list labels, phrases;
  auto box = xyxy.mutable_unchecked<2>();
  auto conf = confidence.mutable_unchecked<1>();
  auto cls = class_id.mutable_unchecked<1>();
  for (py::ssize_t i = 0; i < n; i++) {
    const auto& d = dets[size_t(i)];
    box(i, 0) = d.x1, box(i, 1) = d.y1, box(i, 2) = d.x2, box(i, 3) = d.y2;
    conf(i) = d.score;
    cls(i) = d.category;
    labels.append(d.label);
  }
  for (auto& p : caption.phrases) phrases.append(p.text);
  return py::make_tuple(xyxy, confidence, class_id, labels, phrases, caption.warning, image.width, image.height);
}

class Detector {
 public:
  Detector(const std::string& model_path, const std::string& vocab, const std::vector<std::string>& devices,
           int threads) {
    SessionOptions options;
    options.threads = threads;
    options.plan = plan_options_for(devices, py::none());
    py::gil_scoped_release unlocked;
    Model model = load_model(model_path);
    std::string vocab_path = vocab.empty() ? grounding::default_vocab_path(model) : vocab;
    if (vocab_path.empty()) fail("no vocab given and none beside ", model_path, "; pass vocab='vocab.txt'");
    detector_ = std::make_unique<grounding::Detector>(std::move(model), vocab_path, options);
  }

  py::tuple predict(const py::object& image, const std::string& prompt, std::optional<float> box_threshold,
                    std::optional<float> text_threshold) {
    return predict_image(image_argument(image), prompt, box_threshold, text_threshold);
  }

  void close() {
    py::gil_scoped_release unlocked;
    std::lock_guard lock(mutex_);
    detector_.reset();
  }
  bool closed() const { return !detector_; }

 private:
  // Runs with the request's thresholds over the model's, restored afterwards.
  py::tuple predict_image(const vision::Image& image, const std::string& prompt,
                          std::optional<float> box_threshold, std::optional<float> text_threshold) {
    for (auto [name, v] : {std::pair{"box_threshold", box_threshold}, {"text_threshold", text_threshold}})
      if (v && !(*v >= 0 && *v <= 1)) fail(name, " must be within [0, 1], got ", *v);
    grounding::EncodedCaption caption;
    std::vector<vision::Detection> dets;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      if (!detector_) fail("this Detector is closed; make a new one");
      caption = detector_->encode(prompt);
      grounding::DetectOptions saved = detector_->options();
      if (box_threshold) detector_->options().box_threshold = *box_threshold;
      if (text_threshold) detector_->options().text_threshold = *text_threshold;
      try {
        dets = detector_->detect({&image}, caption)[0];
      } catch (...) {
        detector_->options() = saved;
        throw;
      }
      detector_->options() = saved;
    }
    return detections_tuple(dets, caption, image);
  }

  std::unique_ptr<grounding::Detector> detector_;
  std::mutex mutex_;
};

// bool [N,H,W] from N masks of one image.
py::array_t<bool> masks_array(const std::vector<const vision::Mask*>& masks, int width, int height) {
  auto n = py::ssize_t(masks.size()), h = py::ssize_t(height), w = py::ssize_t(width);
  py::array_t<bool> out({n, h, w}, {h * w, w, py::ssize_t(1)});
  for (py::ssize_t i = 0; i < n; i++)
    std::copy_n(masks[size_t(i)]->pixels.data(), h * w, out.mutable_data(i));
  return out;
}

// One mask per prompt as arrays: masks bool [N,H,W], the chosen masks' IoU predictions float32
// [N], the masks' boxes float32 [N,4] (vision::mask_box: x2, y2 exclusive; zeros for an empty
// mask), which of the decoder's masks int64 [N] and every mask's IoU prediction float32 [N,M].
py::tuple segments_tuple(const std::vector<segment::Segment>& segments, int width, int height) {
  auto n = py::ssize_t(segments.size());
  auto m = py::ssize_t(segments.empty() ? 0 : segments[0].iou_predictions.size());
  auto f32 = py::ssize_t(sizeof(float));
  std::vector<const vision::Mask*> masks;
  py::array_t<float> iou({n}, {f32});
  py::array_t<float> xyxy({n, py::ssize_t(4)}, {4 * f32, f32});
  py::array_t<int64_t> mask_index({n}, {py::ssize_t(sizeof(int64_t))});
  py::array_t<float> iou_predictions({n, m}, {m * f32, f32});
  auto box = xyxy.mutable_unchecked<2>();
  auto all_iou = iou_predictions.mutable_unchecked<2>();
  for (py::ssize_t i = 0; i < n; i++) {
    const segment::Segment& s = segments[size_t(i)];
    masks.push_back(&s.mask);
    iou.mutable_at(i) = s.iou;
    vision::MaskBox b = vision::mask_box(s.mask);
    box(i, 0) = float(b.x1), box(i, 1) = float(b.y1), box(i, 2) = float(b.x2), box(i, 3) = float(b.y2);
    mask_index.mutable_at(i) = s.mask_index;
    for (py::ssize_t k = 0; k < m; k++) all_iou(i, k) = s.iou_predictions[size_t(k)];
  }
  return py::make_tuple(masks_array(masks, width, height), iou, xyxy, mask_index, iou_predictions);
}

class Segmenter {
 public:
  Segmenter(const std::string& model_dir, const std::vector<std::string>& devices, int threads) {
    SessionOptions options;
    options.threads = threads;
    options.plan = plan_options_for(devices, py::none());
    py::gil_scoped_release unlocked;
    segmenter_ = std::make_unique<segment::Segmenter>(model_dir, options);
  }

  // Runs the encoder once; the prompts of every later predict are on this image. Returns
  // (width, height).
  py::tuple set_image(const py::object& image) {
    vision::Image img = image_argument(image);
    {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      embedding_.reset();
      embedding_ = open().embed(img);
    }
    return py::make_tuple(img.width, img.height);
  }

  // Rows of boxes (x1,y1,x2,y2) and points (x,y) with their labels (1 foreground, 0
  // background; foreground when none are given), as `vlrt segment --box/--point` takes them.
  using Rows = std::vector<std::vector<float>>;
  py::tuple predict(const Rows& boxes, const Rows& points, const std::optional<std::vector<float>>& point_labels) {
    if (point_labels && point_labels->size() != points.size())
      fail("point_labels has ", point_labels->size(), " labels for ", points.size(),
           " points; give one label (1 foreground, 0 background) per point");
    std::vector<segment::Box> prompt_boxes;
    std::vector<segment::Point> prompt_points;
    for (size_t i = 0; i < boxes.size(); i++)
      prompt_boxes.push_back(segment::make_box(boxes[i], cat("boxes[", i, "]")));
    for (size_t i = 0; i < points.size(); i++) {
      std::vector<float> numbers = points[i];
      if (numbers.size() == 2 && point_labels) numbers.push_back((*point_labels)[i]);
      prompt_points.push_back(segment::make_point(numbers, cat("points[", i, "]")));
    }
    std::vector<segment::Prompt> prompts = segment::make_prompts(prompt_boxes, prompt_points);
    std::vector<segment::Segment> segments;
    int width = 0, height = 0;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      segments = open().segment(image(), prompts);
      width = image().width, height = image().height;
    }
    return segments_tuple(segments, width, height);
  }

  // One mask per detection box (x1,y1,x2,y2) on the image set, as `vlrt detect --masks` makes
  // them: a box without width or height gets an empty mask.
  py::array_t<bool> segment_detections(const Rows& boxes) {
    std::vector<vision::Detection> detections;
    for (size_t i = 0; i < boxes.size(); i++) {
      segment::Box b = segment::make_box(boxes[i], cat("xyxy[", i, "]"));
      detections.push_back({"", -1, 0, b.x1, b.y1, b.x2, b.y2});
    }
    std::vector<vision::Mask> masks;
    int width = 0, height = 0;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard lock(mutex_);
      masks = segment::segment_detections(open(), image(), detections);
      width = image().width, height = image().height;
    }
    std::vector<const vision::Mask*> pointers;
    for (auto& mask : masks) pointers.push_back(&mask);
    return masks_array(pointers, width, height);
  }

  void close() {
    py::gil_scoped_release unlocked;
    std::lock_guard lock(mutex_);
    segmenter_.reset();
    embedding_.reset();
  }
  bool closed() const { return !segmenter_; }

 private:
  segment::Segmenter& open() {
    if (!segmenter_) fail("this Segmenter is closed; make a new one");
    return *segmenter_;
  }
  const segment::ImageEmbedding& image() {
    open();
    if (!embedding_)
      fail("no image set: call set_image(image) first (a path, encoded bytes or an HxWx3 uint8 array)");
    return *embedding_;
  }

  std::unique_ptr<segment::Segmenter> segmenter_;
  std::optional<segment::ImageEmbedding> embedding_;
  std::mutex mutex_;
};
}  // namespace

}  // namespace vlrt::python

PYBIND11_MODULE(_vlrt, m) {
  using namespace vlrt::python;
  m.doc() = "vlrt's compiled core; use the vlrt package";
  py::register_exception<vlrt::Error>(m, "Error", PyExc_RuntimeError);

  py::class_<NodeArg>(m, "NodeArg")
      .def_readonly("name", &NodeArg::name)
      .def_readonly("shape", &NodeArg::shape)
      .def_readonly("type", &NodeArg::type)
      .def("__repr__", [](const NodeArg& a) {
        return vlrt::cat("NodeArg(name='", a.name, "', type='", a.type, "', shape=", std::string(py::repr(a.shape)),
                         ")");
      });

  py::class_<InferenceSession>(m, "InferenceSession")
      .def(py::init<const std::string&, const std::vector<std::string>&, int, const py::object&,
                    const std::string&>(),
           py::arg("path"), py::arg("devices") = std::vector<std::string>{"cpu"}, py::arg("threads") = 0,
           py::arg("memory") = py::none(), py::arg("precision") = "fp32")
      .def("get_inputs", &InferenceSession::get_inputs)
      .def("get_outputs", &InferenceSession::get_outputs)
      .def("run", &InferenceSession::run, py::arg("output_names"), py::arg("input_feed"))
      .def(
          "plan",
          [](InferenceSession& s, const std::map<std::string, std::vector<int64_t>>& shapes) {
            return py::module_::import("json").attr("loads")(s.plan(shapes));
          },
          py::arg("shapes") = std::map<std::string, std::vector<int64_t>>{},
          "The plan as `vlrt plan --json` gives it; `shapes` {input: [dims]} for dynamic dims")
      .def("close", &InferenceSession::close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](InferenceSession& s, py::args) { s.close(); })
      .def_property_readonly("closed", &InferenceSession::closed);

  py::class_<Detector>(m, "_Detector")
      .def(py::init<const std::string&, const std::string&, const std::vector<std::string>&, int>(), py::arg("model"),
           py::arg("vocab"), py::arg("devices"), py::arg("threads"))
      .def("predict", &Detector::predict)
      .def("close", &Detector::close)
      .def_property_readonly("closed", &Detector::closed);

  py::class_<Segmenter>(m, "_Segmenter")
      .def(py::init<const std::string&, const std::vector<std::string>&, int>(), py::arg("model_dir"),
           py::arg("devices"), py::arg("threads"))
      .def("set_image", &Segmenter::set_image)
      .def("predict", &Segmenter::predict)
      .def("segment_detections", &Segmenter::segment_detections)
      .def("close", &Segmenter::close)
      .def_property_readonly("closed", &Segmenter::closed);
}
