#include "vision/draw.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "core/error.h"

#define STB_EASY_FONT_IMPLEMENTATION
#include <stb/stb_easy_font.h>

namespace vlrt::vision {

namespace {

struct Rgb {
  uint8_t r, g, b;
};

// A stable, well-separated colour per label.
Rgb label_color(const std::string& label) {
  static const Rgb palette[] = {{230, 25, 75},  {60, 180, 75},  {0, 130, 200},  {245, 130, 48},
                                {145, 30, 180}, {70, 240, 240}, {240, 50, 230}, {210, 245, 60},
                                {0, 128, 128},  {170, 110, 40}};
  return palette[std::hash<std::string>{}(label) % (sizeof palette / sizeof palette[0])];
}

void fill(Image& img, int x0, int y0, int x1, int y1, Rgb c) {
  x0 = std::max(x0, 0), y0 = std::max(y0, 0);
  x1 = std::min(x1, img.width), y1 = std::min(y1, img.height);
  for (int y = y0; y < y1; y++)
    for (int x = x0; x < x1; x++) {
      uint8_t* p = &img.rgb[(size_t(y) * img.width + x) * 3];
      p[0] = c.r, p[1] = c.g, p[2] = c.b;
    }
}

// Text with stb_easy_font (a 7-pixel-high font), scaled up for readability.
void text(Image& img, int x, int y, const std::string& s, int scale, Rgb c) {
  static char buffer[99999];
  std::string copy = s;
  int quads = stb_easy_font_print(0, 0, copy.data(), nullptr, buffer, sizeof buffer);
  auto* v = reinterpret_cast<float*>(buffer);  // 4 vertices of x, y, z, colour per quad
  for (int q = 0; q < quads; q++) {
    float* quad = v + q * 16;
    int qx0 = int(quad[0]), qy0 = int(quad[1]), qx1 = int(quad[8]), qy1 = int(quad[9]);
    fill(img, x + qx0 * scale, y + qy0 * scale, x + qx1 * scale, y + qy1 * scale, c);
  }
}

}  // namespace

Image draw_detections(const Image& src, const std::vector<Detection>& detections) {
  Image img = src;
  int thick = std::max(2, std::min(img.width, img.height) / 300);
  int scale = std::max(1, std::min(img.width, img.height) / 350);
  for (auto& d : detections) {
    Rgb c = label_color(d.label);
    int x0 = int(std::lround(d.x1)), y0 = int(std::lround(d.y1)), x1 = int(std::lround(d.x2)),
        y1 = int(std::lround(d.y2));
    fill(img, x0, y0, x1, y0 + thick, c);
    fill(img, x0, y1 - thick, x1, y1, c);
    fill(img, x0, y0, x0 + thick, y1, c);
    fill(img, x1 - thick, y0, x1, y1, c);
    char score[16];
    std::snprintf(score, sizeof score, " %.2f", d.score);
    std::string tag = (d.label.empty() ? std::string("?") : d.label) + score;
    std::string copy = tag;
    int tw = stb_easy_font_width(copy.data()) * scale + 4, th = 9 * scale + 2;
    int ty = y0 - th >= 0 ? y0 - th : y0;                // above the box, or inside it at the top edge
    int tx = std::max(0, std::min(x0, img.width - tw));  // moved left when it would leave the image
    fill(img, tx, ty, tx + tw, ty + th, c);
    text(img, tx + 2, ty + 2, tag, scale, Rgb{255, 255, 255});
  }
  return img;
}

Image draw_masks(const Image& src, const std::vector<Mask>& masks, const std::vector<std::string>& labels) {
  Image img = src;
  for (size_t m = 0; m < masks.size(); m++) {
    const Mask& mask = masks[m];
    VLRT_CHECK(mask.width == img.width && mask.height == img.height, "a ", mask.width, "x", mask.height,
               " mask cannot be drawn on a ", img.width, "x", img.height, " image");
    Rgb c = label_color(m < labels.size() ? labels[m] : std::string());
    for (size_t i = 0; i < mask.pixels.size(); i++) {
      if (!mask.pixels[i]) continue;
      uint8_t* p = &img.rgb[i * 3];
      const uint8_t colour[3] = {c.r, c.g, c.b};
      for (int k = 0; k < 3; k++) p[k] = uint8_t((p[k] + colour[k] + 1) / 2);
    }
  }
  return img;
}

}  // namespace vlrt::vision
