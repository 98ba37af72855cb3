// Replays a fuzz target over committed inputs, without libFuzzer: each
// argument is a file or a directory (every regular file in it, in name order),
// and each file is fed once to LLVMFuzzerTestOneInput. The normal (g++) build
// links every target with this main and registers it as a CTest test over the
// target's seed corpus, so `make test` catches a regression on any committed
// seed or crasher even where clang is not installed.
//
// Exit status: 0 when every input ran (a failing property aborts), 1 when an
// argument cannot be read or names no file at all.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool ReadFile(const std::filesystem::path& path, std::vector<uint8_t>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    const fs::path arg(argv[i]);
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> in_dir;
      for (const auto& entry : fs::directory_iterator(arg, ec)) {
        if (entry.is_regular_file(ec)) in_dir.push_back(entry.path());
      }
      if (ec) {
        std::fprintf(stderr, "replay: cannot list %s: %s\n", argv[i], ec.message().c_str());
        return 1;
      }
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "replay: no inputs (usage: %s FILE_OR_DIR...)\n", argv[0]);
    return 1;
  }
  std::vector<uint8_t> data;
  for (const fs::path& f : files) {
    if (!ReadFile(f, &data)) {
      std::fprintf(stderr, "replay: cannot read %s\n", f.c_str());
      return 1;
    }
    const auto t0 = std::chrono::steady_clock::now();
    // An empty vector's data() may be null; libFuzzer passes a valid pointer.
    static const uint8_t kEmpty = 0;
    LLVMFuzzerTestOneInput(data.empty() ? &kEmpty : data.data(), data.size());
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    std::printf("replay: %s (%zu bytes, %lld ms)\n", f.c_str(), data.size(),
                static_cast<long long>(ms));
  }
  std::printf("replay: %zu inputs passed\n", files.size());
  return 0;
}
