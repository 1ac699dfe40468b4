// Session options for tests that place a model on devices.
#pragma once

#include <map>
#include <string>

#include "backends/backend.h"
#include "exec/session.h"

namespace vlrt::test {

// "toy:0,cpu" -> those devices in that order, with optional --memory caps.
inline SessionOptions on_devices(const std::string& devices, std::map<std::string, size_t> caps = {}) {
  SessionOptions o;
  o.threads = 2;
  o.plan.devices.clear();
  size_t pos = 0;
  while (pos < devices.size()) {
    size_t comma = devices.find(',', pos);
    o.plan.devices.push_back(parse_device(devices.substr(pos, comma - pos)));
    pos = comma == std::string::npos ? devices.size() : comma + 1;
  }
  o.plan.memory_caps = std::move(caps);
  return o;
}

}  // namespace vlrt::test
