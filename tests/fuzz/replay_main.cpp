// deck_replay: feeds files through the deck path (deck_target.hpp) with the compiler and flags of
// the normal build, so the fuzzer's corpus and every crash it ever found keep working without clang.
//   deck_replay PATH...   (files, or directories of files)
// A file named *.refused must be refused with a one-line ConfigError, *.accepted must pass (the
// crash reproducers in tests/fuzz/crashes/ are named so); any other file may do either. A crash
// ends the process itself; a wrong outcome makes the exit code 1.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "deck_target.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  int inputs = 0, refused = 0, failures = 0;
  auto replay = [&](const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const kformer::fuzz::DeckOutcome r = kformer::fuzz::run_deck_input(ss.str());
    ++inputs;
    refused += r.accepted ? 0 : 1;
    const std::string ext = file.extension().string();
    if ((ext == ".refused" && r.accepted) || (ext == ".accepted" && !r.accepted)) {
      std::printf("FAIL: %s was %s\n", file.string().c_str(),
                  r.accepted ? "accepted" : ("refused: " + r.message).c_str());
      ++failures;
    }
  };
  for (int i = 1; i < argc; ++i) {
    std::vector<fs::path> files;
    if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::directory_iterator(argv[i]))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.' && e.path().filename() != "README.md")
          files.push_back(e.path());
    } else {
      files.push_back(argv[i]);
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) replay(f);
  }
  std::printf("deck_replay: %d inputs, %d refused with one clear line, %d accepted, %d failures\n", inputs, refused,
              inputs - refused, failures);
  return failures ? 1 : 0;
}
