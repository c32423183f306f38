// Machine profiles: reading, checking and writing (see machine_profile.hpp).
#include "predict/machine_profile.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "platform/errors.hpp"
#include "settings/choices.hpp"

namespace kformer::predict {
namespace {

// One line for every fault: the file, where, what, and the fix.
[[noreturn]] void bad(const std::string& file, const std::string& where, const std::string& what) {
  throw ConfigError("machine profile " + file + (where.empty() ? "" : ", " + where) + ": " + what +
                    " (fix the file, pick another with predict.machine=FILE, or write this machine's with "
                    "kformer calibrate)");
}

struct Reader {
  std::string file;
  void keys(const YAML::Node& n, const std::string& where, const std::set<std::string>& allowed) const {
    if (!n.IsMap()) bad(file, where, "expected a map of keys");
    for (const auto& kv : n) {
      const std::string k = kv.first.as<std::string>();
      if (!allowed.count(k)) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        bad(file, where.empty() ? k : where + "." + k, "unknown key; known here: " + list);
      }
    }
  }
  double number(const YAML::Node& n, const std::string& where, const std::string& key, double fallback,
                bool required = false, bool signed_ok = false) const {
    const YAML::Node v = n[key];
    const std::string at = where.empty() ? key : where + "." + key;
    if (!v) {
      if (required) bad(file, at, "missing");
      return fallback;
    }
    double x = 0;
    try {
      if (!v.IsScalar()) throw YAML::Exception(YAML::Mark::null_mark(), "");
      x = v.as<double>();
    } catch (const YAML::Exception&) {
      bad(file, at, "'" + (v.IsScalar() ? v.Scalar() : std::string("a list or map")) + "' is not a number");
    }
    if (!std::isfinite(x) || (x < 0 && !signed_ok))
      bad(file, at, signed_ok ? "must be a finite number" : "must be a finite number >= 0");
    return x;
  }
  LinkCost link(const YAML::Node& n, const std::string& where) const {
    keys(n, where, {"latency_us", "bandwidth_gbps", "ranks"});
    LinkCost c;
    c.latency_us = number(n, where, "latency_us", 0, true);
    c.bandwidth_gbps = number(n, where, "bandwidth_gbps", 0, true);
    c.ranks = int(number(n, where, "ranks", 0));
    return c;
  }
  // A SeqRate at `where`: a rate > 0 for every length, or a map of lengths > 0 to rates > 0.
  SeqRate seq_rate(const YAML::Node& v, const std::string& where) const {
    const char* fix = "must be a rate > 0, or a map of sequence lengths > 0 to rates > 0 (or leave it out)";
    SeqRate into;
    double one = 0;
    if (v.IsScalar()) {
      try {
        one = v.as<double>();
      } catch (const YAML::Exception&) {
        bad(file, where, fix);
      }
      if (!std::isfinite(one) || one <= 0) bad(file, where, fix);
      into.by_seq[0] = one;
    } else if (v.IsMap()) {
      for (const auto& kv : v) {
        int t = 0;
        double r = 0;
        try {
          t = kv.first.as<int>();
          r = kv.second.as<double>();
        } catch (const YAML::Exception&) {
          bad(file, where, fix);
        }
        if (t <= 0 || !std::isfinite(r) || r <= 0) bad(file, where, fix);
        into.by_seq[t] = r;
      }
    }
    if (!into.given()) bad(file, where, fix);  // a list, or an empty map
    return into;
  }
  // A map of head sizes > 0 to rates by sequence length (as seq_rate).
  std::map<int, SeqRate> by_head_size(const YAML::Node& m, const std::string& where) const {
    if (!m.IsMap() || m.size() == 0) bad(file, where, "must be a map of head sizes > 0 to rates by sequence length");
    std::map<int, SeqRate> into;
    for (const auto& kv : m) {
      int hd = 0;
      try {
        hd = kv.first.as<int>();
      } catch (const YAML::Exception&) {
      }
      if (hd <= 0) bad(file, where, "'" + kv.first.Scalar() + "' is not a head size > 0");
      into[hd] = seq_rate(kv.second, where + "." + std::to_string(hd));
    }
    return into;
  }
  // A rate for every head size (as seq_rate), or a map of head sizes to such rates (its values maps).
  HeadSeqRate head_seq_rate(const YAML::Node& v, const std::string& where) const {
    HeadSeqRate into;
    if (v.IsMap() && v.size() > 0 && v.begin()->second.IsMap())
      into.by_hd = by_head_size(v, where);
    else
      into.by_hd[0] = seq_rate(v, where);
    return into;
  }
  // The gemm and attention sections under `at` ("" or "bf16.").
  ComputeRates rates(const YAML::Node& root, const std::string& at) const {
    ComputeRates c;
    const YAML::Node g = root["gemm"];
    if (!g) bad(file, at + "gemm", "missing: give peak_tflops, max_efficiency and half_efficiency_gflop");
    keys(g, at + "gemm", {"peak_tflops", "max_efficiency", "half_efficiency_gflop", "output_bytes", "points"});
    c.gemm_peak_tflops = number(g, at + "gemm", "peak_tflops", 0, true);
    c.gemm_max_efficiency = number(g, at + "gemm", "max_efficiency", 1);
    c.gemm_half_efficiency_gflop = number(g, at + "gemm", "half_efficiency_gflop", 0);
    c.gemm_output_bytes = int(number(g, at + "gemm", "output_bytes", 0));
    if (c.gemm_output_bytes != 0 && c.gemm_output_bytes != 2 && c.gemm_output_bytes != 4)
      bad(file, at + "gemm.output_bytes", "must be 2 (the timings wrote bf16 outputs) or 4 (fp32)");
    if (c.gemm_peak_tflops <= 0 || c.gemm_max_efficiency <= 0 || c.gemm_max_efficiency > 1)
      bad(file, at + "gemm", "peak_tflops must be > 0 and max_efficiency in (0, 1]");
    if (g["points"])
      for (std::size_t i = 0; i < g["points"].size(); ++i) {
        const YAML::Node n = g["points"][i];
        const std::string where = at + "gemm.points[" + std::to_string(i) + "]";
        keys(n, where, {"m", "n", "k", "forward_us", "backward_us"});
        c.gemm_points.push_back({int(number(n, where, "m", 0, true)), int(number(n, where, "n", 0, true)),
                                 int(number(n, where, "k", 0, true)), number(n, where, "forward_us", 0, true),
                                 number(n, where, "backward_us", 0, true)});
      }
    const YAML::Node a = root["attention"];
    if (!a) bad(file, at + "attention", "missing: give naive_tflops and fused_tflops");
    keys(a, at + "attention",
         {"naive_tflops", "fused_tflops", "flash2_tflops", "triton_tflops", "cudnn_forward_tflops",
          "cudnn_backward_tflops", "batched_gemm_tflops", "half_rate_share", "points"});
    for (const char* kind : {"naive", "fused"}) {
      c.attention_tflops[kind] = number(a, at + "attention", std::string(kind) + "_tflops", 0, true);
      if (c.attention_tflops[kind] <= 0) bad(file, at + "attention." + kind + "_tflops", "must be > 0");
    }
    const auto ceiling = [&](const char* key, SeqRate& into) {
      if (a[key]) into = seq_rate(a[key], at + "attention." + key);
    };
    const auto by_head = [&](const char* key, HeadSeqRate& into) {
      if (a[key]) into = head_seq_rate(a[key], at + "attention." + key);
    };
    by_head("flash2_tflops", c.flash2_tflops);
    by_head("triton_tflops", c.triton_tflops);
    ceiling("cudnn_forward_tflops", c.cudnn_forward_tflops);
    ceiling("cudnn_backward_tflops", c.cudnn_backward_tflops);
    c.attention_half_rate_share = number(a, at + "attention", "half_rate_share", 0);
    if (c.attention_half_rate_share < 0) bad(file, at + "attention.half_rate_share", "must be >= 0");
    if (const YAML::Node m = a["batched_gemm_tflops"])
      c.batched_gemm_tflops = by_head_size(m, at + "attention.batched_gemm_tflops");
    if (a["points"])
      for (std::size_t i = 0; i < a["points"].size(); ++i) {
        const YAML::Node n = a["points"][i];
        const std::string where = at + "attention.points[" + std::to_string(i) + "]";
        keys(n, where, {"b", "t", "h", "kv", "hd", "kind", "forward_us", "backward_us"});
        AttentionPoint q{int(number(n, where, "b", 0, true)), int(number(n, where, "t", 0, true)),
                         int(number(n, where, "h", 0, true)), int(number(n, where, "kv", 0, true)),
                         int(number(n, where, "hd", 0, true)), n["kind"] ? n["kind"].as<std::string>() : "",
                         number(n, where, "forward_us", 0, true), number(n, where, "backward_us", 0, true)};
        try {
          parse_choice<AttentionKind>(q.kind);  // kernels.attention's names
        } catch (const std::invalid_argument& e) {
          bad(file, where + ".kind", e.what());
        }
        c.attention_points.push_back(q);
      }
    return c;
  }
  LinkClass link_class(const YAML::Node& n, const std::string& where) const {
    static const std::set<std::string> collectives = {"allreduce", "allgather",  "reduce_scatter",
                                                      "send",      "iallreduce", "ireduce_scatter"};
    std::set<std::string> allowed = collectives;
    allowed.insert("default");
    keys(n, where, allowed);
    LinkClass lc;
    if (!n["default"]) bad(file, where + ".default", "missing: give latency_us and bandwidth_gbps for any collective");
    lc.fallback = link(n["default"], where + ".default");
    for (const std::string& k : collectives) {
      const YAML::Node v = n[k];
      if (!v) continue;
      const std::string at = where + "." + k;
      if (v.IsSequence())
        for (std::size_t i = 0; i < v.size(); ++i) lc.collectives[k].push_back(link(v[i], at + "[" + std::to_string(i) + "]"));
      else
        lc.collectives[k].push_back(link(v, at));
    }
    return lc;
  }
};

MachineProfile parse(const YAML::Node& root, const std::string& file) {
  const Reader r{file};
  r.keys(root, "", {"name", "devices_per_node", "memory_gb", "process_baseline_gb", "fma_peak_tflops", "copy_gbps",
                    "launch_us", "sms", "compute_scale", "wakeup_us", "sync_wakeup_us", "async_progress",
                    "kformer_build", "gemm", "attention", "bf16", "memory_bound", "network", "eager_host",
                    "published_accuracy"});
  MachineProfile p;
  p.source = file;
  p.name = root["name"] && root["name"].IsScalar() ? root["name"].Scalar() : file;
  p.devices_per_node = int(r.number(root, "", "devices_per_node", 1));
  if (p.devices_per_node < 1) bad(file, "devices_per_node", "must be at least 1");
  p.memory_gb = r.number(root, "", "memory_gb", 0);
  p.process_baseline_gb = r.number(root, "", "process_baseline_gb", 0);
  p.fma_peak_tflops = r.number(root, "", "fma_peak_tflops", 0, true);
  p.copy_gbps = r.number(root, "", "copy_gbps", 0, true);
  p.launch_us = r.number(root, "", "launch_us", 0);
  p.sms = int(r.number(root, "", "sms", 0));
  p.compute_scale = r.number(root, "", "compute_scale", 1);
  if (p.compute_scale <= 0) bad(file, "compute_scale", "must be > 0");
  p.wakeup_us = r.number(root, "", "wakeup_us", 0);
  p.sync_wakeup_us = r.number(root, "", "sync_wakeup_us", 0);
  if (const YAML::Node a = root["async_progress"]) {
    if (!a.IsScalar() || (a.Scalar() != "true" && a.Scalar() != "false"))
      bad(file, "async_progress", "must be true or false");
    p.async_progress = a.Scalar() == "true";
  }
  if (const YAML::Node b = root["kformer_build"]) {
    if (!b.IsScalar() || (b.Scalar() != "cuda" && b.Scalar() != "host"))
      bad(file, "kformer_build", "must be cuda (a GPU's profile) or host (the ranks run on CPUs)");
    p.kformer_build = b.Scalar() == "cuda" ? kernels::CodePath::cuda : kernels::CodePath::this_build;
  }

  if (const YAML::Node e = root["eager_host"]) {
    r.keys(e, "eager_host", {"layer_forward_us", "layer_backward_us", "blocking_layer_forward_us",
                             "blocking_layer_backward_us", "top_forward_us", "top_backward_us", "optimizer_us", "source"});
    EagerHost& h = p.eager_host;
    h.layer_forward_us = r.number(e, "eager_host", "layer_forward_us", 0, true);
    h.layer_backward_us = r.number(e, "eager_host", "layer_backward_us", 0, true);
    h.blocking_layer_forward_us = r.number(e, "eager_host", "blocking_layer_forward_us", 0);
    h.blocking_layer_backward_us = r.number(e, "eager_host", "blocking_layer_backward_us", 0);
    h.top_forward_us = r.number(e, "eager_host", "top_forward_us", 0);
    h.top_backward_us = r.number(e, "eager_host", "top_backward_us", 0);
    h.optimizer_us = r.number(e, "eager_host", "optimizer_us", 0);
    if (!e["source"] || !e["source"].IsScalar())
      bad(file, "eager_host.source", "missing: say which run of bench/eager_op_cost.py measured it");
    h.source = e["source"].Scalar();
  }

  if (const YAML::Node a = root["published_accuracy"]) {
    r.keys(a, "published_accuracy", {"rows", "median_abs_pct", "mean_signed_pct", "note"});
    PublishedAccuracy& pa = p.published;
    pa.rows = int(r.number(a, "published_accuracy", "rows", 0, true));
    pa.median_abs_pct = r.number(a, "published_accuracy", "median_abs_pct", 0, true);
    pa.mean_signed_pct = r.number(a, "published_accuracy", "mean_signed_pct", 0, true, true);
    if (const YAML::Node n = a["note"]) {
      if (!n.IsScalar()) bad(file, "published_accuracy.note", "must be one line of text");
      pa.note = n.Scalar();
    }
    if (pa.rows < 1)
      bad(file, "published_accuracy", "rows must be at least 1 (scripts/validate_published.py --check says what "
                                      "the section is)");
  }

  p.fp32 = r.rates(root, "");
  if (const YAML::Node b = root["bf16"]) {
    r.keys(b, "bf16", {"gemm", "attention", "memory_bound"});
    p.bf16 = r.rates(b, "bf16.");
    if (const YAML::Node m = b["memory_bound"]) {
      r.keys(m, "bf16.memory_bound", std::set<std::string>(memory_families().begin(), memory_families().end()));
      for (const auto& f : memory_families())
        if (m[f]) {
          p.bf16.memory_gbps[f] = r.number(m, "bf16.memory_bound", f, 0, true);
          if (p.bf16.memory_gbps[f] <= 0) bad(file, "bf16.memory_bound." + f, "must be > 0 GB/s");
        }
    }
  }

  const YAML::Node m = root["memory_bound"];
  if (!m) bad(file, "memory_bound", "missing: give the GB/s of each kernel family");
  std::set<std::string> families(memory_families().begin(), memory_families().end());
  families.insert(optional_memory_families().begin(), optional_memory_families().end());
  r.keys(m, "memory_bound", families);
  for (const auto& f : families) {
    const bool optional = !std::count(memory_families().begin(), memory_families().end(), f);
    if (optional && !m[f]) continue;
    p.memory_gbps[f] = r.number(m, "memory_bound", f, 0, true);
    if (p.memory_gbps[f] <= 0) bad(file, "memory_bound." + f, "must be > 0 GB/s");
  }

  const YAML::Node net = root["network"];
  if (!net) bad(file, "network", "missing: give intra_node and inter_node link costs");
  r.keys(net, "network", {"intra_node", "inter_node", "nics_per_node", "one_stream", "collective_sms"});
  if (const YAML::Node c = net["collective_sms"]) {
    r.keys(c, "network.collective_sms", {"intra_node", "inter_node"});
    p.collective_sms_intra = int(r.number(c, "network.collective_sms", "intra_node", 0, true));
    p.collective_sms_inter = int(r.number(c, "network.collective_sms", "inter_node", 0, true));
    if (p.sms < 1) bad(file, "network.collective_sms", "needs the device's SMs: give sms (e.g. 108 on an A100)");
    if (std::max(p.collective_sms_intra, p.collective_sms_inter) >= p.sms)
      bad(file, "network.collective_sms", "must be fewer than the device's " + std::to_string(p.sms) + " SMs");
  }
  if (const YAML::Node o = net["one_stream"]) {
    if (!o.IsScalar() || (o.Scalar() != "true" && o.Scalar() != "false"))
      bad(file, "network.one_stream", "must be true or false");
    p.one_stream = o.Scalar() == "true";
  }
  p.nics_per_node = int(r.number(net, "network", "nics_per_node", 0));
  if (p.nics_per_node < 0) bad(file, "network.nics_per_node", "must be 0 (not given) or more");
  if (!net["intra_node"]) bad(file, "network.intra_node", "missing");
  p.intra_node = r.link_class(net["intra_node"], "network.intra_node");
  p.inter_node = net["inter_node"] ? r.link_class(net["inter_node"], "network.inter_node") : p.intra_node;
  return p;
}

}  // namespace

