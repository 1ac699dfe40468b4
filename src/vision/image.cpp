#include "vision/image.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "io/files.h"
#include "vision/image_formats.h"

#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STBI_NO_STDIO
#define STBI_FAILURE_USERMSG
#include <stb/stb_image.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include <stb/stb_image_write.h>

namespace vlrt::vision {

namespace {

bool is_jpeg(const std::string& b) { return image_format(b) == ImageFormat::jpeg; }
bool is_png(const std::string& b) { return image_format(b) == ImageFormat::png; }
bool is_bmp(const std::string& b) { return image_format(b) == ImageFormat::bmp; }
bool is_gif(const std::string& b) { return image_format(b) == ImageFormat::gif; }

// A GIF ends with the trailer byte ';'; stb_image decodes a cut file without complaint.
bool gif_complete(const std::string& b) {
  size_t end = b.size();
  while (end > 0 && b[end - 1] == 0) end--;
  return end > 0 && b[end - 1] == ';';
}

// A JPEG ends with the EOI marker; stb_image decodes a cut file without complaint.
bool jpeg_complete(const std::string& b) {
  size_t end = b.size();
  while (end > 2 && (b[end - 1] == 0 || b[end - 1] == '\n' || b[end - 1] == '\r')) end--;
  for (size_t i = end; i-- > std::max<size_t>(2, end > 64 ? end - 64 : 2);)
    if (uint8_t(b[i - 1]) == 0xFF && uint8_t(b[i]) == 0xD9) return true;
  return false;
}

uint32_t read_u16(const uint8_t* p, bool le) { return le ? p[0] | (p[1] << 8) : (p[0] << 8) | p[1]; }
uint32_t read_u32(const uint8_t* p, bool le) {
  return le ? p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t(p[3]) << 24)
            : (uint32_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
}

// Width and height from the file header alone, so an absurd size is refused before
// any decoder allocates for it. False when the header cannot be read.
bool header_size(const std::string& b, int64_t& w, int64_t& h) {
  auto p = reinterpret_cast<const uint8_t*>(b.data());
  if (is_png(b)) {
    if (b.size() < 24) return false;
    w = read_u32(p + 16, false);
    h = read_u32(p + 20, false);
    return true;
  }
  if (is_gif(b)) {
    if (b.size() < 10) return false;
    w = read_u16(p + 6, true);
    h = read_u16(p + 8, true);
    return true;
  }
  if (is_bmp(b)) {
    if (b.size() < 26) return false;
    w = int32_t(read_u32(p + 18, true));
    h = int32_t(read_u32(p + 22, true));
    if (h < 0) h = -h;  // top-down bitmap
    return true;
  }
  size_t i = 2;  // JPEG: the first start-of-frame marker carries the size
  while (i + 9 <= b.size() && p[i] == 0xFF) {
    uint8_t m = p[i + 1];
    size_t len = read_u16(p + i + 2, false);
    if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
      h = read_u16(p + i + 5, false);
      w = read_u16(p + i + 7, false);
      return true;
    }
    if (len < 2) return false;
    i += 2 + len;
  }
  return false;
}

}  // namespace

ImageFormat image_format(const std::string& b) {
  auto starts = [&](std::string_view sig, size_t at = 0) {
    return b.size() > at + sig.size() && b.compare(at, sig.size(), sig) == 0;
  };
  if (b.size() > 3 && uint8_t(b[0]) == 0xFF && uint8_t(b[1]) == 0xD8) return ImageFormat::jpeg;
  if (starts("\x89PNG\r\n\x1a\n")) return ImageFormat::png;
  if (starts("GIF87a") || starts("GIF89a")) return ImageFormat::gif;
  if (starts("RIFF") && starts("WEBP", 8)) return ImageFormat::webp;
  if (starts(std::string_view("II*\0", 4)) || starts(std::string_view("MM\0*", 4)) ||
      starts(std::string_view("II+\0", 4)) || starts(std::string_view("MM\0+", 4)))
    return ImageFormat::tiff;  // classic and BigTIFF, either byte order
  if (starts("BM")) return ImageFormat::bmp;
  return ImageFormat::unknown;
}

bool looks_like_image(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char head[16] = {};
  f.read(head, sizeof head);
  return image_format(std::string(head, size_t(f.gcount()))) != ImageFormat::unknown;
}

