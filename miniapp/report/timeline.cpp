// The timeline (see timeline.hpp).
#include "report/timeline.hpp"

#include "io/json_file.hpp"

#include <sys/stat.h>

#include <fstream>
#include <stdexcept>

namespace kformer {
namespace {

nlohmann::json span(const std::string& name, const char* cat, int pid, int tid, double start, double end,
                    nlohmann::json args) {
  return {{"name", name}, {"cat", cat},       {"ph", "X"},         {"pid", pid},
          {"tid", tid},   {"ts", start},      {"dur", end - start}, {"args", std::move(args)}};
}

}  // namespace

Timeline::Timeline(std::string dir, int rank) : dir_(std::move(dir)), rank_(rank) {
  ::mkdir(dir_.c_str(), 0755);  // every rank may try; existing is fine
}

void Timeline::add_iteration(int iteration, const std::vector<ActionSpan>& spans, const comm::TraceLog& comm,
                             double optimizer_start_us, double optimizer_end_us) {
  for (const auto& s : spans) {
    nlohmann::json args = {{"micro_batch", s.micro}, {"chunk", s.chunk}, {"iteration", iteration}};
    if (s.head) args["part"] = "loss and head";
    events_.push_back(span(s.phase == Phase::forward ? "forward" : s.phase == Phase::weight ? "weight" : "backward", "compute", rank_, 0, s.start_us,
                           s.end_us, std::move(args)));
  }
  // A call timed on the device is drawn where it ran there; its post and the moment it was seen
  // complete stay in the args.
  for (const auto& r : comm.records())
    if (r.end_us >= 0) {
      nlohmann::json args = {
          {"bytes", r.bytes}, {"group_size", r.group_size}, {"blocking", r.blocking}, {"iteration", iteration}};
      if (r.has_device_span()) args["host_span_us"] = {r.start_us, r.end_us};
      events_.push_back(span(r.op, "comm", rank_, 1, r.busy_start_us(), r.busy_end_us(), std::move(args)));
    }
  events_.push_back(span("optimizer", "compute", rank_, 0, optimizer_start_us, optimizer_end_us,
                         {{"iteration", iteration}}));
}

void Timeline::write(comm::Communicator& world) {
  nlohmann::json meta = {{{"name", "process_name"}, {"ph", "M"}, {"pid", rank_}, {"args", {{"name", "rank " + std::to_string(rank_)}}}},
                         {{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", 0}, {"args", {{"name", "compute"}}}},
                         {{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", 1}, {"args", {{"name", "communication"}}}}};
  for (auto& e : meta) events_.push_back(e);
  write_json(dir_ + "/rank" + std::to_string(rank_) + ".json", {{"traceEvents", events_}}, "output.trace");
  world.barrier();
  if (world.rank() != 0) return;
  nlohmann::json all = nlohmann::json::array();
  for (int r = 0; r < world.size(); ++r) {
    std::ifstream in(dir_ + "/rank" + std::to_string(r) + ".json");
    if (!in) throw std::runtime_error("output.trace: rank " + std::to_string(r) + "'s file is missing in " + dir_ +
                                      ": the directory must be on a file system every rank shares");
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const auto& e : j["traceEvents"]) all.push_back(e);
  }
  write_json(dir_ + "/trace.json", {{"traceEvents", all}, {"displayTimeUnit", "ms"}}, "output.trace");
}

}  // namespace kformer