const std::vector<std::string>& memory_families() {
  static const std::vector<std::string> f = {"norm",      "activation",    "residual", "rope",
                                             "embedding", "cross_entropy", "optimizer"};
  return f;
}

const std::vector<std::string>& optional_memory_families() {
  static const std::vector<std::string> f = {"copy", "reduction"};
  return f;
}

LinkCost LinkClass::cost(comm::OpKind kind, int n, bool nonblocking) const {
  const char* name = kind == comm::OpKind::allreduce        ? "allreduce"
                     : kind == comm::OpKind::allgather      ? "allgather"
                     : kind == comm::OpKind::reduce_scatter ? "reduce_scatter"
                     : kind == comm::OpKind::broadcast      ? "allgather"
                                                            : "send";
  auto it = collectives.find(name);
  if (nonblocking) {
    const auto i = collectives.find(std::string("i") + name);
    if (i != collectives.end() && !i->second.empty()) it = i;
  }
  if (it == collectives.end() || it->second.empty()) return fallback;
  const LinkCost* best = &it->second.front();
  for (const auto& c : it->second)
    if (c.ranks == n || (best->ranks != n && std::abs(c.ranks - n) < std::abs(best->ranks - n))) best = &c;
  return *best;
}

MachineProfile load_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) bad(path, "", "cannot be read (no such file?)");
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    bad(path, "line " + std::to_string(e.mark.line + 1), "not valid YAML: " + e.msg);
  }
  if (!root || root.IsNull()) bad(path, "", "is empty");
  try {
    return parse(root, path);
  } catch (const YAML::Exception& e) {
    bad(path, "line " + std::to_string(e.mark.line + 1), e.msg);
  }
}

