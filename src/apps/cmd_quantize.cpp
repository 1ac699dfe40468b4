// vlrt quantize MODEL --out OUT.onnx: int8 (dynamic, or static from calibration images) or
// half-precision weights, written as standard ONNX that any runtime runs, with its manifest beside it.
#include <filesystem>
#include <iostream>

#include "apps/calibrate.h"
#include "apps/commands.h"
#include "integrity/load_model.h"
#include "integrity/manifest.h"
#include "load/onnx_writer.h"
#include "quantize/dynamic_int8.h"
#include "quantize/half.h"
#include "quantize/static_int8.h"

namespace vlrt {

namespace {

struct QuantizeArgs {
  std::string model;
  std::string out;
  std::string int8;
  bool fp16 = false;
  bool bf16 = false;
  bool all = false;
  std::vector<std::string> exclude;
  int64_t min_elements = -1;
  CalibrationArgs calibration;
};

QuantizeReport rewrite(Model& m, const QuantizeArgs& a) {
  if (!a.int8.empty()) {
    if (a.int8 != "dynamic" && a.int8 != "static")
      fail("--int8 '", a.int8, "': the modes are dynamic and static");
    if (a.all) fail("--all goes with --fp16 or --bf16, not --int8");
    bool calibrated = !a.calibration.dir.empty();
    if ((a.int8 == "static") != calibrated)
      fail(calibrated ? "--calibrate goes with --int8 static"
                      : "--int8 static needs --calibrate DIR: a folder of images like the ones the model will see");
    Int8Options o;
    o.exclude = a.exclude;
    if (a.min_elements >= 0) o.min_weight_elements = a.min_elements;
    if (a.int8 == "dynamic") return quantize_dynamic_int8(m, o);
    refuse_quantized(m.graph, "int8");  // before calibrating, which takes a while
    std::vector<std::string> values = static_int8_activations(m, o);
    return quantize_static_int8(m, o, calibrate(m, values, a.calibration));
  }
  HalfOptions o;
  o.dtype = a.fp16 ? DType::f16 : DType::bf16;
  o.all = a.all;
  o.exclude = a.exclude;
  if (a.min_elements >= 0) o.min_elements = a.min_elements;
  return convert_weights_to_half(m, o);
}

void quantize(const QuantizeArgs& a) {
  if (int(!a.int8.empty()) + int(a.fp16) + int(a.bf16) != 1)
    fail("give one of --int8 dynamic, --int8 static --calibrate DIR, --fp16, --bf16");
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::equivalent(a.model, a.out, ec)) fail("--out '", a.out, "' is the model itself: write to another file");
  Model m = load_model(a.model);
  QuantizeReport r = rewrite(m, a);
  if (r.rewritten.empty()) std::cout << "nothing to rewrite: no node qualifies (see --help for which do)\n";
  else std::cout << "nodes rewritten, by op:\n";
  for (auto& [op, count] : r.rewritten) std::cout << "  " << op << ": " << count << "\n";
  std::cout << "weights: " << human_bytes(double(r.weight_bytes_before)) << " -> "
            << human_bytes(double(r.weight_bytes_after)) << "\n";
  write_onnx(m, a.out);
  write_manifest(a.out);
  auto in_size = fs::file_size(a.model), out_size = fs::file_size(a.out);
  std::cout << "wrote " << a.out << ": " << human_bytes(double(out_size)) << " (" << human_bytes(double(in_size))
            << " before, " << (100 * out_size + in_size / 2) / in_size << "%) and " << manifest_path(a.out) << "\n";
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  static QuantizeArgs a;
  auto* cmd = app.add_subcommand(
      "quantize",
      "Write a smaller copy of a model as standard ONNX.\n"
      "  --int8 dynamic: MatMul, Gemm and Conv with constant float32 weights of 256 elements or more\n"
      "    become DynamicQuantizeLinear + MatMulInteger/ConvInteger (uint8 activations, int8 symmetric\n"
      "    weights per output channel), as onnxruntime's quantize_dynamic writes them; an embedding table\n"
      "    read by Gather is stored as int8 (a scale per column), its rows dequantized after the Gather.\n"
      "  --int8 static --calibrate DIR: the same nodes in QDQ form (QuantizeLinear/DequantizeLinear around\n"
      "    their activations, int8 weights per output channel, int32 biases), as onnxruntime's quantize_static\n"
      "    writes it; each activation's range is the smallest and largest value the float model makes on the\n"
      "    images of DIR, preprocessed as its pipeline does (a GroundingDINO-contract model with each image's\n"
      "    prompt: IMAGE.txt beside it, else --prompt; a model with one [N,3,H,W] input: resized, ImageNet\n"
      "    normalization).\n"
      "  --fp16 / --bf16: float32 weights of 16 elements or more are stored in half precision and cast\n"
      "    back to float32 where they are read (compute stays float32); the weights of normalizations,\n"
      "    Softmax, reductions and of nodes making graph outputs stay float32 unless --all.\n"
      "  Refuses a model that is already quantized. Writes OUT.manifest.json beside OUT.");
  cmd->add_option("model", a.model, "ONNX model file (float32)")->required();
  cmd->add_option("--out", a.out, "where to write the rewritten model")->required();
  cmd->add_option("--int8", a.int8, "integer quantization mode: dynamic or static (with --calibrate)");
  cmd->add_option("--calibrate", a.calibration.dir, "--int8 static: a folder of calibration images");
  cmd->add_option("--images", a.calibration.images, "--int8 static: calibrate on the first N images (by name)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("-p,--prompt", a.calibration.prompt,
                  "--int8 static, GroundingDINO-contract model: the prompt of images without IMAGE.txt");
  cmd->add_option("--vocab", a.calibration.vocab, "--int8 static, GroundingDINO-contract model: its vocab.txt");
  cmd->add_option("-t,--threads", a.calibration.threads, "--int8 static: threads of the calibration runs");
  cmd->add_flag("--fp16", a.fp16, "store weights as float16");
  cmd->add_flag("--bf16", a.bf16, "store weights as bfloat16");
  cmd->add_flag("--all", a.all, "with --fp16/--bf16: also the weights of numerically fragile nodes");
  cmd->add_option(
      "--exclude", a.exclude,
      "a node name or an op type to leave as it is, or a pattern of node names with * and ? (quote "
      "it: '/bert/*' leaves every node whose name starts with /bert/); repeatable");
  cmd->add_option("--min-elements", a.min_elements,
                  "smallest weight rewritten, in elements (default 256 for --int8, 16 for half)");
  cmd->callback([] { quantize(a); });
}

}  // namespace vlrt
