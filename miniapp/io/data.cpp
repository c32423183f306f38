// Training data by global sample index (see data.hpp).
#include "io/data.hpp"

#include <cstdio>
#include <fstream>

#include "counter_rng.hpp"
#include "platform/errors.hpp"

namespace kformer {
namespace {

constexpr std::int32_t kMagic = 20240520;
constexpr int kHeaderInts = 256;

class RandomData final : public DataSource {
 public:
  RandomData(std::int64_t vocab, std::uint64_t seed)
      : vocab_(vocab), key_(kernels::stream_key(seed, "data.random")),
        mult_(1 + 2 * static_cast<std::int64_t>(kernels::mix64(key_) % 97)) {}

  void fill(std::int64_t first, std::int64_t count, int seq_len, std::int32_t* out) const override {
    const int row = seq_len + 1;
    for (std::int64_t s = 0; s < count; ++s) {
      const std::uint64_t base = static_cast<std::uint64_t>(first + s) * static_cast<std::uint64_t>(row);
      std::int64_t prev = static_cast<std::int64_t>(kernels::counter_hash(key_, base) % vocab_);
      out[s * row] = static_cast<std::int32_t>(prev);
      for (int t = 1; t < row; ++t) {
        const std::uint64_t h = kernels::counter_hash(key_, base + t);
        const bool follow = (h & 3) != 0;  // 3 times in 4
        prev = follow ? (prev * mult_ + 7) % vocab_ : static_cast<std::int64_t>((h >> 2) % vocab_);
        out[s * row + t] = static_cast<std::int32_t>(prev);
      }
    }
  }
  std::string describe() const override { return "random (synthetic, successor rule 3/4)"; }

 private:
  std::int64_t vocab_;
  std::uint64_t key_;
  std::int64_t mult_;
};

class TokenFile final : public DataSource {
 public:
  TokenFile(const std::string& path, std::int64_t vocab) : path_(path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ConfigError("data.source=" + path + ": cannot open it; give 'random' or a token file made by scripts/make_tokens.py");
    std::int32_t header[kHeaderInts] = {};
    in.read(reinterpret_cast<char*>(header), sizeof(header));
    if (!in || header[0] != kMagic || header[1] != 1)
      throw ConfigError("data.source=" + path + ": not a token file (llm.c header with magic 20240520, version 1 expected)");
    const std::int64_t n = header[2];
    in.seekg(0, std::ios::end);
    const std::int64_t payload = static_cast<std::int64_t>(in.tellg()) - static_cast<std::int64_t>(sizeof(header));
    in.seekg(sizeof(header));
    if (n < 0 || n * std::int64_t(sizeof(std::uint16_t)) > payload)
      throw ConfigError("data.source=" + path + ": truncated or damaged: the header promises " + std::to_string(n) +
                        " tokens, the file holds " + std::to_string(payload / 2) + "; regenerate it");
    tokens_.resize(static_cast<std::size_t>(n));
    in.read(reinterpret_cast<char*>(tokens_.data()), static_cast<std::streamsize>(n * sizeof(std::uint16_t)));
    if (in.gcount() != static_cast<std::streamsize>(n * sizeof(std::uint16_t)))
      throw ConfigError("data.source=" + path + ": truncated: the header promises " + std::to_string(n) +
                        " tokens but the file holds fewer; regenerate it");
    for (std::uint16_t t : tokens_)
      if (t >= vocab)
        throw ConfigError("data.source=" + path + ": token " + std::to_string(t) + " >= model.vocab_size=" +
                          std::to_string(vocab) + ": raise model.vocab_size");
  }

  void check(int seq_len) const override {
    const std::int64_t row = seq_len + 1, n = static_cast<std::int64_t>(tokens_.size());
    if (n < row + 1)
      throw ConfigError("data.source=" + path_ + ": " + std::to_string(n) + " tokens is fewer than one sequence of " +
                        std::to_string(row) + ": use a longer text or a shorter train.seq_len");
  }

  void fill(std::int64_t first, std::int64_t count, int seq_len, std::int32_t* out) const override {
    check(seq_len);
    const std::int64_t row = seq_len + 1, n = static_cast<std::int64_t>(tokens_.size());
    const std::int64_t windows = (n - row) / seq_len + 1;  // samples wrap around the file
    for (std::int64_t s = 0; s < count; ++s) {
      const std::int64_t start = ((first + s) % windows) * seq_len;
      for (std::int64_t t = 0; t < row; ++t) out[s * row + t] = tokens_[static_cast<std::size_t>(start + t)];
    }
  }
  std::string describe() const override { return path_ + " (" + std::to_string(tokens_.size()) + " tokens)"; }

 private:
  std::string path_;
  std::vector<std::uint16_t> tokens_;
};

}  // namespace

std::unique_ptr<DataSource> make_data_source(const std::string& source, std::int64_t vocab, std::uint64_t seed) {
  if (source == "random") return std::make_unique<RandomData>(vocab, seed);
  return std::make_unique<TokenFile>(source, vocab);
}

void write_token_file(const std::string& path, const std::vector<std::uint16_t>& tokens) {
  std::int32_t header[kHeaderInts] = {};
  header[0] = kMagic;
  header[1] = 1;
  header[2] = static_cast<std::int32_t>(tokens.size());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header), sizeof(header));
  out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
  if (!out) throw std::runtime_error("cannot write token file " + path);
}

}  // namespace kformer