int jpeg_orientation(const std::string& bytes) {
  if (!is_jpeg(bytes)) return 1;
  auto p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size(), i = 2;
  while (i + 4 <= n && p[i] == 0xFF) {
    uint8_t marker = p[i + 1];
    size_t len = read_u16(p + i + 2, false);
    if (marker == 0xDA || len < 2 || i + 2 + len > n) break;  // start of scan: no more headers
    if (marker == 0xE1 && len >= 16 && std::memcmp(p + i + 4, "Exif\0\0", 6) == 0) {
      const uint8_t* tiff = p + i + 10;
      size_t tlen = len - 8;
      bool le = tiff[0] == 'I';
      if (tlen < 8) return 1;
      size_t ifd = read_u32(tiff + 4, le);
      if (ifd + 2 > tlen) return 1;
      size_t count = read_u16(tiff + ifd, le);
      for (size_t e = 0; e < count; e++) {
        size_t off = ifd + 2 + e * 12;
        if (off + 12 > tlen) return 1;
        if (read_u16(tiff + off, le) == 0x0112) {
          int v = int(read_u16(tiff + off + 8, le));
          return v >= 1 && v <= 8 ? v : 1;
        }
      }
      return 1;
    }
    i += 2 + len;
  }
  return 1;
}

Image apply_orientation(const Image& img, int orientation) {
  if (orientation <= 1 || orientation > 8) return img;
  bool swap = orientation >= 5;
  Image out;
  out.width = swap ? img.height : img.width;
  out.height = swap ? img.width : img.height;
  out.rgb.resize(img.rgb.size());
  for (int y = 0; y < out.height; y++) {
    for (int x = 0; x < out.width; x++) {
      int sx, sy;  // source pixel for output (x, y), per the EXIF definition of each orientation
      switch (orientation) {
        case 2: sx = img.width - 1 - x; sy = y; break;
        case 3: sx = img.width - 1 - x; sy = img.height - 1 - y; break;
        case 4: sx = x; sy = img.height - 1 - y; break;
        case 5: sx = y; sy = x; break;
        case 6: sx = y; sy = img.height - 1 - x; break;
        case 7: sx = img.width - 1 - y; sy = img.height - 1 - x; break;
        default: sx = img.width - 1 - y; sy = x; break;  // 8
      }
      std::memcpy(&out.rgb[(size_t(y) * out.width + x) * 3], &img.rgb[(size_t(sy) * img.width + sx) * 3], 3);
    }
  }
  return out;
}

namespace {

// Where the entropy-coded data that starts at i ends, as stb's bit reader sees it: at the first 0xFF
// that, after any 0xFF fill bytes, is followed by neither a stuffed 0x00 nor a restart marker.
// Returns the index of that marker's last 0xFF (or n).
size_t end_of_scan(const uint8_t* p, size_t n, size_t i) {
  while (i < n) {
    if (p[i] != 0xFF) {
      i++;
      continue;
    }
    size_t j = i + 1;
    while (j < n && p[j] == 0xFF) j++;
    if (j >= n) return n;
    if (p[j] != 0x00 && !(p[j] >= 0xD0 && p[j] <= 0xD7)) return j - 1;
    i = j + 1;
  }
  return n;
}

// stb_image 2.27 (Debian 12's) writes past its Huffman tables when the code counts of a DHT table
// add up to more than 256, as no valid JPEG's do; such a file is refused before stb reads it.
// Walks the segments as stb does: bytes up to the next 0xFF, marker segments, and after a start of
// scan its entropy-coded data up to the next marker that is not a restart. A DHT segment is read as
// stb reads it: table after table while its declared length lasts, even past the segment's end.
void check_jpeg_huffman_tables(const std::string& bytes, const std::string& what) {
  auto p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size(), i = 2;
  auto is_restart = [](uint8_t m) { return m >= 0xD0 && m <= 0xD7; };
  while (i + 4 <= n) {
    uint8_t marker = p[i + 1];
    if (p[i] != 0xFF || marker == 0xFF) { i++; continue; }
    if (marker == 0xD9) return;  // end of image
    if (marker == 0xD8 || marker == 0x01 || is_restart(marker)) { i += 2; continue; }  // no length
    size_t len = read_u16(p + i + 2, false);
    if (marker == 0xC4) {
      int64_t left = int64_t(len) - 2;
      for (size_t t = i + 4; left > 0 && t < n;) {
        size_t codes = 0;  // stb reads zeros past the end of the file
        for (size_t k = 1; k <= 16 && t + k < n; k++) codes += p[t + k];
        if (codes > 256)
          fail(what, ": corrupt JPEG (a Huffman table of ", codes, " codes, more than 256); export it again");
        left -= int64_t(17 + codes);
        t += 17 + codes;
      }
    }
    i += 2 + len;
    if (marker == 0xDA) i = end_of_scan(p, n, i);
  }
}

// stb_image grows its buffer to a PNG chunk's declared length before reading it, so a chunk that
// claims more bytes than the file holds (a hundred-byte file declaring a 1.4 GB IDAT) would be
// allocated in full; such a file is refused first. Walks the chunks (length, type, data, CRC) up
// to IEND.
void check_png_chunks(const std::string& bytes, const std::string& what) {
  auto printable = [](std::string s) {
    for (char& ch : s)
      if (ch < 0x20 || ch > 0x7e) ch = '?';
    return s;
  };
  auto p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size(), i = 8;
  while (i + 8 <= n) {
    uint64_t length = read_u32(p + i, false);
    std::string type(bytes, i + 4, 4);
    if (length > n - (i + 8))
      fail(what, ": truncated or corrupt PNG (its '", printable(type), "' chunk declares ", length,
           " bytes but only ", n - (i + 8), " follow)");
    if (type == "IEND") return;
    i += 12 + length;
  }
}

}  // namespace

