// grouped_notes (see predictor.h): a crowded plan's prediction notes one approximation per
// layer, forward and backward (18 lines for the MLP with four replicas on two cores);
// grouped, the terminal and the What-if tooltip show what was done once.
#include <map>
#include <optional>
#include <set>

#include "loom/predict/predictor.h"

namespace loom::predict {

namespace {

constexpr std::size_t kFewestGrouped = 3;

// "<name> @<device>: <how>" split; a "taken from" the same name at another device keeps
// only that device, so every layer taken from one crowding shares one `how`.
struct CostNote {
  std::string name, device, how;
};

std::optional<CostNote> cost_note(const std::string& note) {
  const std::size_t colon = note.find(": ");
  if (colon == std::string::npos) return std::nullopt;
  const std::size_t at = note.rfind(" @", colon);
  if (at == std::string::npos) return std::nullopt;
  CostNote c{note.substr(0, at), note.substr(at + 2, colon - at - 2), note.substr(colon + 2)};
  const std::string from = "taken from " + c.name + " @";
  if (const std::size_t f = c.how.find(from); f != std::string::npos) c.how.replace(f, from.size(), "taken from @");
  return c;
}

}  // namespace

std::vector<std::string> grouped_notes(const std::vector<std::string>& notes) {
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> names;  // (device, how) -> names
  std::vector<std::optional<CostNote>> parsed;
  for (const std::string& n : notes) {
    parsed.push_back(cost_note(n));
    if (parsed.back()) names[{parsed.back()->device, parsed.back()->how}].push_back(parsed.back()->name);
  }
  std::vector<std::string> out;
  std::set<std::pair<std::string, std::string>> said;
  for (std::size_t i = 0; i < notes.size(); ++i) {
    if (!parsed[i]) {
      out.push_back(notes[i]);
      continue;
    }
    const std::pair<std::string, std::string> key{parsed[i]->device, parsed[i]->how};
    const auto& group = names.at(key);
    if (group.size() < kFewestGrouped) {
      out.push_back(notes[i]);
      continue;
    }
    if (!said.insert(key).second) continue;  // said where the first of them stood
    std::string line = std::to_string(group.size()) + " costs @" + parsed[i]->device + " " + parsed[i]->how + ":";
    for (std::size_t k = 0; k < group.size(); ++k) line += (k ? "; " : " ") + group[k];
    out.push_back(line);
  }
  return out;
}

}  // namespace loom::predict
