// The deck echo's text (see deck_echo.hpp).
#include "settings/deck_echo.hpp"

#include <algorithm>
#include <sstream>

namespace kformer {

std::string DeckEcho::text(const std::vector<std::pair<std::string, std::string>>& startup) const {
  std::size_t width = 0;
  for (const auto& l : lines) width = std::max(width, l.key.size());
  std::ostringstream os;
  for (const auto& l : lines) {
    os << "  " << l.key << std::string(width - l.key.size(), ' ') << " = "
       << (l.auto_reason.empty() ? l.value : "auto -> " + l.value + " (" + l.auto_reason + ")");
    for (const auto& [key, choice] : startup)
      if (l.key == key && !choice.empty()) os << " -> " << choice;
    if (l.origin != "default") os << "   (" << l.origin << ")";
    os << '\n';
  }
  return os.str();
}

}  // namespace kformer
