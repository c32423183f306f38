// The communication watchdog (see watchdog.hpp).
#include "watchdog.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace kformer::comm {
namespace {

std::string format_bytes(std::size_t b) {
  char buf[32];
  if (b < 1024) {
    std::snprintf(buf, sizeof buf, "%zu B", b);
  } else {
    const char* unit[] = {"KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(b) / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 3) {
      v /= 1024.0;
      ++u;
    }
    std::snprintf(buf, sizeof buf, "%.1f %s", v, unit[u]);
  }
  return buf;
}

// "[0,1,2]", "[0..63]" (consecutive), "[0,8,..,504]" (a stride), "[0,3,4,9,..,200,201]".
std::string format_ranks(const std::vector<int>& r) {
  std::ostringstream os;
  os << '[';
  const std::size_t n = r.size();
  bool strided = n > 8;
  for (std::size_t i = 2; strided && i < n; ++i) strided = r[i] - r[i - 1] == r[1] - r[0];
  if (n <= 8) {
    for (std::size_t i = 0; i < n; ++i) os << (i ? "," : "") << r[i];
  } else if (strided && r[1] - r[0] == 1) {
    os << r[0] << ".." << r[n - 1];
  } else if (strided) {
    os << r[0] << ',' << r[1] << ",..," << r[n - 1];
  } else {
    os << r[0] << ',' << r[1] << ',' << r[2] << ',' << r[3] << ",..," << r[n - 2] << ',' << r[n - 1];
  }
  os << ']';
  return os.str();
}

int world_rank_of(const GroupInfo& g, int group_rank) {
  if (group_rank >= 0 && group_rank < static_cast<int>(g.world_ranks.size())) return g.world_ranks[group_rank];
  return -1;
}

std::string peer_text(const GroupInfo* g, int group_rank) {
  const int w = g ? world_rank_of(*g, group_rank) : -1;
  return w >= 0 ? "rank " + std::to_string(w) : "group rank " + std::to_string(group_rank);
}

// "allreduce of 4.0 MiB (float32) on group [0,1] (2 ranks)", "recv of 16.0 KiB (float32) from
// rank 3 on group [1,3] (2 ranks)".
std::string describe(const Activity& a) {
  std::string s = a.what;
  if (a.dtype) s += " of " + format_bytes(a.bytes) + " (" + a.dtype + ")";
  const GroupInfo* g = a.group.get();
  if (a.to >= 0) s += " to " + peer_text(g, a.to);
  if (a.from >= 0) s += (a.from_root ? " from root " : " from ") + peer_text(g, a.from);
  if (a.more_peers > 0) s += " and " + std::to_string(a.more_peers) + " more message(s)";
  if (g) s += " on " + g->text;
  const std::string site = describe(a.site);
  if (!site.empty()) s += " (called at " + site + ")";
  return s;
}

}  // namespace

std::shared_ptr<const GroupInfo> describe_group(std::vector<int> world_ranks, int size, const std::string& name) {
  auto g = std::make_shared<GroupInfo>();
  g->size = size;
  if (static_cast<int>(world_ranks.size()) != size) world_ranks.clear();  // a backend that cannot say
  g->world_ranks = std::move(world_ranks);
  const std::string n = std::to_string(size) + (size == 1 ? " rank" : " ranks");
  const std::string group = name.empty() ? "group" : name + " group";
  g->text = g->world_ranks.empty() ? "a " + group + " of " + n : group + " " + format_ranks(g->world_ranks) + " (" + n + ")";
  return g;
}

Activity activity_of(const Op& op, int group_size, std::shared_ptr<const GroupInfo> group) {
  Activity a;
  a.what = op_name(op.kind);
  a.bytes = op_bytes(op, group_size);
  a.dtype = dtype_name(op.type);
  if (op.kind == OpKind::send) a.to = op.peer;
  if (op.kind == OpKind::recv || op.kind == OpKind::broadcast) a.from = op.peer;
  a.from_root = op.kind == OpKind::broadcast;
  a.site = op.site;
  a.group = std::move(group);
  return a;
}

