// Registry: families in registration order, each with its series in creation order, so a
// scrape's output is stable (diffs and tests read it line by line). Series own their metric
// through unique_ptr: references handed out stay valid while more series are added.

#include "common/metrics/registry.hpp"

#include <cmath>
#include <limits>
#include <variant>

#include "common/check.hpp"
#include "common/metrics/text_format.hpp"

namespace ddp::metrics {
namespace {

const char* type_name(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// {a="x",b="y"} with `extra` (a histogram's le) last; "" when there are no labels at all.
std::string label_text(const Labels& labels, const std::pair<std::string, std::string>* extra) {
  if (labels.empty() && extra == nullptr) return "";
  std::string out = "{";
  auto add = [&out](const std::string& name, const std::string& value) {
    if (out.size() > 1) out.push_back(',');
    out += name;
    out += "=\"";
    out += escape_label_value(value);
    out.push_back('"');
  };
  for (const auto& [name, value] : labels) add(name, value);
  if (extra != nullptr) add(extra->first, extra->second);
  out.push_back('}');
  return out;
}

void append_sample(std::string& out, std::string_view name, const std::string& labels,
                   double value) {
  out += name;
  out += labels;
  out.push_back(' ');
  out += format_value(value);
  out.push_back('\n');
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    DDP_CHECK(std::isfinite(bounds_[i]), "histogram bound {} is not finite", bounds_[i]);
    DDP_CHECK(i == 0 || bounds_[i - 1] < bounds_[i], "histogram bounds must increase");
  }
}

void Histogram::observe(double value) {
  std::size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

struct Registry::Series {
  Labels labels;
  // monostate until the first counter()/gauge()/... call gives the series its metric.
  std::variant<std::monostate, std::unique_ptr<Counter>, std::unique_ptr<Gauge>,
               std::unique_ptr<Histogram>, std::function<double()>>
      metric;
};

struct Registry::Family {
  std::string name;
  std::string help;
  MetricType type;
  std::vector<std::unique_ptr<Series>> series;
};

Registry::Registry() = default;
Registry::~Registry() = default;

Registry::Family& Registry::family(std::string_view name, std::string_view help, MetricType type) {
  if (const auto it = by_name_.find(name); it != by_name_.end()) {
    DDP_CHECK(it->second->type == type, "metric {} is a {}, not a {}", name,
              type_name(it->second->type), type_name(type));
    return *it->second;
  }
  DDP_CHECK(is_valid_metric_name(name), "invalid metric name '{}'", name);
  auto& added = families_.emplace_back(
      std::make_unique<Family>(Family{std::string(name), std::string(help), type, {}}));
  by_name_.emplace(added->name, added.get());
  return *added;
}

Registry::Series& Registry::series(Family& family, Labels labels) {
  for (auto& s : family.series) {
    if (s->labels == labels) return *s;
  }
  for (const auto& [label, value] : labels) {
    DDP_CHECK(is_valid_label_name(label), "metric {}: invalid label name '{}'", family.name, label);
    DDP_CHECK(family.type != MetricType::kHistogram || label != "le",
              "metric {}: 'le' is reserved for histogram buckets", family.name);
  }
  return *family.series.emplace_back(std::make_unique<Series>(Series{std::move(labels), {}}));
}

Counter& Registry::counter(std::string_view name, std::string_view help, Labels labels) {
  Series& s = series(family(name, help, MetricType::kCounter), std::move(labels));
  if (!std::holds_alternative<std::unique_ptr<Counter>>(s.metric)) {
    s.metric = std::make_unique<Counter>();
  }
  return *std::get<std::unique_ptr<Counter>>(s.metric);
}

Gauge& Registry::gauge(std::string_view name, std::string_view help, Labels labels) {
  Series& s = series(family(name, help, MetricType::kGauge), std::move(labels));
  if (!std::holds_alternative<std::unique_ptr<Gauge>>(s.metric)) {
    s.metric = std::make_unique<Gauge>();
  }
  return *std::get<std::unique_ptr<Gauge>>(s.metric);
}

Histogram& Registry::histogram(std::string_view name, std::string_view help,
                               std::vector<double> upper_bounds, Labels labels) {
  Series& s = series(family(name, help, MetricType::kHistogram), std::move(labels));
  if (!std::holds_alternative<std::unique_ptr<Histogram>>(s.metric)) {
    s.metric = std::make_unique<Histogram>(std::move(upper_bounds));
  }
  return *std::get<std::unique_ptr<Histogram>>(s.metric);
}

void Registry::counter_fn(std::string_view name, std::string_view help, Labels labels,
                          std::function<double()> read) {
  series(family(name, help, MetricType::kCounter), std::move(labels)).metric = std::move(read);
}

void Registry::gauge_fn(std::string_view name, std::string_view help, Labels labels,
                        std::function<double()> read) {
  series(family(name, help, MetricType::kGauge), std::move(labels)).metric = std::move(read);
}

void Registry::on_collect(std::function<void()> collect) {
  collectors_.push_back(std::move(collect));
}

std::string Registry::expose() {
  for (const auto& collect : collectors_) collect();
  std::string out;
  for (const auto& family : families_) {
    out += "# HELP " + family->name + " " + escape_help(family->help) + "\n";
    out += "# TYPE " + family->name + " " + type_name(family->type) + "\n";
    for (const auto& s : family->series) {
      const std::string labels = label_text(s->labels, nullptr);
      if (const auto* c = std::get_if<std::unique_ptr<Counter>>(&s->metric)) {
        append_sample(out, family->name, labels, (*c)->value());
      } else if (const auto* g = std::get_if<std::unique_ptr<Gauge>>(&s->metric)) {
        append_sample(out, family->name, labels, (*g)->value());
      } else if (const auto* read = std::get_if<std::function<double()>>(&s->metric)) {
        append_sample(out, family->name, labels, (*read)());
      } else if (const auto* histogram = std::get_if<std::unique_ptr<Histogram>>(&s->metric)) {
        const Histogram& h = **histogram;
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i <= h.upper_bounds().size(); ++i) {
          cumulative += h.counts()[i];
          const double bound = i < h.upper_bounds().size()
                                   ? h.upper_bounds()[i]
                                   : std::numeric_limits<double>::infinity();
          const std::pair<std::string, std::string> le{"le", format_value(bound)};
          append_sample(out, family->name + "_bucket", label_text(s->labels, &le),
                        static_cast<double>(cumulative));
        }
        append_sample(out, family->name + "_sum", labels, h.sum());
        append_sample(out, family->name + "_count", labels, static_cast<double>(h.count()));
      }
    }
  }
  return out;
}

}  // namespace ddp::metrics
