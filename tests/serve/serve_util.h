// Shared by the serve tests: the tiny GroundingDINO-contract fixture model, images made in
// memory, and a server on a free loopback port inside the test process.
#pragma once

#include <httplib.h>
#include <stb/stb_image_write.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "cli_util.h"
#include "integrity/load_model.h"
#include "pipelines/grounding/detector.h"
#include "serve/server.h"

namespace vlrt::test {

inline std::string tiny_grounding_model() { return source_path("tests/fixtures/grounding/tiny/model.onnx"); }

inline std::unique_ptr<grounding::Detector> tiny_detector() {
  Model m = load_model(tiny_grounding_model());
  return std::make_unique<grounding::Detector>(
      std::move(m), source_path("tests/fixtures/grounding/tiny/vocab.txt"), SessionOptions{});
}

inline grounding::Image noise_image(int w, int h, uint32_t seed) {
  grounding::Image img{w, h, std::vector<uint8_t>(size_t(w) * h * 3)};
  std::mt19937 rng(seed);
  for (auto& p : img.rgb) p = uint8_t(rng());
  return img;
}

inline std::string png_bytes(int w, int h, uint32_t seed = 1) {
  return grounding::encode_png(noise_image(w, h, seed));
}

inline std::string jpeg_bytes(int w, int h, uint32_t seed = 1) {
  grounding::Image img = noise_image(w, h, seed);
  std::string out;
  auto write = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<char*>(data), size_t(size));
  };
  stbi_write_jpg_to_func(write, &out, w, h, 3, img.rgb.data(), 90);
  return out;
}

// A server for the tiny model on 127.0.0.1, any free port; drains when destroyed.
struct TestServer {
  explicit TestServer(serve::ServeOptions o = {}) {
    o.port = 0;
    server = std::make_unique<serve::Server>(tiny_detector(), o, 0.01);
    port = server->start();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(20);
    return c;
  }
  std::unique_ptr<serve::Server> server;
  int port = 0;
};

inline httplib::Result post_detect(httplib::Client& c, const std::string& image, const std::string& prompt,
                                   const httplib::MultipartFormDataItems& extra = {}) {
  httplib::MultipartFormDataItems form = {{"image", image, "image.png", "image/png"},
                                          {"prompt", prompt, "", ""}};
  form.insert(form.end(), extra.begin(), extra.end());
  return c.Post("/v1/detect", form);
}

inline nlohmann::json body_json(const httplib::Result& r) {
  return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
}

// The value of one sample line of a Prometheus text page ("name{labels}"), -1 when absent.
inline double metric_value(const std::string& page, const std::string& series) {
  size_t at = page.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::atof(page.c_str() + at + series.size() + 2);
}

}  // namespace vlrt::test
