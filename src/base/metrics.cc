#include "tollgate/metrics.h"

#include <cmath>
#include <cstdio>

namespace tollgate {
namespace {

void AppendNumber(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else if (v == std::floor(v) && std::fabs(v) < 1e15) {
    out += std::to_string(static_cast<int64_t>(v));
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    out += buf;
  }
}

// Backslash and newline escaped, and the double quote too in label values
// (HELP text keeps it as is).
std::string Escape(std::string_view v, bool quote) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

uint64_t Load(const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); }

}  // namespace

std::string PrometheusWriter::EscapeLabel(std::string_view v) { return Escape(v, true); }

void PrometheusWriter::Family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += Escape(help, false);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void PrometheusWriter::Labels(std::initializer_list<std::string_view> labels) {
  if (labels.size() == 0) return;
  out_ += '{';
  bool first = true;
  for (auto it = labels.begin(); it != labels.end(); it += 2) {
    if (!first) out_ += ',';
    first = false;
    out_ += *it;
    out_ += "=\"";
    out_ += EscapeLabel(*(it + 1));
    out_ += '"';
  }
  out_ += '}';
}

void PrometheusWriter::Sample(std::string_view name, std::initializer_list<std::string_view> labels,
                              double value) {
  std::string text;
  AppendNumber(text, value);
  Line(name, labels, text);
}

void PrometheusWriter::Sample(std::string_view name, std::initializer_list<std::string_view> labels,
                              uint64_t value) {
  Line(name, labels, std::to_string(value));
}

void PrometheusWriter::Line(std::string_view name, std::initializer_list<std::string_view> labels,
                            std::string_view value) {
  out_ += name;
  Labels(labels);
  out_ += ' ';
  out_ += value;
  out_ += '\n';
}

void DecisionLatency::Observe(int64_t ns) {
  size_t b = 0;
  while (b < kDecisionLatencyBoundsNs.size() && ns > kDecisionLatencyBoundsNs[b]) ++b;
  buckets_[b].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(ns < 0 ? 0 : ns), std::memory_order_relaxed);
}

void DecisionLatency::ObserveStoreCall(bool store_error) {
  store_calls_.fetch_add(1, std::memory_order_relaxed);
  if (store_error) store_errors_.fetch_add(1, std::memory_order_relaxed);
}

void DecisionLatency::AddTo(LatencyCounts& into) const {
  for (size_t b = 0; b < buckets_.size(); ++b) into.buckets[b] += Load(buckets_[b]);
  into.sum_ns += Load(sum_ns_);
  into.store_calls += Load(store_calls_);
  into.store_errors += Load(store_errors_);
}

void RenderDecisionLatency(PrometheusWriter& w, const LatencyCounts& c, std::string_view frontend) {
  auto sample = [&](std::string_view name, std::string_view le, auto value) {
    if (!frontend.empty() && le.empty()) {
      w.Sample(name, {"frontend", frontend}, value);
    } else if (!frontend.empty()) {
      w.Sample(name, {"frontend", frontend, "le", le}, value);
    } else if (le.empty()) {
      w.Sample(name, {}, value);
    } else {
      w.Sample(name, {"le", le}, value);
    }
  };
  uint64_t cumulative = 0;
  for (size_t b = 0; b < c.buckets.size(); ++b) {
    cumulative += c.buckets[b];
    std::string le = "+Inf";
    if (b < kDecisionLatencyBoundsNs.size()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", double(kDecisionLatencyBoundsNs[b]) / 1e9);
      le = buf;
    }
    sample("tollgate_decision_duration_seconds_bucket", le, cumulative);
  }
  sample("tollgate_decision_duration_seconds_sum", "", double(c.sum_ns) / 1e9);
  sample("tollgate_decision_duration_seconds_count", "", cumulative);
}

}  // namespace tollgate
