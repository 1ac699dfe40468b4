// Subcommands of the vlrt program; each file registers one.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace vlrt {

void add_info_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_conformance_command(CLI::App& app);
void add_bench_command(CLI::App& app);

// "NAME=1x3x224x224" or "NAME=1,3,224,224" -> name and shape.
std::pair<std::string, Shape> parse_shape_arg(const std::string& arg);
// "NAME=path" -> name and path.
std::pair<std::string, std::string> parse_name_value(const std::string& arg, const char* what);
// "12.3 MB", "512 B"
std::string human_bytes(double bytes);

}  // namespace vlrt