std::string profile_yaml(const MachineProfile& p, const std::string& header_comment) {
  std::ostringstream o;
  o.precision(6);
  o << header_comment << "name: " << p.name << "\ndevices_per_node: " << p.devices_per_node
    << "\nmemory_gb: " << p.memory_gb << "\nprocess_baseline_gb: " << p.process_baseline_gb
    << "\nfma_peak_tflops: " << p.fma_peak_tflops << "\ncopy_gbps: " << p.copy_gbps << "\nlaunch_us: " << p.launch_us;
  if (p.sms > 0) o << "\nsms: " << p.sms;
  o << "\ncompute_scale: " << p.compute_scale << "\nwakeup_us: " << p.wakeup_us << "\nsync_wakeup_us: " << p.sync_wakeup_us
    << "\nasync_progress: " << (p.async_progress ? "true" : "false")
    << "\nkformer_build: " << kformer_build_name(p.kformer_build);
  if (p.eager_host.given(false)) {
    const EagerHost& h = p.eager_host;
    o << "\neager_host:\n  layer_forward_us: " << h.layer_forward_us << "\n  layer_backward_us: " << h.layer_backward_us
      << "\n  blocking_layer_forward_us: " << h.blocking_layer_forward_us
      << "\n  blocking_layer_backward_us: " << h.blocking_layer_backward_us
      << "\n  top_forward_us: " << h.top_forward_us << "\n  top_backward_us: " << h.top_backward_us
      << "\n  optimizer_us: " << h.optimizer_us << "\n  source: \"" << h.source << "\"";
  }
  const auto rates = [&](const ComputeRates& c, const char* indent) {
    o << indent << "gemm:\n" << indent << "  peak_tflops: " << c.gemm_peak_tflops << "\n" << indent
      << "  max_efficiency: " << c.gemm_max_efficiency << "\n" << indent
      << "  half_efficiency_gflop: " << c.gemm_half_efficiency_gflop << "\n";
    if (c.gemm_output_bytes > 0) o << indent << "  output_bytes: " << c.gemm_output_bytes << "\n";
    o << indent << "  points:\n";
    for (const auto& g : c.gemm_points)
      o << indent << "    - {m: " << g.m << ", n: " << g.n << ", k: " << g.k << ", forward_us: " << g.forward_us
        << ", backward_us: " << g.backward_us << "}\n";
    o << indent << "attention:\n" << indent << "  naive_tflops: " << c.attention_tflops.at("naive") << "\n" << indent
      << "  fused_tflops: " << c.attention_tflops.at("fused") << "\n";
    const auto flow = [&](const SeqRate& r) {  // a number, or {T: rate, ...}
      if (r.by_seq.size() == 1 && r.by_seq.begin()->first == 0) {
        o << r.by_seq.begin()->second;
        return;
      }
      const char* sep = "{";
      for (const auto& [t, v] : r.by_seq) o << sep << t << ": " << v, sep = ", ";
      o << "}";
    };
    const auto rate = [&](const char* key, const SeqRate& r) {
      if (!r.given()) return;
      o << indent << "  " << key << ": ";
      flow(r);
      o << "\n";
    };
    const auto by_head = [&](const char* key, const HeadSeqRate& r) {  // a rate, or {hd: rate, ...}
      if (!r.given()) return;
      o << indent << "  " << key << ": ";
      if (r.by_hd.size() == 1 && r.by_hd.begin()->first == 0) {
        flow(r.by_hd.begin()->second);
      } else {
        const char* sep = "{";
        for (const auto& [hd, one] : r.by_hd) o << sep << hd << ": ", flow(one), sep = ", ";
        o << "}";
      }
      o << "\n";
    };
    by_head("flash2_tflops", c.flash2_tflops);
    by_head("triton_tflops", c.triton_tflops);
    rate("cudnn_forward_tflops", c.cudnn_forward_tflops);
    rate("cudnn_backward_tflops", c.cudnn_backward_tflops);
    if (c.attention_half_rate_share > 0) o << indent << "  half_rate_share: " << c.attention_half_rate_share << "\n";
    if (!c.batched_gemm_tflops.empty()) {
      o << indent << "  batched_gemm_tflops:\n";
      for (const auto& [hd, r] : c.batched_gemm_tflops) {
        o << indent << "    " << hd << ": ";
        flow(r);
        o << "\n";
      }
    }
    o << indent << "  points:\n";
    for (const auto& a : c.attention_points)
      o << indent << "    - {b: " << a.b << ", t: " << a.t << ", h: " << a.h << ", kv: " << a.kv << ", hd: " << a.hd
        << ", kind: " << a.kind << ", forward_us: " << a.forward_us << ", backward_us: " << a.backward_us << "}\n";
  };
  o << "\n";
  rates(p.fp32, "");
  if (p.bf16.given()) {
    o << "bf16:  # bf16 mixed precision's GEMMs and attention\n";
    rates(p.bf16, "  ");
    if (!p.bf16.memory_gbps.empty()) {
      o << "  memory_bound:  # GB/s of the families on bf16 activations\n";
      for (const auto& f : p.bf16.memory_gbps) o << "    " << f.first << ": " << f.second << "\n";
    }
  }
  o << "memory_bound:  # GB/s over the bytes each family moves\n";
  for (const auto& f : memory_families()) o << "  " << f << ": " << p.memory_gbps.at(f) << "\n";
  for (const auto& f : optional_memory_families())
    if (p.memory_gbps.count(f)) o << "  " << f << ": " << p.memory_gbps.at(f) << "\n";
  const auto link = [&](const char* name, const LinkClass& lc) {
    o << "  " << name << ":\n    default: {latency_us: " << lc.fallback.latency_us
      << ", bandwidth_gbps: " << lc.fallback.bandwidth_gbps << "}\n";
    for (const auto& c : lc.collectives) {
      o << "    " << c.first << ":\n";
      for (const auto& e : c.second)
        o << "      - {ranks: " << e.ranks << ", latency_us: " << e.latency_us << ", bandwidth_gbps: " << e.bandwidth_gbps
          << "}\n";
    }
  };
  o << "network:  # latency + bus bytes / bandwidth (Gbit/s), nccl-tests' bus factors\n";
  if (p.nics_per_node > 0) o << "  nics_per_node: " << p.nics_per_node << "\n";
  if (p.one_stream) o << "  one_stream: true\n";
  if (p.collective_sms_intra + p.collective_sms_inter > 0)
    o << "  collective_sms: {intra_node: " << p.collective_sms_intra << ", inter_node: " << p.collective_sms_inter << "}\n";
  link("intra_node", p.intra_node);
  link("inter_node", p.inter_node);
  return o.str();
}