Activity activity_of(const std::vector<Op>& ops, int group_size, std::shared_ptr<const GroupInfo> group) {
  Activity a;
  int sends = 0, recvs = 0;
  for (const Op& op : ops) {
    a.bytes += op_bytes(op, group_size);
    int& peer = op.kind == OpKind::send ? a.to : a.from;
    (op.kind == OpKind::send ? sends : recvs) += 1;
    if (peer < 0) peer = op.peer;
    else ++a.more_peers;
  }
  a.what = sends && recvs ? "send+recv" : sends ? "send" : "recv";
  bool same_type = !ops.empty();
  for (const Op& op : ops) same_type = same_type && op.type == ops.front().type;
  a.dtype = same_type ? dtype_name(ops.front().type) : "mixed types";
  if (!ops.empty()) a.site = ops.front().site;
  a.group = std::move(group);
  return a;
}

// --- Watchdog ----------------------------------------------------------------------------------

Watchdog::Watchdog(double timeout_s, int world_rank, Handler on_timeout)
    : timeout_s_(timeout_s), world_rank_(world_rank), on_timeout_(std::move(on_timeout)) {
  if (!(timeout_s > 0)) throw std::invalid_argument("comm.timeout_s must be > 0 for a watchdog (0 means none)");
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::uint64_t Watchdog::begin(Activity activity, Clock::time_point start) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::uint64_t id = next_id_++;
  in_flight_.push_back({id, start, std::move(activity)});
  return id;
}

void Watchdog::end(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = in_flight_.begin(); it != in_flight_.end(); ++it)
    if (it->id == id) {
      in_flight_.erase(it);
      return;
    }
}

Watchdog::Watch::Watch(Watchdog& dog, Activity activity)
    : dog_(dog), id_(dog.begin(std::move(activity), Clock::now())) {}

Watchdog::Watch::~Watch() { dog_.end(id_); }

std::string Watchdog::overdue(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Entry* oldest = nullptr;
  for (const Entry& e : in_flight_)
    if (!oldest || e.start < oldest->start) oldest = &e;
  if (!oldest) return {};
  const double waited = std::chrono::duration<double>(now - oldest->start).count();
  if (waited <= timeout_s_) return {};
  char tail[160];
  std::snprintf(tail, sizeof tail,
                " has not completed after %.1f s (comm.timeout_s=%g): a peer rank is hung or dead "
                "(raise comm.timeout_s if it is only slow); aborting",
                waited, timeout_s_);
  return "kformer: rank " + std::to_string(world_rank_) + ": " + describe(oldest->activity) + tail;
}

void Watchdog::loop() {
  // Looks ten times per timeout at least, and every 100 ms at most: a timeout is overrun by
  // at most a tenth of itself, and an idle rank wakes 10 times a second.
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::min(0.1, timeout_s_ / 10.0)));
  std::unique_lock<std::mutex> lock(thread_mutex_);
  auto last = Clock::now();
  while (!stop_) {
    wake_.wait_for(lock, period);
    if (stop_) return;
    const auto now = Clock::now();
    const auto late = now - last - period;
    last = now;
    // Woken a second or more late: this process itself was not running (SIGSTOP, a paused VM, a
    // starved node). Its peers are not to blame for that time: a rank stopped and continued
    // would otherwise report them as hung the moment it resumes.
    if (late > std::chrono::seconds(1)) {
      postpone(late);
      continue;
    }
    std::string line = overdue(now);
    if (line.empty()) continue;
    lock.unlock();
    on_timeout_(*this, line);  // ends the job; a test's handler returns, and the watch is over
    return;
  }
}

void Watchdog::postpone(Clock::duration by) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Entry& e : in_flight_) e.start += by;
}

void Watchdog::enlist(Communicator* comm) {
  std::lock_guard<std::mutex> lock(comms_mutex_);
  comms_.push_back(comm);
}

void Watchdog::discharge(Communicator* comm) {
  std::lock_guard<std::mutex> lock(comms_mutex_);
  comms_.erase(std::remove(comms_.begin(), comms_.end(), comm), comms_.end());
}

void Watchdog::abort_communicators() {
  std::lock_guard<std::mutex> lock(comms_mutex_);
  for (Communicator* c : comms_) c->abort_calls();
}

}  // namespace kformer::comm
