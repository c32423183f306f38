// Training data by global sample index: every layout asks for the same samples and gets the same
// tokens, whatever rank it runs on. Two sources:
//  - "random": synthetic sequences from a counter-based generator keyed by (seed, sample). Each
//    next token follows a fixed successor rule with probability 3/4 and is uniform otherwise, so a
//    model has something to learn and the loss falls (uniform noise would pin it at ln V).
//  - a token file: uint16 tokens with llm.c's 256-int32 header (magic 20240520, version 1, count).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kformer {

class DataSource {
 public:
  virtual ~DataSource() = default;
  // Tokens of global samples [first, first + count): row-major (count, seq_len + 1), inputs are
  // columns [0, T), targets columns [1, T].
  virtual void fill(std::int64_t first, std::int64_t count, int seq_len, std::int32_t* out) const = 0;
  virtual std::string describe() const = 0;
  // Throws ConfigError with the fix when the source cannot give one sequence of seq_len + 1 tokens.
  virtual void check(int /*seq_len*/) const {}
};

// `source` is "random" or a path. Throws ConfigError with the fix for a bad file.
std::unique_ptr<DataSource> make_data_source(const std::string& source, std::int64_t vocab_size,
                                             std::uint64_t seed);

// Writes a token file in llm.c's format (used by scripts and tests).
void write_token_file(const std::string& path, const std::vector<std::uint16_t>& tokens);

}  // namespace kformer
