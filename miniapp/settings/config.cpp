// Config: defaults, deck, overrides (see config.hpp).
#include "settings/config.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "platform/errors.hpp"

namespace kformer {
namespace {

// Decks are a page or two; anything much larger is the wrong file (a token file, a log, /dev/zero).
constexpr std::size_t kMaxDeckBytes = 1 << 20;

// A first key of `section`, to show what setting one looks like.
std::string example_key(const std::string& section) {
  for (const auto& k : schema())
    if (k.name.rfind(section + ".", 0) == 0) return k.name;
  return "";
}

// `where` is "command line" or "DECK line N".
[[noreturn]] void unknown_key(const std::string& key, const std::string& where) {
  if (is_section(key))
    throw ConfigError("'" + key + "' (" + where + ") is a section, not a key: set one of its keys, e.g. " +
                      example_key(key) + " ('kformer --keys' lists them)");
  std::string msg = "unknown key '" + printable(key) + "' (" + where + ")";
  const std::string s = suggest_key(key);
  if (!s.empty()) msg += ": did you mean '" + s + "'?";
  else msg += ": run 'kformer --keys' to list the valid keys";
  throw ConfigError(msg);
}

const KeySpec& spec_of(const std::string& key) {
  const KeySpec* s = find_key(key);
  // A typo in kformer's own code, not in the user's input.
  if (!s) throw std::logic_error("kformer asked for a key the schema does not have: " + key);
  return *s;
}

const char* yaml_kind(const YAML::Node& n) {
  return n.IsMap() ? "a map" : n.IsSequence() ? "a list" : n.IsNull() ? "empty" : "a single value";
}

// The items of a YAML list as the command line would write them: "3,3,2".
std::string yaml_list_text(const std::string& key, const YAML::Node& node) {
  std::string out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar())
      throw ConfigError(key + ": item " + std::to_string(i + 1) + " of the list is " + yaml_kind(node[i]) +
                        ": write a flat list of numbers, e.g. [3, 3]");
    out += (i ? "," : "") + node[i].Scalar();
  }
  return out;
}

// Raw bytes a YAML parser would read past or mangle: a NUL (where yaml-cpp silently stops) or
// bytes that are not UTF-8. Returns a description naming the line, or "".
std::string deck_bytes_problem(const std::string& text) {
  auto line_of = [&](std::size_t pos) {
    return std::to_string(1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
  };
  const std::size_t nul = text.find('\0');
  if (nul != std::string::npos)
    return "line " + line_of(nul) + " holds a NUL byte: a deck is UTF-8 YAML text (not UTF-16, not a binary file)";
  const std::size_t bad = invalid_utf8_at(text);
  if (bad != std::string::npos)
    return "line " + line_of(bad) + " holds a byte that is not UTF-8 (" +
           printable(text.substr(bad, 1)) + "): save the deck as UTF-8 text";
  return "";
}

[[noreturn]] void bad_yaml(const std::string& origin, int line, const std::string& what) {
  throw ConfigError(origin + ": not valid YAML" + (line >= 0 ? " at line " + std::to_string(line + 1) : "") + ": " +
                    printable(what) + ": fix the YAML there (indentation, a missing ':' or bracket)");
}

// The number of documents in a YAML text (up to 2: one is all a deck may have), found without
// YAML::LoadAll: yaml-cpp 0.7 leaves a token that cannot start a node (a stray ',' or ']' where a
// document begins) unconsumed and reports an empty document for it again and again, so LoadAll
// allocates until the machine runs out (the fuzzer's second find). A document that is one null
// at the same place as the last one means the parser is stuck there.
class DocumentCounter : public YAML::EventHandler {
 public:
  explicit DocumentCounter(const std::string& origin) : origin_(origin) {}

  int count(const std::string& text) {
    std::stringstream in(text);
    YAML::Parser parser(in);
    int pos_of_last_null = -1;
    while (non_null_ < 2) {
      events_ = 0;
      null_pos_ = -1;
      if (!parser.HandleNextDocument(*this)) break;
      if (events_ == 1 && null_pos_ >= 0) {  // an empty document
        if (null_pos_ == pos_of_last_null) {
          const std::size_t at = std::min(static_cast<std::size_t>(null_pos_), text.size());
          bad_yaml(origin_, null_line_, "a value cannot start with '" + text.substr(at, 1) + "'");
        }
        pos_of_last_null = null_pos_;
      } else {
        ++non_null_;
      }
    }
    return non_null_;
  }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override {
    if (events_++ == 0) null_pos_ = m.pos, null_line_ = m.line;
  }
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { ++events_; }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override { ++events_; }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    ++events_;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    ++events_;
  }
  void OnMapEnd() override {}

 private:
  std::string origin_;
  int non_null_ = 0, events_ = 0, null_pos_ = -1, null_line_ = 0;
};

}  // namespace

