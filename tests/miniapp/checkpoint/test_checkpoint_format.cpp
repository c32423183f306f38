// The pieces of the universal checkpoint that need no ranks: xsum64 adds up over any split of a
// tensor and sees a flipped bit or a moved element; safetensors layouts round-trip through a file
// and a damaged file (truncated, bad header, inconsistent offsets) is refused with its name.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

#include "checkpoint/checkpoint_format.hpp"
#include "checkpoint/checksum.hpp"
#include "io/safetensors.hpp"

namespace {

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

std::string temp_path(const char* name) { return ::testing::TempDir() + "kformer_" + name; }

}  // namespace

TEST(Checksum, AnySplitSumsToTheWhole) {
  const auto x = random_values(50000, 1);  // long enough for the threaded path
  const std::uint64_t whole = kformer::xsum64(x.data(), x.size(), 0);
  for (std::size_t cut : {std::size_t(1), std::size_t(777), std::size_t(20000), std::size_t(49999)}) {
    const std::uint64_t parts =
        kformer::xsum64(x.data(), cut, 0) + kformer::xsum64(x.data() + cut, x.size() - cut, cut);
    EXPECT_EQ(parts, whole) << "cut at " << cut;
  }
}

TEST(Checksum, SeesAFlippedBitAndASwap) {
  auto x = random_values(1000, 2);
  const std::uint64_t sum = kformer::xsum64(x.data(), x.size(), 0);
  auto flipped = x;
  std::uint32_t bits;
  std::memcpy(&bits, &flipped[500], 4);
  bits ^= 1u;  // the lowest mantissa bit
  std::memcpy(&flipped[500], &bits, 4);
  EXPECT_NE(kformer::xsum64(flipped.data(), flipped.size(), 0), sum);
  auto swapped = x;
  std::swap(swapped[3], swapped[4]);
  EXPECT_NE(kformer::xsum64(swapped.data(), swapped.size(), 0), sum);
  EXPECT_NE(kformer::xsum64(x.data(), x.size(), 1), sum) << "the index is part of each term";
  EXPECT_EQ(kformer::xsum_hex(0x1fULL), "000000000000001f");
}

TEST(Safetensors, LayoutRoundTripsThroughAFile) {
  const std::string path = temp_path("layout.safetensors");
  const auto layout = kformer::plan_safetensors(
      {{"a.weight", "F32", {3, 4}}, {"a.bias", "F32", {3}}}, {{"producer", "test"}});
  EXPECT_EQ((layout.header.size() - 8) % 8, 0u) << "data starts 8-byte aligned";
  EXPECT_EQ(layout.file_size, layout.header.size() + 4 * (12 + 3));
  {
    std::ofstream f(path, std::ios::binary);
    f.write(layout.header.data(), std::streamsize(layout.header.size()));
    const std::vector<char> zeros(layout.file_size - layout.header.size(), 0);
    f.write(zeros.data(), std::streamsize(zeros.size()));
  }
  const auto back = kformer::read_safetensors_layout(path);
  ASSERT_EQ(back.tensors.size(), 2u);
  for (const char* name : {"a.weight", "a.bias"}) {
    ASSERT_NE(back.find(name), nullptr) << name;
    EXPECT_EQ(back.find(name)->offset, layout.find(name)->offset);
    EXPECT_EQ(back.find(name)->shape, layout.find(name)->shape);
  }
  std::remove(path.c_str());
}

TEST(Safetensors, DamagedFilesAreRefusedByName) {
  const std::string path = temp_path("damaged.safetensors");
  const auto layout = kformer::plan_safetensors({{"w", "F32", {16, 16}}}, {});
  auto write = [&](const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; };
  auto message = [&] {
    try {
      kformer::read_safetensors_layout(path);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  write(layout.header + std::string(16 * 16 * 4 - 4, '\0'));  // four bytes short
  EXPECT_NE(message().find("is truncated"), std::string::npos) << message();
  write(layout.header.substr(0, 5));
  EXPECT_NE(message().find("is truncated"), std::string::npos) << message();
  std::string bad = layout.header;
  bad[8] = '#';  // the JSON's opening brace
  write(bad + std::string(16 * 16 * 4, '\0'));
  EXPECT_NE(message().find("corrupted header"), std::string::npos) << message();
  auto wrong = kformer::plan_safetensors({{"w", "F32", {16, 17}}}, {});  // shape and offsets disagree
  std::string text = wrong.header;
  const auto at = text.find("[16,17]");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 7, "[16,16]");
  write(text + std::string(16 * 17 * 4, '\0'));
  EXPECT_NE(message().find("tensor 'w' is corrupted"), std::string::npos) << message();
  EXPECT_NE(message().find(path), std::string::npos) << "the message names the file";
  std::remove(path.c_str());
}

TEST(CheckpointFormat, NamesAndShapesDoNotDependOnTheLayout) {
  EXPECT_EQ(kformer::iteration_dir_name(10), "iter_0000010");
  EXPECT_EQ(kformer::moment_name(1, "layers.0.attn.wq.weight"), "exp_avg.layers.0.attn.wq.weight");
  EXPECT_EQ(kformer::moment_name(2, "final_norm.weight"), "exp_avg_sq.final_norm.weight");
  kformer::ParamSpec embed;
  embed.rows = 320;  // padded for TP
  embed.real_rows = 300;
  embed.cols = 64;
  EXPECT_EQ(kformer::checkpoint_shape(embed), (std::vector<std::int64_t>{300, 64}));
  kformer::ParamSpec bias;
  bias.rows = bias.real_rows = 64;
  EXPECT_EQ(kformer::checkpoint_shape(bias), (std::vector<std::int64_t>{64}));
}
