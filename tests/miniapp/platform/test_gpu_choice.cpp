// Which GPU each rank runs on, with fake GPU counts and seats: CUDA builds call this before
// Kokkos starts, and a mistake there puts every rank of a node on GPU 0, or stops a good launch.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "platform/gpu_choice.hpp"

using kformer::GpuSeat;

namespace {

// A node of `ranks` ranks, each seeing `gpus` GPUs (all of the node's unless `per_rank_visible`:
// then each rank sees its own `gpus`, as gpu_affinity.sh or srun --gpus-per-task set it).
std::vector<GpuSeat> node(const std::string& host, int first_rank, int ranks, int gpus, bool per_rank_visible = false) {
  std::vector<GpuSeat> out;
  for (int r = 0; r < ranks; ++r) {
    GpuSeat s;
    s.world_rank = first_rank + r;
    s.host = host;
    s.node_rank = r;
    s.ranks_on_node = ranks;
    s.gpu_count = gpus;
    s.device = kformer::choose_device(r, ranks, gpus);
    const int physical = per_rank_visible ? r * gpus + s.device : s.device;
    s.visible = per_rank_visible ? std::to_string(physical) : "";
    s.gpu_id = "GPU-" + host + "-" + std::to_string(physical);  // UUIDs differ across hosts
    out.push_back(s);
  }
  return out;
}

std::vector<GpuSeat> join(std::vector<GpuSeat> a, const std::vector<GpuSeat>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST(GpuChoice, EachRankOfAFullNodeGetsItsOwnGpu) {
  for (int r = 0; r < 4; ++r) EXPECT_EQ(kformer::choose_device(r, 4, 4), r);
  EXPECT_EQ(kformer::choose_device(1, 2, 4), 1);  // fewer ranks than GPUs: the first ones
  EXPECT_EQ(kformer::choose_device(0, 1, 8), 0);
}

TEST(GpuChoice, ARankThatSeesOneGpuTakesIt) {
  for (int r = 0; r < 4; ++r) EXPECT_EQ(kformer::choose_device(r, 4, 1), 0);  // the launcher bound it
  EXPECT_EQ(kformer::choose_device(3, 4, 0), -1);
  EXPECT_EQ(kformer::choose_device(2, 4, 2), 0);  // shared: seats_problem refuses it
}

TEST(GpuChoice, KokkosArgumentIsTheSpellingBothVersionsRead) {
  EXPECT_EQ(kformer::kokkos_device_argument(3), "--kokkos-device-id=3");
}

TEST(GpuChoice, UserChoiceByArgumentOrVariableWins) {
  std::map<std::string, std::string> env;
  const auto lookup = [&](const char* n) -> const char* {
    const auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  const std::vector<std::string> plain = {"kformer", "input/tiny.yaml", "--kokkos-threads=2", "--kokkos-device-idx=1"};
  EXPECT_EQ(kformer::user_device_choice(plain, lookup), "");
  for (const std::string a : {"--kokkos-device-id=2", "--kokkos-num-devices=4", "--kokkos-map-device-id-by=mpi_rank",
                              "--kokkos-device=1", "--kokkos-ndevices=2,1"})
    EXPECT_EQ(kformer::user_device_choice({"kformer", "deck.yaml", a}, lookup), a);
  env["KOKKOS_NUM_DEVICES"] = "4";
  EXPECT_EQ(kformer::user_device_choice(plain, lookup), "KOKKOS_NUM_DEVICES=4");
  env.clear();
  env["KOKKOS_VISIBLE_DEVICES"] = "2,3";
  EXPECT_EQ(kformer::user_device_choice(plain, lookup), "KOKKOS_VISIBLE_DEVICES=2,3");
  env["KOKKOS_DEVICE_ID"] = "1";
  EXPECT_EQ(kformer::user_device_choice(plain, lookup), "KOKKOS_DEVICE_ID=1");
  EXPECT_EQ(kformer::user_device_choice({"kformer", "--kokkos-device-id=0"}, lookup), "--kokkos-device-id=0");
}

TEST(GpuChoice, SeatsRoundTripThroughText) {
  GpuSeat s;
  s.world_rank = 5;
  s.host = "x3005c0s7b0n0";
  s.node_rank = 1;
  s.ranks_on_node = 4;
  s.gpu_count = 0;
  s.cuda_error = "cudaErrorNoDevice: no CUDA-capable device is detected";
  s.visible = "";
  s.user_choice = "KOKKOS_DEVICE_ID=1";
  s.device = -1;
  s.gpu_id = "";
  const GpuSeat t = kformer::decode_seat(kformer::encode_seat(s));
  EXPECT_EQ(t.world_rank, 5);
  EXPECT_EQ(t.host, s.host);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.ranks_on_node, 4);
  EXPECT_EQ(t.gpu_count, 0);
  EXPECT_EQ(t.cuda_error, s.cuda_error);
  EXPECT_EQ(t.visible, "");
  EXPECT_EQ(t.user_choice, s.user_choice);
  EXPECT_EQ(t.device, -1);
  EXPECT_EQ(t.gpu_id, "");
  EXPECT_THROW(kformer::decode_seat("1\x1fhost"), std::logic_error);
}

TEST(GpuChoice, FullNodesAndLauncherBindingsPass) {
  EXPECT_EQ(kformer::seats_problem(join(node("nid1", 0, 4, 4), node("nid2", 4, 4, 4))), "");
  EXPECT_EQ(kformer::seats_problem(node("nid1", 0, 4, 1, true)), "");  // one GPU visible per rank
  EXPECT_EQ(kformer::seats_problem(node("nid1", 0, 2, 4)), "");
}

TEST(GpuChoice, MoreRanksThanGpusIsRefusedWithTheFix) {
  // Two nodes, the second with only 2 GPUs visible: the verdict names it, on every rank alike.
  auto seats = join(node("nid1", 0, 4, 4), node("nid2", 4, 4, 2));
  for (auto& s : seats)
    if (s.host == "nid2") s.visible = "0,1";
  const std::string p = kformer::seats_problem(seats);
  EXPECT_NE(p.find("ranks 4 and 6 on nid2 would share GPU 0"), std::string::npos) << p;
  EXPECT_NE(p.find("the node has 4 ranks but they see 2 GPU(s)"), std::string::npos) << p;
  EXPECT_NE(p.find("CUDA_VISIBLE_DEVICES=0,1"), std::string::npos) << p;
  EXPECT_NE(p.find("launch at most 2 rank(s) per node"), std::string::npos) << p;
}

TEST(GpuChoice, BindingEveryRankToTheSameGpuIsRefused) {
  auto seats = node("nid1", 0, 4, 1, true);
  for (auto& s : seats) s.gpu_id = "GPU-same";  // a wrapper that gave every rank GPU 0
  const std::string p = kformer::seats_problem(seats);
  EXPECT_NE(p.find("ranks 0 and 1 on nid1 would share GPU 0"), std::string::npos) << p;
  EXPECT_NE(p.find("launch at most 1 rank(s) per node"), std::string::npos) << p;
}

TEST(GpuChoice, UnknownUuidsFallBackToHostAndVisibleDevices) {
  auto bound = node("nid1", 0, 4, 1, true);
  for (auto& s : bound) s.gpu_id = "";
  EXPECT_EQ(kformer::seats_problem(bound), "");  // each sees another GPU as its 0
  auto shared = node("nid1", 0, 4, 2);
  for (auto& s : shared) s.gpu_id = "";
  EXPECT_NE(kformer::seats_problem(shared).find("would share GPU 0"), std::string::npos);
}

TEST(GpuChoice, NoGpuIsRefusedWithCudasReason) {
  auto seats = node("nid1", 0, 2, 0);
  seats[0].cuda_error = "cudaErrorNoDevice: no CUDA-capable device is detected";
  const std::string p = kformer::seats_problem(seats);
  EXPECT_NE(p.find("rank 0 on nid1 sees no GPU (cudaErrorNoDevice"), std::string::npos) << p;
  EXPECT_NE(p.find("CUDA_VISIBLE_DEVICES unset"), std::string::npos) << p;
  EXPECT_NE(p.find("cmake --preset default"), std::string::npos) << p;
}

TEST(GpuChoice, AUserChoiceIsNotSecondGuessed) {
  auto seats = node("nid1", 0, 4, 1);
  for (auto& s : seats) {
    s.user_choice = "KOKKOS_DEVICE_ID=0";  // all on one GPU on purpose (MPS)
    s.device = -1;
    s.gpu_id = "";
  }
  EXPECT_EQ(kformer::seats_problem(seats), "");
  EXPECT_EQ(kformer::describe_seat(seats[2]),
            "rank 2 on nid1: GPU chosen by KOKKOS_DEVICE_ID=0 (node rank 2 of 4, 1 GPU(s) visible)");
}

TEST(GpuChoice, DescribeSaysWhichGpuAndWhy) {
  const auto seats = node("nid1", 0, 4, 4);
  EXPECT_EQ(kformer::describe_seat(seats[3]),
            "rank 3 on nid1: GPU 3 of 4 (node rank 3 of 4, chosen by kformer, CUDA_VISIBLE_DEVICES unset) GPU-nid1-3");
}
