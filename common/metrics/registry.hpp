#pragma once
// Registry: the counters, gauges and histograms one process exports, and their Prometheus text
// exposition (format 0.0.4). Used from one thread (the agent's or the store's io_context);
// values that live elsewhere (another thread's atomics) are read through callbacks at scrape time.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddp::metrics {

// Label name/value pairs, in the order they are written.
using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

// Only goes up (a restart of the process resets it, which Prometheus' rate() understands).
class Counter {
 public:
  void inc(double by = 1) { value_ += by; }
  double value() const { return value_; }

 private:
  double value_ = 0;
};

class Gauge {
 public:
  void set(double value) { value_ = value; }
  void inc(double by = 1) { value_ += by; }
  void dec(double by = 1) { value_ -= by; }
  double value() const { return value_; }

 private:
  double value_ = 0;
};

// Observations counted in cumulative buckets (upper bounds inclusive, "+Inf" implied).
class Histogram {
 public:
  // REQUIRES: `upper_bounds` strictly increasing and finite.
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);

  const std::vector<double>& upper_bounds() const { return bounds_; }
  // counts()[i]: observations <= upper_bounds()[i], not cumulative; the last entry is +Inf's.
  const std::vector<std::uint64_t>& counts() const { return counts_; }
  double sum() const { return sum_; }
  std::uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Each returns the series with these labels in family `name`, creating the family (with its
  // HELP text and TYPE) and the series on first use; references stay valid for the registry's
  // life. Throws InternalError for an invalid metric or label name, or a name already used with
  // another type.
  Counter& counter(std::string_view name, std::string_view help, Labels labels = {});
  Gauge& gauge(std::string_view name, std::string_view help, Labels labels = {});
  Histogram& histogram(std::string_view name, std::string_view help,
                       std::vector<double> upper_bounds, Labels labels = {});

  // A series whose value `read` returns at each exposition (a source owned elsewhere).
  void counter_fn(std::string_view name, std::string_view help, Labels labels,
                  std::function<double()> read);
  void gauge_fn(std::string_view name, std::string_view help, Labels labels,
                std::function<double()> read);

  // Called at the start of every expose(), in registration order: refreshes values from their
  // sources (e.g. a worker count derived from several events).
  void on_collect(std::function<void()> collect);

  // Every family in registration order, each with "# HELP" and "# TYPE", in the text format.
  std::string expose();

 private:
  struct Series;
  struct Family;
  Family& family(std::string_view name, std::string_view help, MetricType type);
  Series& series(Family& family, Labels labels);

  std::vector<std::unique_ptr<Family>> families_;
  std::map<std::string, Family*, std::less<>> by_name_;
  std::vector<std::function<void()>> collectors_;
};

// The Content-Type of expose()'s text.
inline constexpr std::string_view kTextFormatContentType =
    "text/plain; version=0.0.4; charset=utf-8";

}  // namespace ddp::metrics
