// SAM prompts: boxes and points in the pixels of the original image, checked against it, and
// the decoder's point_coords / point_labels they become.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace vlrt::segment {

struct Box {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

// Labels as SAM's prompt encoder reads them.
enum PointLabel : int {
  kPadding = -1,
  kBackground = 0,
  kForeground = 1,
  kBoxTopLeft = 2,
  kBoxBottomRight = 3
};

struct Point {
  float x = 0, y = 0;
  int label = kForeground;  // kForeground or kBackground
};

// One mask's prompt: a box, points, or both.
struct Prompt {
  std::optional<Box> box;
  std::vector<Point> points;

  std::string describe() const;  // "box 10,20,200,300 + 1 point"
};

// "x1,y1,x2,y2" in pixels; fails naming the text and the form expected.
Box parse_box(const std::string& text);
// "x,y" (foreground) or "x,y,label" with label 1 (foreground) or 0 (background).
Point parse_point(const std::string& text);
// The same from numbers already parsed (a JSON array); `text` names them in errors.
Box make_box(const std::vector<float>& numbers, const std::string& text);
Point make_point(const std::vector<float>& numbers, const std::string& text);

// The prompts of a request: one per box; the points join the one box's prompt, or make a prompt
// of their own without a box. Fails with none of either, or with points and several boxes.
std::vector<Prompt> make_prompts(const std::vector<Box>& boxes, const std::vector<Point>& points);

// Fails when the prompt is empty, a box has x2<=x1 or y2<=y1, or a box or point lies outside
// the width x height image; the message names the prompt and the image size.
void check_prompt(const Prompt& prompt, int width, int height);

// The decoder's inputs for one prompt: points then the box's two corners (labels 2 and 3), or,
// with no box, a padding point (0,0) labelled -1 after the points (as SamPredictor does);
// coordinates scaled from the width x height image to its resized frame
// (ResizeLongestSide.apply_coords: x * resized_width / width, y * resized_height / height).
struct DecoderPoints {
  std::vector<float> coords;  // x, y per point
  std::vector<float> labels;
};
DecoderPoints decoder_points(const Prompt& prompt, int width, int height, int resized_width,
                             int resized_height);

}  // namespace vlrt::segment
