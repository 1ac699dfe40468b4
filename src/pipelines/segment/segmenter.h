// Segment Anything (SAM) with two models of the SAM contract: the image encoder runs once per
// image, the prompt decoder once per group of prompts, and each prompt gets one mask on the
// original image.
//
// A model folder holds encoder.onnx (pixels float32 [1,3,S,S] -> image_embeddings
// [1,C,S/16,S/16]), decoder.onnx (segment-anything's SamOnnxModel export: image_embeddings,
// point_coords [B,N,2], point_labels [B,N], mask_input [1,1,4E,4E], has_mask_input [1],
// orig_im_size [2] -> masks [B,M,h,w] logits, iou_predictions [B,M], low_res_masks) and
// sam.json, which names them and gives the preprocessing (image_size, pixel_mean,
// pixel_std, mask_threshold); without sam.json, SAM's values.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "exec/session.h"
#include "pipelines/segment/prompt.h"
#include "vision/detection.h"
#include "vision/image.h"
#include "vision/mask.h"

namespace vlrt::segment {

struct SamConfig {
  std::string encoder = "encoder.onnx";
  std::string decoder = "decoder.onnx";
  int image_size = 1024;  // the encoder's square input; the longest side is resized to it
  float pixel_mean[3] = {123.675f, 116.28f, 103.53f};  // on 0..255 pixels
  float pixel_std[3] = {58.395f, 57.12f, 57.375f};
  float mask_threshold = 0;  // a pixel is in the mask when its logit exceeds this
};

// DIR/sam.json (SAM's values when absent); fails naming the file and the field.
SamConfig read_sam_config(const std::string& dir);

// ResizeLongestSide.get_preprocess_shape: the longest side becomes `image_size`, the other
// keeps the aspect (rounded half up). Returns (width, height).
std::pair<int, int> resized_size(int width, int height, int image_size);
// SamPredictor's encoder input: PIL-bilinear resize to resized_size, (pixel - mean) / std,
// zero-padded at the bottom and right to image_size x image_size; float32 [1,3,S,S].
Tensor sam_pixels(const vision::Image& image, const SamConfig& config);

// Fails listing every input and output the decoder lacks or has of another dtype or rank.
void check_decoder_contract(const Model& decoder);
// The encoder has one float32 input [1,3,S,S] and an output image_embeddings (or one output).
void check_encoder_contract(const Model& encoder, int image_size);

// The image's embedding and its size, made once and reused for every prompt.
struct ImageEmbedding {
  Tensor embeddings;  // [1,C,E,E]
  int width = 0, height = 0;
  int resized_width = 0, resized_height = 0;
};

struct Segment {
  Prompt prompt;
  int mask_index = 0;                  // which of the decoder's masks (SamOnnxModel.select_masks)
  std::vector<float> iou_predictions;  // every mask's
  float iou = 0;                       // the chosen mask's
  vision::Mask mask;                   // logits > mask_threshold, on the original image
  std::vector<float> logits;           // the chosen mask's logits, rows of the original image
};

// SamOnnxModel.select_masks: with more than one mask, the first (single-mask token) when the
// prompt has more than two decoder points, else the best predicted IoU among the others.
int select_mask(const std::vector<float>& iou_predictions, int64_t decoder_points);

// What the "counts" of masks_json are.
inline constexpr const char* kRleFormat =
    "COCO uncompressed: counts are run lengths in column-major order, starting with 0s";
// A mask as COCO's uncompressed RLE: {size: [h,w], counts} (kRleFormat).
nlohmann::json rle_json(const vision::Mask& mask);
// Per segment: prompt, mask_index, iou_prediction, iou_predictions, area, bbox [x,y,w,h] and
// segmentation {size: [h,w], counts} (kRleFormat).
nlohmann::json masks_json(const std::vector<Segment>& segments);

class Segmenter {
 public:
  // Loads DIR's models and checks both contracts; fails naming the missing file or value.
  Segmenter(const std::string& dir, SessionOptions options);
  // With the encoder already loaded (a pipeline's model): the decoder is found beside it.
  Segmenter(Model encoder, const std::string& dir, SessionOptions options);

  const SamConfig& config() const { return config_; }
  Session& encoder() { return *encoder_; }
  Session& decoder() { return *decoder_; }

  ImageEmbedding embed(const vision::Image& image);
  // One mask per prompt (each checked against the image first). Prompts with the same number
  // of decoder points share a run when the decoder's batch axis is dynamic, else one run each.
  std::vector<Segment> segment(const ImageEmbedding& embedding, const std::vector<Prompt>& prompts);

 private:
  std::vector<Segment> run_decoder(const ImageEmbedding& embedding, const std::vector<Prompt>& prompts);

  SamConfig config_;
  std::unique_ptr<Session> encoder_, decoder_;
  std::string encoder_input_, encoder_output_;
  int64_t mask_input_size_ = 256;
  bool batch_prompts_ = false;  // the decoder's point_coords has a dynamic batch axis
};

// One mask per detection, its box the prompt: the encoder runs once for the image and the
// decoder once per batch of boxes. A box with no width or height gets an empty mask.
std::vector<vision::Mask> segment_detections(Segmenter& segmenter, const vision::Image& image,
                                             const std::vector<vision::Detection>& detections);
// The same for an image already embedded (the encoder does not run again).
std::vector<vision::Mask> segment_detections(Segmenter& segmenter, const ImageEmbedding& embedding,
                                             const std::vector<vision::Detection>& detections);

}  // namespace vlrt::segment
