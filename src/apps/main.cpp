// vlrt: load, inspect, plan and run ONNX vision-language models.
#include <cstdio>
#include <iostream>

#include "apps/commands.h"
#include "core/error.h"

namespace vlrt {

std::pair<std::string, std::string> parse_name_value(const std::string& arg, const char* what) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    fail("expected ", what, " as NAME=VALUE, got '", arg, "'");
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

std::pair<std::string, Shape> parse_shape_arg(const std::string& arg) {
  auto [name, spec] = parse_name_value(arg, "an input shape");
  Shape shape;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t next = spec.find_first_of("x,", pos);
    std::string tok = spec.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    try {
      size_t used = 0;
      long long v = std::stoll(tok, &used);
      if (used != tok.size() || v < 0) throw std::invalid_argument(tok);
      shape.push_back(v);
    } catch (const std::exception&) {
      fail("bad dimension '", tok, "' in shape '", spec, "' for input '", name, "' (expected e.g. 1x3x224x224)");
    }
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return {name, shape};
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    u++;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

}  // namespace vlrt

int main(int argc, char** argv) {
  CLI::App app{
      "vlrt: a runtime for vision-language models. Loads ONNX models, checks them and their inputs\n"
      "before anything runs, and executes them on the CPU."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "vlrt 0.1.0");
  vlrt::add_info_command(app);
  vlrt::add_run_command(app);
  vlrt::add_bench_command(app);
  vlrt::add_conformance_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const vlrt::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
