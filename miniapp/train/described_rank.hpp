// A rank as the trainer builds it (its model and step program, rank_model.hpp and
// step_program.hpp), over communicators that only record into a WorkLog (comm/described_comm.hpp):
// what describe_iteration, describe_phases, describe_chunk and the memory estimate walk.
#pragma once

#include <memory>

#include "comm/described_comm.hpp"
#include "train/step_program.hpp"
#include "train/step_work.hpp"

namespace kformer {

// The groups of the rank at `at`, recording into whichever log is current.
struct DescribedGroups {
  WorkLog* log = nullptr;
  std::unique_ptr<comm::Communicator> tp, dp, pp, world, tied;
  DescribedGroups(const RunPlan& plan, RankPlace at) {
    const ParallelSettings& par = plan.settings.parallel;
    const auto record = [this](const comm::Op& op, const std::string& group, int size) { log->comm(op, group, size); };
    tp = std::make_unique<comm::DescribedComm>(par.tp, at.tp, "tp", record);
    dp = std::make_unique<comm::DescribedComm>(par.dp, at.dp, "dp", record);
    pp = std::make_unique<comm::DescribedComm>(par.pp, at.pp, "pp", record);
    world = std::make_unique<comm::DescribedComm>(par.tp * par.dp * par.pp, world_rank(par, at), "world", record);
    if (holds_tied_embedding(plan, at))
      tied = std::make_unique<comm::DescribedComm>(2, at.pp == 0 ? 0 : 1, "tied-embedding", record);
  }
  RankGroups groups() const { return {tp.get(), dp.get(), pp.get()}; }
  StepGroups step_groups() const { return {groups(), world.get(), tied.get()}; }
};

// The rank at `at` as the trainer builds it (its model and step program), over recording groups,
// its set-up's calls described into `setup`.
struct DescribedRank {
  DescribedGroups groups;
  std::unique_ptr<RankModel> model;
  std::unique_ptr<StepProgram> program;
  DescribedRank(const RunPlan& plan, RankPlace at, WorkLog& setup) : groups(plan, at) {
    const kernels::Describing describing(setup);
    groups.log = &setup;
    model = build_rank_model(plan, at, groups.groups());
    program = std::make_unique<StepProgram>(plan, *model, at, groups.step_groups());
  }
};

// One iteration of `r`, as Trainer::iterate runs it (describe_iteration's), described into `log`.
void describe_iteration_of(const RunPlan& plan, DescribedRank& r, WorkLog& log);

}  // namespace kformer
