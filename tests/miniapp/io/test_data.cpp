// Data by global sample index: the same sample gives the same tokens whichever slice asks for it,
// random data has learnable structure, token files round-trip and bad files are refused clearly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>

#include <unistd.h>

#include "io/data.hpp"
#include "platform/errors.hpp"

using kformer::make_data_source;

TEST(Data, RandomSamplesDependOnlyOnTheGlobalIndex) {
  const int T = 16;
  auto d = make_data_source("random", 100, 7);
  std::vector<std::int32_t> all(8 * (T + 1)), part(3 * (T + 1));
  d->fill(0, 8, T, all.data());
  d->fill(4, 3, T, part.data());  // samples 4..6, as a data-parallel rank would ask for them
  for (int i = 0; i < 3 * (T + 1); ++i) EXPECT_EQ(part[i], all[4 * (T + 1) + i]);
  for (auto t : all) EXPECT_TRUE(t >= 0 && t < 100);
  std::vector<std::int32_t> other(8 * (T + 1));
  make_data_source("random", 100, 8)->fill(0, 8, T, other.data());
  EXPECT_NE(other, all) << "the seed must change the data";
}

TEST(Data, RandomDataHasLessEntropyThanUniform) {
  // The successor rule makes the next token predictable 3/4 of the time: the empirical
  // conditional entropy must be far below ln(V).
  const int T = 64, V = 50, S = 400;
  std::vector<std::int32_t> tok(S * (T + 1));
  make_data_source("random", V, 3)->fill(0, S, T, tok.data());
  std::map<std::pair<int, int>, int> pairs;
  std::map<int, int> firsts;
  for (int s = 0; s < S; ++s)
    for (int t = 0; t < T; ++t) {
      ++pairs[{tok[s * (T + 1) + t], tok[s * (T + 1) + t + 1]}];
      ++firsts[tok[s * (T + 1) + t]];
    }
  double h = 0, n = S * T;
  for (auto& [k, c] : pairs) h -= c / n * std::log(double(c) / firsts[k.first]);
  EXPECT_LT(h, 0.6 * std::log(double(V)));
}

TEST(Data, TokenFileRoundTripAndWrap) {
  const std::string path = ::testing::TempDir() + "/kformer_tokens.bin";
  std::vector<std::uint16_t> toks(50);
  for (int i = 0; i < 50; ++i) toks[i] = static_cast<std::uint16_t>(i * 3 % 200);
  kformer::write_token_file(path, toks);
  auto d = make_data_source(path, 256, 1);
  const int T = 8;
  std::vector<std::int32_t> out(2 * (T + 1));
  d->fill(1, 2, T, out.data());
  for (int t = 0; t <= T; ++t) EXPECT_EQ(out[t], toks[T + t]);
  // windows = (50 - 9) / 8 + 1 = 6: sample 6 wraps to sample 0
  std::vector<std::int32_t> w(T + 1), z(T + 1);
  d->fill(6, 1, T, w.data());
  d->fill(0, 1, T, z.data());
  EXPECT_EQ(w, z);
  std::remove(path.c_str());
}

TEST(Data, BadTokenFilesAreRefusedWithTheCause) {
  const std::string path = ::testing::TempDir() + "/kformer_bad.bin";
  kformer::write_token_file(path, std::vector<std::uint16_t>(40, 300));
  auto msg = [&](std::int64_t vocab) {
    try {
      make_data_source(path, vocab, 1);
    } catch (const kformer::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg(256).find("raise model.vocab_size"), std::string::npos);
  // Truncate: the header still promises 40 tokens.
  {
    std::FILE* f = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(0, ::truncate(path.c_str(), 256 * 4 + 20));
    std::fclose(f);
  }
  EXPECT_NE(msg(1000).find("truncated"), std::string::npos);
  EXPECT_NE(msg(1000).find(path), std::string::npos);
  std::remove(path.c_str());
  EXPECT_NE(msg(1000).find("cannot open"), std::string::npos);
}
