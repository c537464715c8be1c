#include "test_util.h"

#include <unistd.h>

#include <filesystem>

namespace tilecraft::test {
std::string temp_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path p = fs::path(TILECRAFT_TEST_TMP) / (name + "-" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}
}  // namespace tilecraft::test
