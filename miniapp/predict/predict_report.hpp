// The report of a predicted step, in the fields of a run's report (report.hpp, DESIGN.md) so
// that the same tools read both: "summary" with the step time, its split, the bubble, stragglers,
// memory and MFU (against the profile's best GEMM and FMA peak), one "iterations" record, plus
// "predicted": the machine profile and whether the layout fits the device's memory. The printed
// block is format_summary's, worded for a prediction. The trace is the timeline's format
// (timeline.hpp): one process row per traced rank, compute on thread 0, communication on 1.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "plan/run_plan.hpp"
#include "predict/machine_profile.hpp"
#include "predict/step_sim.hpp"

namespace kformer::predict {

nlohmann::json predict_report(const RunPlan& plan, const MachineProfile& profile, const StepPrediction& p);
// The predicted peak per rank: as predict.memory counts it (kformer's own: the plan's estimate, which
// with_memory made), with the profile's process baseline.
double predicted_peak_bytes(const RunPlan& plan, const MachineProfile& profile);
// format_summary's block with "measured" read as "predicted", and the memory verdict.
std::string predict_summary_text(const nlohmann::json& report);
// Chrome trace-event JSON of the simulated step (times in us from the step's start).
nlohmann::json predict_trace(const StepPrediction& p);

}  // namespace kformer::predict