Config::Config() {
  for (const auto& k : schema()) {
    values_[k.name] = k.default_value;
    origins_[k.name] = "default";
  }
  // The test suite runs every job under NCCL's rules (ctest sets it); a deck or the command line
  // still decides.
  if (const char* strict = std::getenv("KFORMER_COMM_STRICT"); strict && *strict)
    set("comm.strict", strict, "environment KFORMER_COMM_STRICT");
}

void Config::set(const std::string& key, const std::string& text, const std::string& origin) {
  const KeySpec* spec = find_key(key);
  if (!spec) unknown_key(key, origin);
  values_[key] = parse_value(*spec, text);
  origins_[key] = origin;
}

void Config::load_deck_file(const std::string& path) {
  const std::string shown = printable(path);
  const std::string fix = ": give the path of a YAML deck, e.g. input/tiny.yaml";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw ConfigError("cannot read deck '" + shown + "' (" + std::strerror(errno) + ")" + fix);
  if (S_ISDIR(st.st_mode)) throw ConfigError("deck '" + shown + "' is a directory" + fix);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot read deck '" + shown + "' (" + std::strerror(errno) + ")" + fix);
  std::string text(kMaxDeckBytes + 1, '\0');
  in.read(&text[0], static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (in.bad()) throw ConfigError("cannot read deck '" + shown + "' (" + std::strerror(errno) + ")" + fix);
  if (text.size() > kMaxDeckBytes)
    throw ConfigError("deck '" + shown + "' is larger than 1 MiB, far beyond any deck: check that it is the YAML deck" +
                      " you meant (e.g. input/tiny.yaml), not a data or log file");
  load_deck_text(text, shown);
}

void Config::load_deck_text(const std::string& yaml, const std::string& origin) {
  const std::string problem = deck_bytes_problem(yaml);
  if (!problem.empty()) throw ConfigError(origin + ": " + problem);
  YAML::Node root;
  int n_docs = 0;
  try {
    n_docs = DocumentCounter(origin).count(yaml);
    if (n_docs == 1) root = YAML::Load(yaml);  // the first document; more would be refused below
  } catch (const YAML::Exception& e) {
    bad_yaml(origin, e.mark.line, e.msg);
  }
  if (n_docs == 0)
    throw ConfigError(origin + " is empty: a deck is a YAML map of sections, e.g. 'model:' then '  n_layers: 2' "
                      "(see input/tiny.yaml)");
  if (n_docs > 1)
    throw ConfigError(origin + " holds more than one YAML document (separated by '---'): a deck is one document; "
                      "merge them, or give the other one as a deck of its own");
  if (!root.IsMap()) throw ConfigError(origin + ": a deck is a YAML map of sections, e.g. 'model:' then 'n_layers: 2'");
  try {
    load_tree(root, origin);
  } catch (const YAML::Exception& e) {
    bad_yaml(origin, e.mark.line, e.msg);
  }
}

void Config::load_tree(const YAML::Node& root, const std::string& origin) {
  // Depth-first over nested maps; the dotted path of each leaf is the key. Every map must be a
  // section and every path is visited at most once, so aliases (`*x`) cannot blow the walk up.
  struct Item { std::string prefix; YAML::Node node; };
  std::vector<Item> stack{{"", root}};
  std::map<std::string, int> seen;  // every key and section set so far, and its line
  while (!stack.empty()) {
    Item it = stack.back();
    stack.pop_back();
    for (auto kv = it.node.begin(); kv != it.node.end(); ++kv) {
      // Copies: `kv->` returns a temporary pair, so references into it would dangle (the fuzzer's
      // first find, a stack-use-after-scope on every deck).
      const YAML::Node k = kv->first, v = kv->second;
      const int line = k.Mark().line + 1;
      const std::string where = origin + " line " + std::to_string(line);
      if (!k.IsScalar() || k.Scalar().empty())
        throw ConfigError(where + ": a key is " + (k.IsScalar() ? std::string("empty") : yaml_kind(k)) +
                          ": keys are plain names such as 'model' or 'n_layers'");
      const std::string key = it.prefix + k.Scalar();
      const auto dup = seen.find(key);
      if (dup != seen.end())
        throw ConfigError(origin + ": '" + printable(key) + "' is set twice (lines " +
                          std::to_string(std::min(dup->second, line)) + " and " +
                          std::to_string(std::max(dup->second, line)) + "): keep one of them");
      seen[key] = line;
      const KeySpec* spec = find_key(key);
      if (v.IsMap()) {
        if (spec)
          throw ConfigError(where + ": " + key + " takes " + describe_valid(*spec) + ", not a map: write '" +
                            k.Scalar() + ": VALUE'");
        if (!is_section(key)) unknown_key(key, where);
        stack.push_back({key + ".", v});
        continue;
      }
      if (!spec) {
        if (is_section(key) && v.IsNull()) continue;  // `kernels:` with nothing under it
        unknown_key(key, where);
      }
      try {
        if (v.IsSequence()) {
          if (spec->type != KeyType::int_list)
            throw ConfigError(key + " takes " + describe_valid(*spec) + ", not a list: write '" + k.Scalar() +
                              ": VALUE'");
          set(key, yaml_list_text(key, v), origin);
        } else {
          set(key, v.IsScalar() ? v.Scalar() : "", origin);  // `key:` with no value: empty text, or a type error
        }
      } catch (const ConfigError& e) {
        throw ConfigError(where + ": " + e.what());
      }
    }
  }
}

void Config::apply_override(const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("'" + printable(assignment) + "' is not an override: write key=value, e.g. parallel.tp=2");
  const std::string key = assignment.substr(0, eq);
  set(key, assignment.substr(eq + 1), "command line");
  // Scripts append overrides, so a repeated key is legitimate, but the printed deck says so.
  if (const int n = ++overrides_[key]; n > 1)
    origins_[key] = "command line, given " + std::to_string(n) + " times: the last wins";
}

const Value& Config::get(const std::string& key) const {
  spec_of(key);
  return values_.at(key);
}

std::int64_t Config::i64(const std::string& key) const { return std::get<std::int64_t>(get(key)); }

int Config::i32(const std::string& key) const {
  const std::int64_t v = i64(key);
  if (v > std::numeric_limits<int>::max() || v < std::numeric_limits<int>::min())
    throw ConfigError(key + "=" + std::to_string(v) + " does not fit a 32-bit integer");
  return static_cast<int>(v);
}

double Config::f64(const std::string& key) const { return std::get<double>(get(key)); }
const std::string& Config::str(const std::string& key) const { return std::get<std::string>(get(key)); }
const std::vector<std::int64_t>& Config::ints(const std::string& key) const {
  return std::get<std::vector<std::int64_t>>(get(key));
}

void Config::set_i64(const std::string& key, std::int64_t v) {
  spec_of(key);
  values_[key] = v;
  origins_[key] = "derived";
}

const std::string& Config::origin(const std::string& key) const {
  spec_of(key);
  return origins_.at(key);
}

void Config::resolve_auto(const std::string& key, const std::string& value, const std::string& why) {
  values_[key] = parse_value(spec_of(key), value);
  auto_[key] = why;
}

std::string Config::auto_reason(const std::string& key) const {
  spec_of(key);
  const auto it = auto_.find(key);
  return it == auto_.end() ? "" : it->second;
}

nlohmann::json Config::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& k : schema()) {
    nlohmann::json* node = &j;
    std::stringstream ss(k.name);
    std::string part;
    std::vector<std::string> parts;
    while (std::getline(ss, part, '.')) parts.push_back(part);
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) node = &(*node)[parts[i]];
    const Value& v = values_.at(k.name);
    std::visit([&](const auto& x) { (*node)[parts.back()] = x; }, v);
  }
  return j;
}

DeckEcho Config::echo() const {
  DeckEcho e;
  for (const auto& k : schema()) {
    const auto chosen = auto_.find(k.name);
    e.lines.push_back({k.name, format_value(values_.at(k.name)), origins_.at(k.name),
                       chosen == auto_.end() ? "" : chosen->second});
  }
  e.json = to_json();
  return e;
}

}  // namespace kformer
