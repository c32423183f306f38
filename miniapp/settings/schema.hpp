// The deck schema: every key a deck or a `key=value` override may set, with its type, default,
// valid values and meaning. One table serves the YAML deck, the command line and the docs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace kformer {

enum class KeyType { integer, real, text, choice, int_list };

using Value = std::variant<std::int64_t, double, std::string, std::vector<std::int64_t>>;

struct KeySpec {
  std::string name;                  // dotted: "model.n_layers"
  KeyType type;
  Value default_value;
  std::vector<std::string> choices;  // for KeyType::choice
  double min = 0;                    // numeric range, inclusive (integer, real, int_list items)
  double max = 0;                    // +infinity: no upper bound
  std::string help;
};

const std::vector<KeySpec>& schema();

// nullptr when `name` is not a key.
const KeySpec* find_key(const std::string& name);

// The closest key (or section, e.g. "model") by edit distance, or "" when nothing is close.
std::string suggest_key(const std::string& name);

// True when `name` is a section of keys ("model", "comm.emulate"), not a key itself.
bool is_section(const std::string& name);

// User text made safe to quote in a one-line message: control characters and bytes that are not
// UTF-8 written as \xNN, anything past `max_chars` cut to "...".
std::string printable(const std::string& text, std::size_t max_chars = 80);

// The byte offset of the first byte that is not part of valid UTF-8, or std::string::npos.
std::size_t invalid_utf8_at(const std::string& text);

// Where a text value breaks the rules every text key shares (valid UTF-8, no control
// characters): a description such as "a control character (\x0a) at byte 5"; "" when it is fine.
std::string text_problem(const std::string& text);

// Parses text (from the command line or a YAML scalar) as `spec`'s type; throws ConfigError
// naming the key and what would be valid.
Value parse_value(const KeySpec& spec, const std::string& text);

std::string format_value(const Value& v);
std::string describe_valid(const KeySpec& spec);

}  // namespace kformer
