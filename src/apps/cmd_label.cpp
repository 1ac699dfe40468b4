// vlrt label DIR: detections for every image under DIR, written as COCO, YOLO (with its
// data.yaml) or LabelMe annotations; with --masks, SAM masks as COCO RLE or polygons, YOLO-seg
// lines and LabelMe polygons. Resumable, and an unreadable image does not stop the run.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "apps/pipeline_options.h"
#include "io/files.h"
#include "vision/contour.h"

namespace vlrt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct LabelArgs {
  std::string dir;
  QueryArgs q;
  std::string format = "coco";
  std::string out;
  int batch = 0;
  std::string masks;        // SAM model folder
  std::string mask_format;  // rle or polygon; default: rle for coco (the only one that holds it)
  double polygon_tolerance = 1.0;
  PipelineArgs p;
};

// Records and annotations mirror the image folders, which may not exist under the output yet.
void write_output_file(const fs::path& path, const std::string& data) {
  fs::create_directories(path.parent_path());
  write_file_atomically(path.string(), data);
}

// Files named as images (an unreadable one is reported, not passed over), and files of any
// name whose first bytes are an image format's signature.
std::vector<std::string> find_images(const fs::path& dir) {
  static const std::set<std::string> kImageExtensions = {".png", ".jpg",  ".jpeg", ".bmp",
                                                         ".gif", ".webp", ".tif",  ".tiff"};
  std::vector<std::string> out;
  for (auto& e : fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied)) {
    if (!e.is_regular_file()) continue;
    std::string ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    if (kImageExtensions.count(ext) || vision::looks_like_image(e.path().string()))
      out.push_back(fs::relative(e.path(), dir).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string format_duration(double s) {
  int t = int(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%d:%02d", t / 60, t % 60);
  return buf;
}

// A bar on a terminal; a line every few seconds otherwise (logs, CI).
class Progress {
 public:
  explicit Progress(size_t total) : total_(total), tty_(isatty(2)), start_(std::chrono::steady_clock::now()) {}
  void update(size_t done, size_t fresh) {
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    double rate = el > 0 ? double(fresh) / el : 0;
    double eta = rate > 0 ? double(total_ - done) / rate : 0;
    char line[160];
    if (tty_) {
      int width = 30, fill = total_ ? int(double(done) / double(total_) * width) : width;
      std::snprintf(line, sizeof line, "\r[%-*s] %zu/%zu images  %.1f img/s  ETA %s ", width,
                    std::string(size_t(fill), '=').c_str(), done, total_, rate, format_duration(eta).c_str());
      std::cerr << line << std::flush;
    } else if (el - last_print_ >= 5 || done == total_) {
      last_print_ = el;
      std::snprintf(line, sizeof line, "%zu/%zu images  %.1f img/s  ETA %s\n", done, total_, rate,
                    format_duration(eta).c_str());
      std::cerr << line;
    }
  }
  void finish() {
    if (tty_) std::cerr << "\n";
  }

 private:
  size_t total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  double last_print_ = -1e9;
};

// A record keeps each detection's mask (when there are masks) as RLE; the writers make
// polygons from it.
json record_json(const Record& rec, const std::vector<vision::Mask>& masks) {
  json r = {{"width", rec.width}, {"height", rec.height}, {"detections", json::array()}};
  for (size_t i = 0; i < rec.detections.size(); i++) {
    const auto& d = rec.detections[i];
    r["detections"].push_back(
        {{"label", d.label}, {"class", d.category}, {"score", d.score}, {"box", {d.x1, d.y1, d.x2, d.y2}}});
    if (!masks.empty()) {
      r["detections"].back()["area"] = vision::mask_area(masks[i]);
      r["detections"].back()["segmentation"] = segment::rle_json(masks[i]);
    }
  }
  return r;
}

vision::Mask record_mask(const json& d) {
  const json& seg = d["segmentation"];
  return vision::mask_from_rle(seg["size"][1], seg["size"][0], seg["counts"].get<std::vector<int64_t>>());
}

// A detection's outline for the polygon formats: the outer contours of its mask (every
// component's, or the largest's), simplified; its box when the mask is empty.
std::vector<vision::Polygon> detection_polygons(const json& d, double tolerance, bool largest_only) {
  std::vector<vision::Polygon> polygons = vision::mask_polygons(record_mask(d), tolerance, largest_only);
  if (polygons.empty()) {
    double x1 = d["box"][0], y1 = d["box"][1], x2 = d["box"][2], y2 = d["box"][3];
    polygons.push_back({{x1, y1}, {x2, y1}, {x2, y2}, {x1, y2}});
  }
  return polygons;
}

// COCO's segmentation of a detection with a mask: its RLE, or its polygons as [x1,y1,x2,y2,...].
json coco_segmentation(const json& d, const std::string& mask_format, double tolerance) {
  if (mask_format == "rle") return d["segmentation"];
  json polygons = json::array();
  for (auto& polygon : detection_polygons(d, tolerance, false)) {
    json flat = json::array();
    for (auto& p : polygon) flat.push_back(p.x), flat.push_back(p.y);
    polygons.push_back(flat);
  }
  return polygons;
}

// A YOLO-seg line: the class id, then the largest component's outline as x y pairs in 0..1.
std::string yolo_seg_line(int class_id, const json& d, int w, int h, double tolerance) {
  std::string line = std::to_string(class_id);
  char xy[64];
  vision::Polygon outline = detection_polygons(d, tolerance, true)[0];
  for (auto& p : outline) {
    std::snprintf(xy, sizeof xy, " %.6f %.6f", std::clamp(p.x / w, 0.0, 1.0), std::clamp(p.y / h, 0.0, 1.0));
    line += xy;
  }
  return line + "\n";
}

// The mask format the options ask for: rle or polygon; fails on one the output format cannot hold.
std::string mask_format_of(const LabelArgs& a) {
  if (a.masks.empty()) {
    if (!a.mask_format.empty()) fail("--mask-format needs --masks SAM_DIR (the masks to write)");
    return "";
  }
  if (a.mask_format.empty()) return a.format == "coco" ? "rle" : "polygon";
  if (a.mask_format != "rle" && a.mask_format != "polygon")
    fail("--mask-format must be rle or polygon, got '", a.mask_format, "'");
  if (a.mask_format == "rle" && a.format != "coco")
    fail("--mask-format rle: --format ", a.format, " cannot hold RLE masks (",
         a.format == "yolo" ? "YOLO-seg lines are polygons" : "LabelMe shapes are polygons",
         "); use --format coco for RLE, or --mask-format polygon");
  return a.mask_format;
}

// YOLO class names by id: the ontology's ids, a gap (ids not given to any class) named
// class_<id> so that nc and the names agree.
std::vector<std::string> yolo_names(const Ontology& classes) {
  std::vector<std::string> names;
  for (size_t c = 0; c < classes.classes.size(); c++) {
    size_t id = size_t(classes.class_id(c));
    if (names.size() <= id) names.resize(id + 1);
    names[id] = classes.classes[c].name;
  }
  for (size_t id = 0; id < names.size(); id++)
    if (names[id].empty()) names[id] = cat("class_", id);
  return names;
}

// A double-quoted YAML scalar.
std::string yaml_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Ultralytics' dataset file: the root, the number of classes and their names by id.
std::string yolo_data_yaml(const fs::path& out, const fs::path& images,
                           const std::vector<std::string>& names) {
  std::string y = cat("# YOLO labels (labels/*.txt) for the images under ", images.generic_string(), "\n");
  y += cat("path: ", yaml_quoted(fs::absolute(out).lexically_normal().generic_string()), "\n");
  y += cat("nc: ", names.size(), "\nnames:\n");
  for (size_t id = 0; id < names.size(); id++) y += cat("  ", id, ": ", yaml_quoted(names[id]), "\n");
  return y;
}

// The annotations of every labelled image, in the chosen format. A record's "class" indexes
// the ontology's classes; COCO takes the given ids or the index + 1, YOLO the given ids or
// the index.
void write_outputs(const LabelArgs& a, const std::vector<std::string>& images, const fs::path& records,
                   const Ontology& classes, const std::string& mask_format) {
  fs::path out(a.out);
  auto coco_id = [&](int c) { return classes.explicit_ids ? classes.class_id(size_t(c)) : c + 1; };
  json coco = {{"images", json::array()}, {"annotations", json::array()}, {"categories", json::array()}};
  for (size_t c = 0; c < classes.classes.size(); c++)
    coco["categories"].push_back({{"id", coco_id(int(c))}, {"name", classes.classes[c].name}});
  int64_t ann_id = 1;
  for (size_t i = 0; i < images.size(); i++) {
    fs::path rec = records / (images[i] + ".json");
    if (!fs::exists(rec)) continue;
    json r = json::parse(read_file(rec.string()));
    int w = r["width"], h = r["height"];
    fs::path stem = fs::path(images[i]).replace_extension();
    if (a.format == "coco") {
      coco["images"].push_back({{"id", i + 1}, {"file_name", images[i]}, {"width", w}, {"height", h}});
      for (auto& d : r["detections"]) {
        int c = d["class"];
        if (c < 0) continue;
        double x1 = d["box"][0], y1 = d["box"][1], x2 = d["box"][2], y2 = d["box"][3];
        coco["annotations"].push_back({{"id", ann_id++},
                                       {"image_id", i + 1},
                                       {"category_id", coco_id(c)},
                                       {"bbox", {x1, y1, x2 - x1, y2 - y1}},
                                       {"area", (x2 - x1) * (y2 - y1)},
                                       {"iscrowd", 0},
                                       {"score", d["score"]}});
        if (d.contains("segmentation")) {
          coco["annotations"].back()["segmentation"] = coco_segmentation(d, mask_format, a.polygon_tolerance);
          coco["annotations"].back()["area"] = d["area"];
        }
      }
    } else if (a.format == "yolo") {
      std::string txt;
      char line[128];
      for (auto& d : r["detections"]) {
        int c = d["class"];
        if (c < 0) continue;
        if (d.contains("segmentation")) {
          txt += yolo_seg_line(classes.class_id(size_t(c)), d, w, h, a.polygon_tolerance);
          continue;
        }
        double x1 = d["box"][0], y1 = d["box"][1], x2 = d["box"][2], y2 = d["box"][3];
        std::snprintf(line, sizeof line, "%d %.6f %.6f %.6f %.6f\n", classes.class_id(size_t(c)),
                      (x1 + x2) / 2 / w, (y1 + y2) / 2 / h, (x2 - x1) / w, (y2 - y1) / h);
        txt += line;
      }
      write_output_file(out / "labels" / (stem.string() + ".txt"), txt);
    } else {
      json lm = {{"version", "5.0.1"},  {"flags", json::object()},        {"shapes", json::array()},
                 {"imagePath", fs::relative(fs::path(a.dir) / images[i], (out / stem).parent_path()).generic_string()},
                 {"imageData", nullptr}, {"imageHeight", h},            {"imageWidth", w}};
      // Shapes as X-AnyLabeling writes them, with a score: rectangles (four corners clockwise
      // from the top left) or, with masks, polygons (the largest component's outer contour).
      for (auto& d : r["detections"]) {
        if (int(d["class"]) < 0) continue;
        const json &x1 = d["box"][0], &y1 = d["box"][1], &x2 = d["box"][2], &y2 = d["box"][3];
        json points = {{x1, y1}, {x2, y1}, {x2, y2}, {x1, y2}};
        if (d.contains("segmentation")) {
          points = json::array();
          vision::Polygon outline = detection_polygons(d, a.polygon_tolerance, true)[0];
          for (auto& p : outline) points.push_back({p.x, p.y});
        }
        lm["shapes"].push_back({{"label", d["label"]},
                                {"score", d["score"]},
                                {"points", points},
                                {"group_id", nullptr},
                                {"description", ""},
                                {"difficult", false},
                                {"shape_type", d.contains("segmentation") ? "polygon" : "rectangle"},
                                {"flags", json::object()}});
      }
      write_output_file(out / (stem.string() + ".json"), lm.dump(2) + "\n");
    }
  }
  if (a.format == "coco") write_output_file(out / "annotations.json", coco.dump(1) + "\n");
  if (a.format == "yolo") {
    std::vector<std::string> names = yolo_names(classes);
    std::string lines;
    for (auto& n : names) lines += n + "\n";
    write_output_file(out / "classes.txt", lines);
    write_output_file(out / "data.yaml", yolo_data_yaml(out, a.dir, names));
  }
}

int label(const LabelArgs& a) {
  if (!fs::is_directory(a.dir)) fail(a.dir, ": not a directory (expected a folder of images)");
  if (a.format != "coco" && a.format != "yolo" && a.format != "labelme")
    fail("--format must be coco, yolo or labelme, got '", a.format, "'");
  std::string mask_format = mask_format_of(a);
  auto pipeline = make_pipeline(a.p);
  auto [query, classes] = make_query(*pipeline, a.q);
  auto segmenter = make_segmenter(a.masks, a.p);

  fs::path out(a.out), state = out / ".vlrt-label", records = state / "records";
  fs::create_directories(records);
  // A restart must continue the same job: the same prompt, model and thresholds.
  json run = pipeline->settings(*query);
  run["model"] = a.p.model;
  run["format"] = a.format;
  if (!a.q.classes.empty()) {
    run["classes"] = json::array();
    for (size_t p = 0; p < classes.phrases.size(); p++) {
      int c = classes.phrase_class[p];
      run["classes"].push_back({{"phrase", classes.phrases[p]},
                                {"name", classes.classes[size_t(c)].name},
                                {"id", classes.class_id(size_t(c))}});
    }
  }
  if (segmenter)
    run["masks"] = {{"sam", a.masks}, {"mask_format", mask_format}, {"polygon_tolerance", a.polygon_tolerance}};
  fs::path run_file = state / "run.json";
  if (fs::exists(run_file)) {
    json prev = json::parse(read_file(run_file.string()));
    if (prev.contains("masks") != run.contains("masks"))
      fail(a.out, " holds an earlier run made ", prev.contains("masks") ? "with" : "without",
           " masks; a resumed run cannot ", run.contains("masks") ? "add" : "drop",
           " them. Use another --out directory or delete it to start over");
    if (prev != run)
      fail(a.out, " holds an earlier run with other settings (", prev.dump(), "); use another --out directory "
           "or delete it to start over");
  } else {
    write_output_file(run_file, run.dump(2) + "\n");
  }

  std::vector<std::string> images = find_images(a.dir);
  std::vector<std::string> todo;
  for (auto& img : images)
    if (!fs::exists(records / (img + ".json"))) todo.push_back(img);
  size_t already = images.size() - todo.size();
  std::cerr << "labelling " << images.size() << " images under " << a.dir << " with \"" << query->text << "\""
            << (already ? cat(" (", already, " done in an earlier run)") : std::string()) << "\n";

  Progress progress(images.size());
  size_t done = already, fresh = 0, failed = 0, boxes = 0;
  std::map<std::string, int64_t> batch_for_key;
  auto t0 = std::chrono::steady_clock::now();
  size_t i = 0;
  while (i < todo.size()) {
    // Decode and preprocess a group of consecutive images that can share a batch (for
    // grounding: the same model input size).
    std::vector<std::string> names;
    std::vector<std::unique_ptr<Request>> requests;
    std::vector<vision::Image> decoded;  // kept for the masks
    int64_t limit = 1;
    while (i < todo.size()) {
      vision::Image img;
      try {
        img = vision::load_image((fs::path(a.dir) / todo[i]).string());
      } catch (const Error& e) {
        if (!requests.empty()) break;  // finish the group first; this image is retried next round
        std::cerr << (isatty(2) ? "\n" : "") << "skipped " << todo[i] << ": " << e.what() << "\n";
        failed++;
        done++;
        i++;
        continue;
      }
      auto r = pipeline->request(query, img);
      if (requests.empty()) {
        auto it = batch_for_key.find(r->batch_key);
        if (it == batch_for_key.end())
          it = batch_for_key.emplace(r->batch_key, a.batch > 0 ? a.batch : std::min<int64_t>(8, pipeline->max_batch(*r))).first;
        limit = it->second;
      } else if (r->batch_key != requests[0]->batch_key) {
        break;  // decoded again next round
      }
      names.push_back(todo[i]);
      requests.push_back(std::move(r));
      if (segmenter) decoded.push_back(std::move(img));
      i++;
      if (int64_t(requests.size()) >= limit) break;
    }
    if (requests.empty()) {
      progress.update(done, fresh);
      continue;
    }
    std::vector<Request*> batch;
    for (auto& r : requests) batch.push_back(r.get());
    pipeline->run(batch);
    for (size_t k = 0; k < requests.size(); k++) {
      pipeline->postprocess(*requests[k]);
      Record rec = pipeline->record(*requests[k]);
      std::vector<vision::Mask> masks;
      if (segmenter) masks = segment::segment_detections(*segmenter, decoded[k], rec.detections);
      write_output_file(records / (names[k] + ".json"), record_json(rec, masks).dump() + "\n");
      boxes += rec.detections.size();
    }
    done += requests.size();
    fresh += requests.size();
    progress.update(done, fresh);
  }
  progress.finish();
  write_outputs(a, images, records, classes, mask_format);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("labelled %zu images (%zu now, %zu from an earlier run), %zu boxes, %zu unreadable skipped, "
              "%.1f s (%.2f img/s); annotations (%s) in %s\n",
              images.size() - failed, fresh, already, boxes, failed, secs, secs > 0 ? double(fresh) / secs : 0.0,
              a.format.c_str(), a.out.c_str());
  BranchStats text = pipeline->session().branch_stats();
  if (text.hits + text.misses > 0)
    std::printf("text branch: %.1f ms over %lld runs (%lld computed, %lld from the cache of %zu entries)\n", text.ms,
                (long long)(text.hits + text.misses), (long long)text.misses, (long long)text.hits, text.capacity);
  return failed ? 2 : 0;
}

}  // namespace

void add_label_command(CLI::App& app) {
  static LabelArgs a;
  auto* cmd = app.add_subcommand(
      "label", "Label every image under a folder with the objects a prompt names (COCO, YOLO or LabelMe); "
               "resumable. Exit code 2 when some images could not be read.");
  cmd->add_option(
         "dir", a.dir,
         "folder of images, searched recursively: .png .jpg .jpeg .bmp .gif .webp .tif .tiff files and "
         "any file whose content is one of these formats")
      ->required();
  add_query_options(cmd, a.q);
  cmd->add_option("-f,--format", a.format,
                  "coco (annotations.json), yolo (labels/*.txt, classes.txt and data.yaml) or labelme "
                  "(4-point rectangles with scores); with --masks: COCO segmentation, YOLO-seg lines, LabelMe "
                  "polygons")
      ->capture_default_str();
  add_masks_option(cmd, a.masks);
  cmd->add_option("--mask-format", a.mask_format,
                  "rle (COCO uncompressed RLE; coco only, its default) or polygon (every component's outer "
                  "contour for coco; the largest component's for yolo and labelme, their default)");
  cmd->add_option("--polygon-tolerance", a.polygon_tolerance,
                  "Douglas-Peucker tolerance in pixels for mask polygons; 0 keeps every contour corner")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-o,--out", a.out, "output folder; rerun with the same folder to resume")->required();
  cmd->add_option("--batch", a.batch, "images per run of the model (default: what the memory plan allows, up to 8)")
      ->check(CLI::Range(0, 1024));
  add_pipeline_options(cmd, a.p);
  cmd->callback([] {
    int rc = label(a);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace vlrt