Image decode_image(const std::string& bytes, const std::string& what, int64_t max_pixels) {
  if (bytes.empty()) fail(what, ": empty file, not an image");
  ImageFormat format = image_format(bytes);
  if (format == ImageFormat::unknown)
    fail(what, ": not an image (its first bytes are no PNG, JPEG, BMP, GIF, WebP or TIFF signature)");
  if (format == ImageFormat::webp) return decode_webp(bytes, what, max_pixels);
  if (format == ImageFormat::tiff) return decode_tiff(bytes, what, max_pixels);
  if (bytes.size() > size_t(INT32_MAX)) fail(what, ": file too large");
  if (format == ImageFormat::jpeg) check_jpeg_huffman_tables(bytes, what);
  if (format == ImageFormat::png) check_png_chunks(bytes, what);
  auto data = reinterpret_cast<const stbi_uc*>(bytes.data());
  int64_t hw = 0, hh = 0;
  if (header_size(bytes, hw, hh)) check_pixels(what, hw, hh, max_pixels);
  int w = 0, h = 0, c = 0;
  if (!stbi_info_from_memory(data, int(bytes.size()), &w, &h, &c))
    fail(what, ": unreadable image header (", stbi_failure_reason(), "); the file is truncated or corrupt");
  check_pixels(what, w, h, max_pixels);  // stb may find a size where header_size did not
  if (is_jpeg(bytes) && !jpeg_complete(bytes)) fail(what, ": truncated JPEG (no end-of-image marker)");
  if (is_gif(bytes) && !gif_complete(bytes)) fail(what, ": truncated GIF (no trailer)");
  // For a GIF, stb_image gives the first frame.
  stbi_uc* px = stbi_load_from_memory(data, int(bytes.size()), &w, &h, &c, 3);
  if (!px) fail(what, ": cannot decode image (", stbi_failure_reason(), "); the file is truncated or corrupt");
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.assign(px, px + size_t(w) * h * 3);
  stbi_image_free(px);
  return apply_orientation(img, jpeg_orientation(bytes));
}

Image load_image(const std::string& path, int64_t max_pixels) {
  return decode_image(read_file(path), path, max_pixels);
}

std::pair<int, int> target_size(int width, int height, const ResizeOptions& o) {
  if (o.fixed_width > 0 && o.fixed_height > 0) return {o.fixed_width, o.fixed_height};
  // GroundingDINO's get_size_with_aspect_ratio, in the same float arithmetic.
  double size = o.short_side;
  double min_side = std::min(width, height), max_side = std::max(width, height);
  if (o.max_side > 0 && max_side / min_side * size > o.max_side)
    size = std::round(double(o.max_side) * min_side / max_side);
  int s = int(size);
  if ((width <= height && width == s) || (height <= width && height == s)) return {width, height};
  if (width < height) return {s, int(s * double(height) / width)};
  return {int(s * double(width) / height), s};
}

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

// A PIL resampling filter: its support (at scale 1) and its kernel.
struct ResampleFilter {
  double support;
  double (*kernel)(double x);
};

