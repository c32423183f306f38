// predict.system: which software's run `kformer predict` costs. Each preset is one software
// generation whose behaviour differs in what predict costs, and sets the predict.* keys that say
// so (the code facts behind each value: docs/predict.md, "Systems"). A key the deck or the
// command line gives keeps its value; a key the preset set shows "predict.system=NAME" as its
// origin in the resolved deck. kformer (the default) is kformer's own run on that machine.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kformer {

class Config;

struct SoftwareSystem {
  const char* name;
  const char* what;  // the software and its generation, as the report's text names it
  std::vector<std::pair<const char*, const char*>> keys;
  // Keys set, over `keys`, only where the software's published configurations took PyTorch's DDP:
  // no pipeline (parallel.pp = 1) and not bf16 (Megatron-LM's SC21 scripts: torch DDP without a
  // pipeline, its own DDP with one; a bf16 run accumulates its gradients in fp32, which asserts its
  // own DDP: arguments.py at 55ba1f7).
  std::vector<std::pair<const char*, const char*>> keys_with_pytorch_ddp = {};
  // Keys set, over `keys`, under parallel.schedule=interleaved (Megatron-Core r0.8 turns
  // overlap_p2p_comm on by default and off for any other schedule: arguments.py).
  std::vector<std::pair<const char*, const char*>> keys_interleaved = {};
};

// Every preset, the default (kformer) first: the schema's choices for predict.system come from here.
const std::vector<SoftwareSystem>& software_systems();
std::vector<std::string> software_system_names();
const SoftwareSystem& software_system(const std::string& name);

// Sets each key of the chosen preset that is still at its schema default.
void apply_software_system(Config& cfg);
// The preset that set `key` ("predict.system=NAME", its origin in the resolved deck), or "" where
// the deck, the command line or the schema's default gave it.
std::string set_by_software_system(const Config& cfg, const std::string& key);

}  // namespace kformer
