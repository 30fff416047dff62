// The resource files compiled into loom_lessons (generated from resources/lessons and
// resources/plans by core/lessons/CMakeLists.txt), by path under resources/.
#pragma once

#include <string>
#include <vector>

namespace loom::lessons {

struct EmbeddedFile {
  std::string path;  // "lessons/data_parallel.json", "plans/mlp_fashion.json"
  std::string text;
};

const std::vector<EmbeddedFile>& embedded_files();

}  // namespace loom::lessons
