// Models shipped with the program (the models/ folder of the source tree or of an install).
#pragma once

#include <string>

namespace vlrt {

// A file or folder shipped with the program, `relative` to its models/ folder
// ("demo/model.onnx"): looked for beside the program (build/vlrt -> models/...), where it is
// installed (bin/vlrt -> share/vlrt/models/...) and in the working directory; "" when not found.
std::string shipped_model_path(const std::string& relative);

}  // namespace vlrt
