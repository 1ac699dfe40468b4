// Text-prompted detection with a GroundingDINO-contract model: tokenize the
// prompt, preprocess the images, run the model, turn per-token scores into
// labelled boxes in the original image's pixels.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exec/session.h"
#include "pipelines/grounding/text_inputs.h"
#include "pipelines/ontology.h"
#include "text/bert_tokenizer.h"
#include "vision/detection.h"
#include "vision/image.h"

namespace vlrt::grounding {

// label: the prompt's phrase with the best token score above the text threshold (or, with
// an ontology, that phrase's class name); category: the phrase's index in the caption's
// phrases (or its class's index); score: the query's highest token probability.
using vision::Detection;

struct DetectOptions {
  float box_threshold = 0.35f;
  float text_threshold = 0.25f;
  float nms_iou = 0;          // > 0: non-maximum suppression at this IoU ...
  bool nms_agnostic = false;  // ... across labels, not per label
  vision::ResizeOptions resize;
  int64_t max_text_length = kDefaultMaxTextLength;  // the model's logits' token axis when it declares one
  size_t max_phrases_per_pass = 0;                    // 0: as many as max_text_length holds
};

// Checks a model against the GroundingDINO ONNX contract (inputs img, input_ids,
// attention_mask, position_ids, token_type_ids, text_token_mask; outputs logits
// [B,Q,256] and boxes [B,Q,4]); fails listing every difference.
void check_grounding_contract(const Model& model);

// Sigmoid, box threshold, phrase labels, pixel boxes, optional NMS: one image's detections.
// `logits` is [Q,T] (pre-sigmoid), `boxes` [Q,4] normalized cx,cy,w,h. With `classes` (whose
// phrases are the prompt's, in order) detections are labelled with class names. A pass of a
// longer prompt (caption.first_phrase > 0) gives categories in that prompt's phrases.
std::vector<Detection> postprocess(const float* logits, const float* boxes, int64_t queries,
                                   int64_t token_slots, const EncodedCaption& caption, int image_width,
                                   int image_height, const DetectOptions& options,
                                   const Ontology* classes = nullptr);

// One image's detections of the passes of a prompt (each postprocessed without NMS), merged:
// ordered by score, then suppressed as the options say, across passes.
std::vector<Detection> merge_passes(std::vector<std::vector<Detection>> per_pass, const DetectOptions& options);

// The model's inputs: `img` [n,3,H,W] already normalized, the caption's text tensors
// repeated for each of the n images.
TensorMap grounding_inputs(Tensor img, const TextInputs& text);
// Their dtypes and shapes, for planning without data.
std::map<std::string, std::pair<DType, Shape>> grounding_signature(int64_t n, int width, int height,
                                                                   int64_t text_length);

class Detector {
 public:
  // Loads and checks the model; options not given take the model's metadata
  // (vlrt.short_side, vlrt.max_side, vlrt.box_threshold, vlrt.text_threshold, vlrt.nms)
  // and then the GroundingDINO defaults.
  Detector(Model model, const std::string& vocab_path, SessionOptions session_options);

  DetectOptions& options() { return options_; }
  const text::BertTokenizer& tokenizer() const { return tokenizer_; }
  Session& session() { return *session_; }

  // Tokenizes once; a truncation warning is returned in caption.warning.
  EncodedCaption encode(const std::string& prompt) const;
  // The prompt as passes of whole phrases that each fit the model (split_caption).
  std::vector<EncodedCaption> encode_passes(const std::string& prompt) const;
  // The model's input size for an image of this size.
  std::pair<int, int> input_size(const vision::Image& img) const { return vision::target_size(img.width, img.height, options_.resize); }
  // Detections for each image; images of different sizes run one by one, same-sized
  // ones in one batch.
  std::vector<std::vector<Detection>> detect(const std::vector<const vision::Image*>& images, const EncodedCaption& caption);
  // The model's logits [n,Q,T] and boxes [n,Q,4] for n images already resized and normalized
  // (`pixels` [n,3,H,W]); fails when the outputs do not have these shapes.
  std::pair<Tensor, Tensor> run(Tensor pixels, const EncodedCaption& caption);
  // The largest batch of images of this size that the memory plan allows (>= 1).
  int64_t max_batch(int width, int height, const EncodedCaption& caption);

 private:
  std::unique_ptr<Session> session_;
  text::BertTokenizer tokenizer_;
  DetectOptions options_;
};

// models/demo/model.onnx and vocab.txt next to the program (build/vlrt ->
// models/demo/...) or in the working directory; "" when not found.
std::string default_model_path();
// vocab.txt beside the model (or named by its vlrt.vocab metadata); "" when not found.
std::string default_vocab_path(const Model& model);

}  // namespace vlrt::grounding
