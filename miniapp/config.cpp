// Config: defaults, deck, overrides (see config.hpp).
#include "config.hpp"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <limits>
#include <sstream>

#include "errors.hpp"

namespace kformer {
namespace {

[[noreturn]] void unknown_key(const std::string& key, const std::string& origin) {
  std::string msg = "unknown key '" + key + "' (" + origin + ")";
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

std::string yaml_list_text(const YAML::Node& node) {
  std::string out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar()) throw ConfigError("a list item must be a number");
    out += (i ? "," : "") + node[i].Scalar();
  }
  return out;
}

}  // namespace

Config::Config() {
  for (const auto& k : schema()) {
    values_[k.name] = k.default_value;
    origins_[k.name] = "default";
  }
}

void Config::set(const std::string& key, const std::string& text, const std::string& origin) {
  const KeySpec* spec = find_key(key);
  if (!spec) unknown_key(key, origin);
  values_[key] = parse_value(*spec, text);
  origins_[key] = origin;
}

void Config::load_deck_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read deck '" + path + "': give the path of a YAML deck, e.g. input/tiny.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  load_deck_text(ss.str(), path);
}

void Config::load_deck_text(const std::string& yaml, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin + ": not valid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (root.IsNull()) return;  // an empty deck keeps the defaults
  if (!root.IsMap()) throw ConfigError(origin + ": a deck is a YAML map of sections, e.g. 'model:' then 'n_layers: 2'");
  // Depth-first over nested maps; the dotted path of each leaf is the key.
  struct Item { std::string prefix; YAML::Node node; };
  std::vector<Item> stack{{"", root}};
  while (!stack.empty()) {
    Item it = stack.back();
    stack.pop_back();
    for (auto kv = it.node.begin(); kv != it.node.end(); ++kv) {
      const std::string key = it.prefix + kv->first.as<std::string>();
      const YAML::Node& v = kv->second;
      const std::string where = origin + " line " + std::to_string(v.Mark().line + 1);
      if (v.IsMap()) {
        stack.push_back({key + ".", v});
      } else if (v.IsSequence()) {
        if (!find_key(key)) unknown_key(key, where);
        set(key, yaml_list_text(v), origin);
      } else if (v.IsScalar()) {
        set(key, v.Scalar(), origin);
      } else {
        if (!find_key(key)) unknown_key(key, where);
        set(key, "", origin);  // `key:` with no value: an empty text, or a clear type error
      }
    }
  }
}

void Config::apply_override(const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("'" + assignment + "' is not an override: write key=value, e.g. parallel.tp=2");
  set(assignment.substr(0, eq), assignment.substr(eq + 1), "command line");
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

std::string Config::to_text() const {
  std::ostringstream os;
  std::size_t width = 0;
  for (const auto& k : schema()) width = std::max(width, k.name.size());
  for (const auto& k : schema()) {
    os << "  " << k.name << std::string(width - k.name.size(), ' ') << " = "
       << format_value(values_.at(k.name));
    if (origins_.at(k.name) != "default") os << "   (" << origins_.at(k.name) << ")";
    os << '\n';
  }
  return os.str();
}

}  // namespace kformer
