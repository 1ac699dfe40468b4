// Shared by the serve tests: the shipped demo model and image, images made in memory, and a
// server on a free loopback port inside the test process.
#pragma once

#include <httplib.h>
#include <stb/stb_image_write.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "cli_util.h"
#include "integrity/load_model.h"
#include "io/base64.h"
#include "io/files.h"
#include "pipelines/grounding/detector.h"
#include "pipelines/pipeline.h"
#include "serve/server.h"

namespace vlrt::test {

inline std::string demo_model() { return source_path("models/demo/model.onnx"); }

inline std::unique_ptr<grounding::Detector> demo_detector() {
  Model m = load_model(demo_model());
  return std::make_unique<grounding::Detector>(std::move(m), source_path("models/demo/vocab.txt"),
                                               SessionOptions{});
}

inline std::unique_ptr<Pipeline> demo_pipeline() {
  PipelineConfig config;
  config.vocab = source_path("models/demo/vocab.txt");
  return find_pipeline("grounding").make(load_model(demo_model()), config);
}

// The demo image (assets/demo.png) and the prompt naming what is in it.
inline std::string demo_png() { return read_file(source_path("assets/demo.png")); }
inline std::string demo_prompt() {
  return nlohmann::json::parse(read_file(source_path("assets/demo.json")))["prompt"].get<std::string>();
}

inline vision::Image noise_image(int w, int h, uint32_t seed) {
  vision::Image img{w, h, std::vector<uint8_t>(size_t(w) * h * 3)};
  std::mt19937 rng(seed);
  for (auto& p : img.rgb) p = uint8_t(rng());
  return img;
}

inline std::string png_bytes(int w, int h, uint32_t seed = 1) {
  return vision::encode_png(noise_image(w, h, seed));
}

inline std::string jpeg_bytes(const vision::Image& img) {
  std::string out;
  auto write = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<char*>(data), size_t(size));
  };
  stbi_write_jpg_to_func(write, &out, img.width, img.height, 3, img.rgb.data(), 90);
  return out;
}

inline std::string jpeg_bytes(int w, int h, uint32_t seed = 1) { return jpeg_bytes(noise_image(w, h, seed)); }

inline serve::ServeOptions on_any_port(serve::ServeOptions o) {
  o.port = 0;
  return o;
}

// A server on 127.0.0.1, any free port (the demo model's unless one is given); drains when
// destroyed.
struct TestServer {
  explicit TestServer(serve::ServeOptions o = {})
      : TestServer(std::make_unique<serve::Server>(demo_pipeline(), on_any_port(o), 0.01)) {}
  // `s` was made with on_any_port's options; clients wait `read_timeout_s` for an answer.
  explicit TestServer(std::unique_ptr<serve::Server> s, int read_timeout_s = 20)
      : server(std::move(s)), port(server->start()), read_timeout_s(read_timeout_s) {}
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(read_timeout_s);
    return c;
  }
  std::unique_ptr<serve::Server> server;
  int port = 0;
  int read_timeout_s = 20;
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