double SeqRate::at(int t) const {
  if (by_seq.empty()) return 0;
  const auto hi = by_seq.lower_bound(t);
  if (hi == by_seq.begin()) return hi->second;  // at or before the first length (or one figure for all)
  if (hi == by_seq.end()) return std::prev(hi)->second;
  const auto lo = std::prev(hi);
  if (hi->first == t) return hi->second;
  const double f = (std::log2(double(t)) - std::log2(double(lo->first))) /
                   (std::log2(double(hi->first)) - std::log2(double(lo->first)));
  return lo->second + f * (hi->second - lo->second);
}

double HeadSeqRate::at(int hd, int t) const {
  if (by_hd.empty()) return 0;
  if (const auto one = by_hd.find(hd); one != by_hd.end()) return one->second.at(t);
  if (const auto all = by_hd.find(0); all != by_hd.end()) return all->second.at(t);
  const auto distance = [&](int charted) { return std::abs(std::log2(double(charted) / double(hd))); };
  const SeqRate* nearest = nullptr;
  double best = 0;
  for (const auto& [charted, r] : by_hd)  // ascending: a tie goes to the larger
    if (!nearest || distance(charted) <= best) nearest = &r, best = distance(charted);
  return nearest->at(t);
}

double ComputeRates::best_gemm_tflops() const {
  double best = gemm_peak_tflops * gemm_max_efficiency;
  for (const auto& g : gemm_points) best = std::max(best, 2.0 * g.m * g.n * g.k / (g.forward_us * 1e6));
  return best;
}

const ComputeRates& MachineProfile::rates(bool bf16_run) const {
  if (!bf16_run) return fp32;
  if (!bf16.given())
    throw ConfigError("machine profile " + source + " has no bf16 rates, so it cannot cost train.precision=bf16: add "
                      "a `bf16:` section (gemm and attention, from the datasheet) or run kformer calibrate on the "
                      "machine, which measures both precisions");
  return bf16;
}

std::string default_profile_path() {
  const char* env = std::getenv("KFORMER_MACHINE");
  return env && *env ? env : "input/machines/this-machine.yaml";
}

}  // namespace kformer::predict
