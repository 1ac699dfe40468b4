// tests/fixtures/vlm/preprocess (tools/make_vlm_preprocess_vectors.py): the reference's
// preprocessing and index outputs, and their cases in cases.json.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace vlrt::vlm::test {

inline std::string preprocess_fixture(const std::string& name) {
  return std::string(VLRT_SOURCE_DIR) + "/tests/fixtures/vlm/preprocess/" + name;
}

inline const nlohmann::json& preprocess_cases() {
  static const nlohmann::json cases = nlohmann::json::parse(std::ifstream(preprocess_fixture("cases.json")));
  return cases;
}

inline std::vector<Grid> grids_of(const nlohmann::json& j) {
  std::vector<Grid> grids;
  for (const auto& g : j) grids.push_back({g[0].get<int64_t>(), g[1].get<int64_t>(), g[2].get<int64_t>()});
  return grids;
}

}  // namespace vlrt::vlm::test