double triangle_kernel(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic convolution with a = -0.5, as PIL's bicubic_filter writes it.
double bicubic_kernel(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

constexpr ResampleFilter kBilinear{1.0, triangle_kernel};
constexpr ResampleFilter kBicubic{2.0, bicubic_kernel};

// PIL's precompute_coeffs and normalize_coeffs_8bpc: per output pixel, the first input index,
// the count and the filter's weights in 8-bit fixed point.
struct Coeffs {
  int ksize = 0;
  std::vector<int> bounds;  // per output pixel: first input index, count
  std::vector<int32_t> k;   // ksize weights per output pixel
};

Coeffs precompute(int in_size, int out_size, const ResampleFilter& filter) {
  double scale = double(in_size) / out_size;
  double filterscale = std::max(scale, 1.0);
  double support = filter.support * filterscale;
  Coeffs c;
  c.ksize = int(std::ceil(support)) * 2 + 1;
  c.bounds.resize(size_t(out_size) * 2);
  c.k.assign(size_t(out_size) * c.ksize, 0);
  std::vector<double> kd(c.ksize);
  for (int xx = 0; xx < out_size; xx++) {
    double center = (xx + 0.5) * scale;
    double ss = 1.0 / filterscale;
    int xmin = std::max(int(center - support + 0.5), 0);
    int xmax = std::min(int(center + support + 0.5), in_size) - xmin;
    double ww = 0;
    for (int x = 0; x < xmax; x++) {
      double w = filter.kernel((x + xmin - center + 0.5) * ss);
      kd[x] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; x++) {
      double v = ww != 0.0 ? kd[x] / ww : 0.0;
      c.k[size_t(xx) * c.ksize + x] = int32_t(v < 0 ? v * (1 << kPrecisionBits) - 0.5 : v * (1 << kPrecisionBits) + 0.5);
    }
    c.bounds[xx * 2] = xmin;
    c.bounds[xx * 2 + 1] = xmax;
  }
  return c;
}

uint8_t clip8(int64_t v) {
  v >>= kPrecisionBits;
  return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
}

// PIL's ImagingResample on 8-bit RGB: a horizontal pass, then a vertical one, each skipped
// when that side keeps its size.
Image resample(const Image& img, int width, int height, const ResampleFilter& filter) {
  VLRT_CHECK(width > 0 && height > 0, "cannot resize to ", width, "x", height);
  VLRT_CHECK(img.width > 0 && img.height > 0, "cannot resize an empty ", img.width, "x", img.height, " image");
  Image cur = img;
  if (width != img.width) {
    Coeffs c = precompute(img.width, width, filter);
    Image out{width, img.height, std::vector<uint8_t>(size_t(width) * img.height * 3)};
    for (int y = 0; y < img.height; y++) {
      const uint8_t* row = &img.rgb[size_t(y) * img.width * 3];
      for (int xx = 0; xx < width; xx++) {
        int xmin = c.bounds[xx * 2], xmax = c.bounds[xx * 2 + 1];
        const int32_t* k = &c.k[size_t(xx) * c.ksize];
        for (int ch = 0; ch < 3; ch++) {
          int64_t ss = int64_t(1) << (kPrecisionBits - 1);
          for (int x = 0; x < xmax; x++) ss += int64_t(row[(x + xmin) * 3 + ch]) * k[x];
          out.rgb[(size_t(y) * width + xx) * 3 + ch] = clip8(ss);
        }
      }
    }
    cur = std::move(out);
  }
  if (height != cur.height) {
    Coeffs c = precompute(cur.height, height, filter);
    Image out{cur.width, height, std::vector<uint8_t>(size_t(cur.width) * height * 3)};
    for (int yy = 0; yy < height; yy++) {
      int ymin = c.bounds[yy * 2], ymax = c.bounds[yy * 2 + 1];
      const int32_t* k = &c.k[size_t(yy) * c.ksize];
      for (int x = 0; x < cur.width * 3; x++) {
        int64_t ss = int64_t(1) << (kPrecisionBits - 1);
        for (int y = 0; y < ymax; y++) ss += int64_t(cur.rgb[size_t(y + ymin) * cur.width * 3 + x]) * k[y];
        out.rgb[size_t(yy) * cur.width * 3 + x] = clip8(ss);
      }
    }
    cur = std::move(out);
  }
  return cur;
}

}  // namespace

Image resize_bilinear(const Image& img, int width, int height) { return resample(img, width, height, kBilinear); }

Image resize_bicubic(const Image& img, int width, int height) { return resample(img, width, height, kBicubic); }

Tensor normalize_images(const std::vector<const Image*>& images) {
  VLRT_CHECK(!images.empty(), "no images to normalize");
  int w = images[0]->width, h = images[0]->height;
  Tensor t(DType::f32, {int64_t(images.size()), 3, h, w});
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  float* out = t.data<float>();
  for (size_t b = 0; b < images.size(); b++) {
    const Image& img = *images[b];
    VLRT_CHECK(img.width == w && img.height == h, "images of one batch must have one size: ", img.width, "x",
               img.height, " vs ", w, "x", h);
    for (int ch = 0; ch < 3; ch++) {
      float* plane = out + (b * 3 + ch) * size_t(w) * h;
      for (size_t i = 0; i < size_t(w) * h; i++) plane[i] = (float(img.rgb[i * 3 + ch]) / 255.0f - mean[ch]) / stdev[ch];
    }
  }
  return t;
}

std::string encode_png(const Image& img) {
  std::string out;
  auto write = [](void* ctx, void* data, int size) { static_cast<std::string*>(ctx)->append(static_cast<char*>(data), size_t(size)); };
  if (!stbi_write_png_to_func(write, &out, img.width, img.height, 3, img.rgb.data(), img.width * 3))
    fail("cannot encode a ", img.width, "x", img.height, " PNG");
  return out;
}

}  // namespace vlrt::vision
