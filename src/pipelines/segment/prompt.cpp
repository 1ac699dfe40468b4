#include "pipelines/segment/prompt.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace vlrt::segment {

namespace {

// Comma-separated finite numbers; fails with `form` as the expected form.
std::vector<float> parse_numbers(const std::string& text, const char* what, const char* form) {
  std::vector<float> out;
  size_t begin = 0;
  while (true) {
    size_t end = text.find(',', begin);
    std::string item = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    char* stop = nullptr;
    errno = 0;
    float v = std::strtof(item.c_str(), &stop);
    if (item.empty() || *stop != 0 || errno != 0 || !std::isfinite(v))
      fail(what, " '", text, "' is not ", form, " ('", item, "' is not a number)");
    out.push_back(v);
    if (end == std::string::npos) return out;
    begin = end + 1;
  }
}

std::string format_number(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(v));
  return buf;
}

}  // namespace

std::string Prompt::describe() const {
  std::string s;
  if (box)
    s = cat("box ", format_number(box->x1), ",", format_number(box->y1), ",", format_number(box->x2), ",",
            format_number(box->y2));
  if (!points.empty())
    s += cat(s.empty() ? "" : " + ", points.size(), points.size() == 1 ? " point" : " points");
  return s.empty() ? "empty prompt" : s;
}

constexpr const char* kBoxForm = "x1,y1,x2,y2 (pixels of the image, e.g. 10,20,200,300)";
constexpr const char* kPointForm = "x,y or x,y,label with label 1 (foreground) or 0 (background)";

Box make_box(const std::vector<float>& v, const std::string& text) {
  if (v.size() != 4) fail("box '", text, "' has ", v.size(), " numbers; expected ", kBoxForm);
  return {v[0], v[1], v[2], v[3]};
}

Point make_point(const std::vector<float>& v, const std::string& text) {
  if (v.size() != 2 && v.size() != 3)
    fail("point '", text, "' has ", v.size(), " numbers; expected ", kPointForm);
  Point p{v[0], v[1], kForeground};
  if (v.size() == 3) {
    if (v[2] != 0 && v[2] != 1)
      fail("point '", text, "' has label ", format_number(v[2]), "; expected ", kPointForm);
    p.label = v[2] == 1 ? kForeground : kBackground;
  }
  return p;
}

Box parse_box(const std::string& text) { return make_box(parse_numbers(text, "box", kBoxForm), text); }

Point parse_point(const std::string& text) {
  return make_point(parse_numbers(text, "point", kPointForm), text);
}

std::vector<Prompt> make_prompts(const std::vector<Box>& boxes, const std::vector<Point>& points) {
  if (boxes.empty() && points.empty()) fail("give at least one box (x1,y1,x2,y2) or point (x,y[,label])");
  if (boxes.size() > 1 && !points.empty())
    fail("points refine the mask of one box; with ", boxes.size(),
         " boxes, ask once per box that needs points");
  std::vector<Prompt> prompts;
  for (auto& b : boxes) prompts.push_back({b, {}});
  if (prompts.empty()) prompts.emplace_back();
  prompts.back().points = points;
  return prompts;
}

void check_prompt(const Prompt& p, int width, int height) {
  if (!p.box && p.points.empty()) fail("a prompt needs a box or at least one point");
  auto inside = [&](float x, float y) { return x >= 0 && y >= 0 && x <= float(width) && y <= float(height); };
  if (p.box) {
    const Box& b = *p.box;
    if (!(b.x2 > b.x1) || !(b.y2 > b.y1))
      fail(p.describe(), ": x2 must be greater than x1 and y2 than y1 (the box is x1,y1,x2,y2)");
    if (!inside(b.x1, b.y1) || !inside(b.x2, b.y2))
      fail(p.describe(), " is outside the ", width, "x", height, " image (0 <= x <= ", width,
           ", 0 <= y <= ", height, ")");
  }
  for (auto& pt : p.points)
    if (!inside(pt.x, pt.y))
      fail("point ", format_number(pt.x), ",", format_number(pt.y), " is outside the ", width, "x", height,
           " image");
}

DecoderPoints decoder_points(const Prompt& p, int width, int height, int resized_width, int resized_height) {
  DecoderPoints d;
  double sx = double(resized_width) / double(width), sy = double(resized_height) / double(height);
  auto add = [&](double x, double y, int label) {
    d.coords.push_back(float(x * sx));
    d.coords.push_back(float(y * sy));
    d.labels.push_back(float(label));
  };
  for (auto& pt : p.points) add(pt.x, pt.y, pt.label);
  if (p.box) {
    add(p.box->x1, p.box->y1, kBoxTopLeft);
    add(p.box->x2, p.box->y2, kBoxBottomRight);
  } else {
    d.coords.push_back(0);
    d.coords.push_back(0);
    d.labels.push_back(float(kPadding));
  }
  return d;
}

}  // namespace vlrt::segment
