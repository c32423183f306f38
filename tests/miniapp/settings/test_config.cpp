// The deck schema and the Config: defaults, YAML decks, overrides, and the one-line errors for
// bad input (unknown keys with a suggestion, wrong types, out-of-range values, bad YAML).
#include <gtest/gtest.h>

#include "settings/config.hpp"
#include "platform/errors.hpp"
#include "kformer_config.hpp"
#include "settings/validate.hpp"

using kformer::Config;
using kformer::ConfigError;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Config, DefaultsComeFromTheSchema) {
  Config c;
  EXPECT_EQ(c.str("model.family"), "gpt");
  EXPECT_EQ(c.i64("parallel.tp"), 1);
  EXPECT_EQ(c.origin("parallel.tp"), "default");
  EXPECT_TRUE(c.ints("parallel.stage_layers").empty());
}

TEST(Config, DeckNestedAndDottedKeys) {
  Config c;
  c.load_deck_text("model:\n  n_layers: 6\n  family: llama\ntrain.lr: 2.5e-4\nparallel:\n  stage_layers: [2, 4]\n",
                   "deck.yaml");
  EXPECT_EQ(c.i64("model.n_layers"), 6);
  EXPECT_EQ(c.str("model.family"), "llama");
  EXPECT_DOUBLE_EQ(c.f64("train.lr"), 2.5e-4);
  EXPECT_EQ(c.ints("parallel.stage_layers"), (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(c.origin("model.n_layers"), "deck.yaml");
}

TEST(Config, OverridesWinOverTheDeck) {
  Config c;
  c.load_deck_text("parallel:\n  tp: 2\n", "deck.yaml");
  c.apply_override("parallel.tp=4");
  c.apply_override("parallel.stage_layers=3,3");
  c.apply_override("output.json=run.json");
  EXPECT_EQ(c.i64("parallel.tp"), 4);
  EXPECT_EQ(c.origin("parallel.tp"), "command line");
  EXPECT_EQ(c.ints("parallel.stage_layers"), (std::vector<std::int64_t>{3, 3}));
  EXPECT_EQ(c.str("output.json"), "run.json");
}

TEST(Config, ARepeatedOverrideSaysTheLastWins) {
  Config c;
  c.load_deck_text("parallel:\n  tp: 2\n", "deck.yaml");
  c.apply_override("parallel.tp=4");
  c.apply_override("parallel.tp=1");
  EXPECT_EQ(c.i64("parallel.tp"), 1);
  EXPECT_EQ(c.origin("parallel.tp"), "command line, given 2 times: the last wins");
  c.apply_override("parallel.tp=2");
  EXPECT_EQ(c.i64("parallel.tp"), 2);
  EXPECT_EQ(c.origin("parallel.tp"), "command line, given 3 times: the last wins");
  EXPECT_NE(c.to_text().find("(command line, given 3 times: the last wins)"), std::string::npos) << c.to_text();
}

// comm.backend=auto (the default) resolves with the other derived keys; the resolved deck prints
// what it chose and why, the value is the backend's (what make_world and the report's config
// take), and a named backend is printed as given. In a CPU build auto is what the default was
// before it: mpi (self without MPI).
TEST(Config, CommBackendAutoIsResolvedAndPrintedWithItsReason) {
  Config c;
  EXPECT_EQ(c.str("comm.backend"), "auto");
  kformer::resolve_and_validate(c, 1);
  const std::string why = c.auto_reason("comm.backend");
  EXPECT_NE(why, "");
  if (!KFORMER_ENABLE_NCCL) EXPECT_EQ(c.str("comm.backend"), KFORMER_ENABLE_MPI ? "mpi" : "self");
  if (!KFORMER_ENABLE_NCCL && KFORMER_ENABLE_MPI) EXPECT_EQ(why, "no NCCL in this build");
  const std::string line = " = auto -> " + c.str("comm.backend") + " (" + why + ")\n";
  EXPECT_NE(c.to_text().find(line), std::string::npos) << c.to_text();
  EXPECT_EQ(c.to_json()["comm"]["backend"], c.str("comm.backend"));
  Config named;
  named.apply_override("comm.backend=self");
  kformer::resolve_and_validate(named, 1);
  EXPECT_EQ(named.str("comm.backend"), "self");
  EXPECT_EQ(named.auto_reason("comm.backend"), "");
  EXPECT_EQ(named.to_text().find("auto ->"), std::string::npos) << named.to_text();
}

TEST(Config, UnknownKeyNamesItAndSuggests) {
  Config c;
  const std::string e = error_of([&] { c.apply_override("model.n_laeyrs=2"); });
  EXPECT_NE(e.find("'model.n_laeyrs'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'model.n_layers'"), std::string::npos) << e;
  const std::string e2 = error_of([&] { c.load_deck_text("train:\n  stpes: 3\n", "d.yaml"); });
  EXPECT_NE(e2.find("'train.stpes'"), std::string::npos) << e2;
  EXPECT_NE(e2.find("train.steps"), std::string::npos) << e2;
  const std::string e3 = error_of([&] { c.apply_override("n_layers=3"); });
  EXPECT_NE(e3.find("model.n_layers"), std::string::npos) << e3;
  const std::string e4 = error_of([&] { c.apply_override("zzzzzzzz.qqqq=3"); });
  EXPECT_NE(e4.find("kformer --keys"), std::string::npos) << e4;
}

TEST(Config, WrongTypesAndRangesAreRefused) {
  Config c;
  for (const char* bad : {"model.n_layers=two", "model.n_layers=2.5", "model.n_layers=0", "model.n_layers=-3",
                          "train.lr=fast", "train.lr=nan", "parallel.zero=4", "model.family=bert",
                          "parallel.stage_layers=1,x", "model.d_model=99999999999999999999", "parallel.tp"}) {
    const std::string e = error_of([&] { c.apply_override(bad); });
    EXPECT_FALSE(e.empty()) << bad << " was accepted";
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_NE(e.find(key), std::string::npos) << e;
  }
  const std::string e = error_of([&] { c.apply_override("model.family=bert"); });
  EXPECT_NE(e.find("one of gpt, llama"), std::string::npos) << e;
  EXPECT_EQ(c.i64("model.n_layers"), 2) << "a refused value must not change the config";
}

TEST(Config, BadYamlNamesTheLine) {
  Config c;
  const std::string e = error_of([&] { c.load_deck_text("model:\n  n_layers: [1, 2\n", "broken.yaml"); });
  EXPECT_NE(e.find("broken.yaml"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { c.load_deck_text("- 1\n- 2\n", "list.yaml"); }).find("list.yaml"), std::string::npos);
  EXPECT_NE(error_of([&] { c.load_deck_file("/nonexistent/deck.yaml"); }).find("/nonexistent/deck.yaml"),
            std::string::npos);
}

TEST(Config, JsonRoundTripsTheNesting) {
  Config c;
  c.apply_override("comm.emulate.latency_us=10");
  const auto j = c.to_json();
  EXPECT_DOUBLE_EQ(j["comm"]["emulate"]["latency_us"].get<double>(), 10.0);
  EXPECT_EQ(j["model"]["family"].get<std::string>(), "gpt");
  // Writing the JSON back as a deck reproduces every value.
  Config d;
  d.load_deck_text(j.dump(), "json");
  EXPECT_EQ(d.to_json(), j);
}
