// The end-of-run summary as a person reads it on stdout: the figure of merit first, as one
// greppable line (`FOM: <tokens/s> tokens/s | step <ms> ms | ...`, the number right after
// "FOM:"), then a block with the time split, the pipeline bubble, stragglers, memory and MFU. A
// pure function of the report's "summary" object (output.json holds that object in full), so
// what is printed and what is written cannot disagree; fields a summary lacks are left out.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kformer {

std::string format_summary(const nlohmann::json& summary);

}  // namespace kformer
