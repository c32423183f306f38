// The run of one deck (see app.hpp).
#include "app.hpp"

#include <Kokkos_Core.hpp>

#include <fstream>
#include <iostream>

#include "comm/mesh.hpp"
#include "config.hpp"
#include "errors.hpp"
#include "reference_export.hpp"
#include "trainer.hpp"
#include "validate.hpp"

namespace kformer {
namespace {

nlohmann::json mesh_json(const comm::Mesh& m, int world) {
  return {{"world", world},
          {"tp", m.shape.tp},
          {"pp", m.shape.pp},
          {"dp", m.shape.dp},
          {"tp_groups", m.groups.tp},
          {"dp_groups", m.groups.dp},
          {"pp_groups", m.groups.pp}};
}

void write_json(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw std::runtime_error("output.json=" + path + ": cannot write there; give a path in a writable directory");
    out << j.dump(2) << '\n';
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("output.json=" + path + ": cannot rename " + tmp + " into place");
}

}  // namespace

int run_app(const CliArgs& args, comm::Runtime& runtime) {
  Config cfg;
  cfg.load_deck_file(args.deck);
  for (const auto& o : args.overrides) cfg.apply_override(o);
  resolve_and_validate(cfg, runtime.world_size());

  std::unique_ptr<comm::Communicator> world;
  auto trace = std::make_shared<comm::TraceLog>();
  try {
    comm::WorldOptions options;
    options.emulate = {cfg.f64("comm.emulate.latency_us"), cfg.f64("comm.emulate.bandwidth_gbps")};
    options.trace = trace;
    world = comm::make_world(cfg.str("comm.backend"), runtime, options);
  } catch (const std::runtime_error& e) {
    throw ConfigError(e.what());  // the same verdict on every rank: report it once
  }
  comm::Mesh mesh = comm::build_mesh(
      *world, {cfg.i32("parallel.dp"), cfg.i32("parallel.pp"), cfg.i32("parallel.tp")});

  if (world->rank() == 0) {
    std::cout << "kformer: deck " << args.deck << " on " << world->size() << " rank(s), comm " << world->backend()
              << ", Kokkos " << Kokkos::DefaultExecutionSpace::name() << "\n"
              << "resolved configuration:\n"
              << cfg.to_text() << "mesh: dp=" << mesh.shape.dp << " pp=" << mesh.shape.pp
              << " tp=" << mesh.shape.tp << "\n"
              << "  tp groups " << comm::format_groups(mesh.groups.tp) << "\n"
              << "  dp groups " << comm::format_groups(mesh.groups.dp) << "\n"
              << "  pp groups " << comm::format_groups(mesh.groups.pp) << std::endl;
  }
  if (args.dry_run) return 0;

  Trainer trainer(cfg, *world, mesh, trace);
  if (!cfg.str("output.export").empty())
    trainer.after_backward = [&](int it) {
      if (it != 1) return;
      const auto data = make_data_source(cfg.str("data.source"), cfg.i64("model.vocab_size"), cfg.i64("train.seed"));
      export_reference(cfg.str("output.export"), trainer.params(), *data, 0, cfg.i32("train.global_batch"),
                       cfg.i32("train.seq_len"));
    };
  trainer.run();
  if (world->rank() == 0) {
    const auto& recs = trainer.records();
    nlohmann::json iters = nlohmann::json::array();
    for (const auto& r : recs) iters.push_back(iteration_json(r));
    const double flops = trainer.model().flops().total() * cfg.i64("parallel.microbatches");
    const nlohmann::json summary =
        summarize(recs, flops, cfg.i64("train.global_batch") * cfg.i64("train.seq_len"));
    std::cout << "summary: " << summary.dump() << std::endl;
    if (!cfg.str("output.json").empty())
      write_json(cfg.str("output.json"), {{"config", cfg.to_json()},
                                          {"mesh", mesh_json(mesh, world->size())},
                                          {"iterations", iters},
                                          {"summary", summary}});
  }
  world->barrier();
  return 0;
}

}  // namespace kformer
