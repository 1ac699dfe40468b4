// WebP (libwebp) and TIFF (libtiff) decoding from memory; the formats stb_image does not read.
#include "vision/image_formats.h"

#include <tiffio.h>
#include <webp/decode.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/error.h"

namespace vlrt::vision {

namespace {

const char* webp_status(VP8StatusCode s) {
  switch (s) {
    case VP8_STATUS_OUT_OF_MEMORY:
      return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
      return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
      return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      return "unsupported feature";
    case VP8_STATUS_NOT_ENOUGH_DATA:
      return "not enough data";
    default:
      return "decoder error";
  }
}


// libtiff reads through these from a string in memory.
struct TiffSource {
  const std::string& bytes;
  toff_t pos = 0;
  std::string error;  // the first error libtiff reported
};

tmsize_t tiff_read(thandle_t h, void* buf, tmsize_t n) {
  auto* s = static_cast<TiffSource*>(h);
  if (s->pos >= s->bytes.size()) return 0;
  size_t count = std::min<size_t>(size_t(n), s->bytes.size() - s->pos);
  std::memcpy(buf, s->bytes.data() + s->pos, count);
  s->pos += count;
  return tmsize_t(count);
}
tmsize_t tiff_write(thandle_t, void*, tmsize_t) { return 0; }
toff_t tiff_seek(thandle_t h, toff_t off, int whence) {
  auto* s = static_cast<TiffSource*>(h);
  toff_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? s->pos : s->bytes.size();
  s->pos = base + off;
  return s->pos;
}
int tiff_close(thandle_t) { return 0; }
toff_t tiff_size(thandle_t h) { return static_cast<TiffSource*>(h)->bytes.size(); }
int tiff_map(thandle_t, void**, toff_t*) { return 0; }
void tiff_unmap(thandle_t, void*, toff_t) {}

// Non-zero: libtiff's global handler (stderr) is not called as well.
int tiff_error(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* s = static_cast<TiffSource*>(user);
  if (s->error.empty()) {
    char msg[512];
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    s->error = module ? cat(module, ": ", msg) : std::string(msg);
  }
  return 1;
}
int tiff_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

}  // namespace

Image decode_webp(const std::string& bytes, const std::string& what, int64_t max_pixels) {
  auto data = reinterpret_cast<const uint8_t*>(bytes.data());
  WebPBitstreamFeatures f;
  VP8StatusCode s = WebPGetFeatures(data, bytes.size(), &f);
  if (s == VP8_STATUS_NOT_ENOUGH_DATA) fail(what, ": truncated WebP (the header is incomplete)");
  if (s != VP8_STATUS_OK) fail(what, ": unreadable WebP header (", webp_status(s), "); the file is corrupt");
  check_pixels(what, f.width, f.height, max_pixels);
  if (f.has_animation) fail(what, ": animated WebP is not supported; save its first frame as a still image");
  Image img{f.width, f.height, std::vector<uint8_t>(size_t(f.width) * f.height * 3)};
  WebPDecoderConfig config;
  WebPInitDecoderConfig(&config);
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = img.rgb.data();
  config.output.u.RGBA.stride = f.width * 3;
  config.output.u.RGBA.size = img.rgb.size();
  s = WebPDecode(data, bytes.size(), &config);
  WebPFreeDecBuffer(&config.output);
  if (s == VP8_STATUS_NOT_ENOUGH_DATA) fail(what, ": truncated WebP (the image data ends early)");
  if (s != VP8_STATUS_OK) fail(what, ": cannot decode WebP (", webp_status(s), "); the file is corrupt");
  return img;
}

Image decode_tiff(const std::string& bytes, const std::string& what, int64_t max_pixels) {
  TiffSource src{bytes, 0, {}};
  std::unique_ptr<TIFFOpenOptions, void (*)(TIFFOpenOptions*)> opts(TIFFOpenOptionsAlloc(),
                                                                    TIFFOpenOptionsFree);
  TIFFOpenOptionsSetErrorHandlerExtR(opts.get(), tiff_error, &src);
  TIFFOpenOptionsSetWarningHandlerExtR(opts.get(), tiff_warning, nullptr);
  std::unique_ptr<TIFF, void (*)(TIFF*)> tif(
      TIFFClientOpenExt(what.c_str(), "rm", &src, tiff_read, tiff_write, tiff_seek, tiff_close, tiff_size,
                        tiff_map, tiff_unmap, opts.get()),
      TIFFClose);
  if (!tif) fail(what, ": unreadable TIFF header (", src.error, "); the file is truncated or corrupt");
  uint32_t w = 0, h = 0;
  TIFFGetField(tif.get(), TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(tif.get(), TIFFTAG_IMAGELENGTH, &h);
  check_pixels(what, w, h, max_pixels);
  std::vector<uint32_t> abgr(size_t(w) * h);
  // Only the first page (directory), as for GIF's first frame.
  if (!TIFFReadRGBAImageOriented(tif.get(), w, h, abgr.data(), ORIENTATION_TOPLEFT, /*stopOnError=*/1))
    fail(what, ": cannot decode TIFF (", src.error.empty() ? "unsupported layout" : src.error,
         "); the file is truncated or corrupt");
  Image img{int(w), int(h), std::vector<uint8_t>(abgr.size() * 3)};
  for (size_t i = 0; i < abgr.size(); i++) {
    img.rgb[i * 3] = uint8_t(TIFFGetR(abgr[i]));
    img.rgb[i * 3 + 1] = uint8_t(TIFFGetG(abgr[i]));
    img.rgb[i * 3 + 2] = uint8_t(TIFFGetB(abgr[i]));
  }
  return img;
}

void check_pixels(const std::string& what, int64_t w, int64_t h, int64_t max_pixels) {
  if (w <= 0 || h <= 0) fail(what, ": image has no pixels (", w, "x", h, ")");
  if (w > max_pixels / h)  // a header's sizes go to 2^32 each: their product can overflow
    fail(what, ": image is ", w, "x", h, " (", uint64_t(w) * uint64_t(h), " pixels), more than the limit of ",
         max_pixels, " pixels; downscale it first");
}

}  // namespace vlrt::vision
