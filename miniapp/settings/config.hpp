// The resolved configuration of a run: schema defaults, then the YAML deck, then the
// `key=value` overrides of the command line, each checked against the schema as it arrives.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace YAML {
class Node;
}

#include "settings/schema.hpp"
#include "settings/deck_echo.hpp"

namespace kformer {

class Config {
 public:
  Config();  // every key at its default

  // Reads a YAML deck (nested maps, dotted keys at any level). Throws ConfigError: for a file
  // that is missing, a directory or over 1 MiB, text that is not UTF-8 YAML, an empty deck, more
  // than one YAML document, a key given twice, and any key or value the schema refuses.
  void load_deck_file(const std::string& path);
  void load_deck_text(const std::string& yaml, const std::string& origin);
  // "key=value"; throws ConfigError naming the key and what is valid.
  void apply_override(const std::string& assignment);
  void set(const std::string& key, const std::string& text, const std::string& origin);

  std::int64_t i64(const std::string& key) const;
  int i32(const std::string& key) const;
  double f64(const std::string& key) const;
  const std::string& str(const std::string& key) const;
  const std::vector<std::int64_t>& ints(const std::string& key) const;
  void set_i64(const std::string& key, std::int64_t v);

  // Where each value came from: "default", the deck's path, or "command line".
  const std::string& origin(const std::string& key) const;

  // A key given as "auto" (comm.backend) takes `value`, chosen for `why`: str() gives the value,
  // to_text() prints "auto -> value (why)". auto_reason() is that `why` ("" if not resolved).
  void resolve_auto(const std::string& key, const std::string& value, const std::string& why);
  std::string auto_reason(const std::string& key) const;

  nlohmann::json to_json() const;  // nested, as a deck would be written
  DeckEcho echo() const;           // every key's value, origin and auto reason (settings/deck_echo.hpp)
  std::string to_text() const { return echo().text(); }

 private:
  void load_tree(const YAML::Node& root, const std::string& origin);
  const Value& get(const std::string& key) const;
  std::map<std::string, Value> values_;
  std::map<std::string, std::string> origins_;
  std::map<std::string, int> overrides_;  // how often each key was given on the command line
  std::map<std::string, std::string> auto_;  // resolve_auto's reasons
};

}  // namespace kformer
