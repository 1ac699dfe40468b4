// vlrt: load, inspect, plan and run ONNX vision-language models.
#include <cstdio>
#include <iostream>

#include "apps/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "vlrt: a runtime for vision-language models. Loads ONNX models, checks them and their inputs\n"
      "before anything runs, and executes them on the CPU."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "vlrt 0.1.0");
  vlrt::add_info_command(app);
  vlrt::add_run_command(app);
  vlrt::add_bench_command(app);
  vlrt::add_plan_command(app);
  vlrt::add_detect_command(app);
  vlrt::add_segment_command(app);
  vlrt::add_chat_command(app);
  vlrt::add_tag_command(app);
  vlrt::add_label_command(app);
  vlrt::add_conformance_command(app);
  vlrt::add_verify_command(app);
  vlrt::add_fetch_command(app);
  vlrt::add_doctor_command(app);
  vlrt::add_tokenize_command(app);
  vlrt::add_serve_command(app);
  vlrt::add_loadtest_command(app);
  vlrt::add_check_command(app);
  vlrt::add_check_dynamic_command(app);
  vlrt::add_quantize_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    // `vlrt check` and `vlrt check-dynamic` keep 1 for "the values differ": their usage errors are 2.
    bool compares = app.got_subcommand("check") || app.got_subcommand("check-dynamic");
    return rc != 0 && compares && !dynamic_cast<const CLI::RuntimeError*>(&e) ? 2 : rc;
  } catch (const vlrt::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
