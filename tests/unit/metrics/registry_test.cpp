// Registry and text format: HELP/TYPE per family, label escaping, histogram buckets, number
// formatting, and the names Prometheus would refuse.

#include "common/metrics/registry.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "common/metrics/text_format.hpp"
#include "ddp/error.hpp"

using namespace ddp::metrics;

TEST_CASE("every family is exposed with HELP and TYPE before its samples", "[metrics]") {
  Registry registry;
  registry.counter("jobs_total", "Jobs run.").inc(3);
  registry.gauge("workers", "Workers by state.", {{"state", "running"}}).set(2);
  registry.gauge("workers", "ignored: the family's help is the first one", {{"state", "failed"}});
  CHECK(registry.expose() ==
        "# HELP jobs_total Jobs run.\n"
        "# TYPE jobs_total counter\n"
        "jobs_total 3\n"
        "# HELP workers Workers by state.\n"
        "# TYPE workers gauge\n"
        "workers{state=\"running\"} 2\n"
        "workers{state=\"failed\"} 0\n");
}

TEST_CASE("the same name and labels return the same series", "[metrics]") {
  Registry registry;
  Counter& a = registry.counter("x_total", "X.", {{"k", "v"}});
  a.inc();
  registry.counter("y_total", "Y.");
  Counter& b = registry.counter("x_total", "X.", {{"k", "v"}});
  b.inc();
  CHECK(&a == &b);
  CHECK(a.value() == 2);
}

TEST_CASE("label values and help text are escaped", "[metrics]") {
  Registry registry;
  registry.gauge("g", "a \\ back\nslash", {{"path", "C:\\x \"q\"\nz"}}).set(1);
  const std::string text = registry.expose();
  CHECK(text.find("# HELP g a \\\\ back\\nslash\n") != std::string::npos);
  CHECK(text.find("g{path=\"C:\\\\x \\\"q\\\"\\nz\"} 1\n") != std::string::npos);
}

TEST_CASE("a histogram exposes cumulative buckets, +Inf, sum and count", "[metrics]") {
  Registry registry;
  Histogram& h = registry.histogram("wait_seconds", "Waits.", {0.5, 1, 5}, {{"op", "get"}});
  h.observe(0.5);  // bounds are inclusive
  h.observe(0.75);
  h.observe(7);
  CHECK(registry.expose() ==
        "# HELP wait_seconds Waits.\n"
        "# TYPE wait_seconds histogram\n"
        "wait_seconds_bucket{op=\"get\",le=\"0.5\"} 1\n"
        "wait_seconds_bucket{op=\"get\",le=\"1\"} 2\n"
        "wait_seconds_bucket{op=\"get\",le=\"5\"} 2\n"
        "wait_seconds_bucket{op=\"get\",le=\"+Inf\"} 3\n"
        "wait_seconds_sum{op=\"get\"} 8.25\n"
        "wait_seconds_count{op=\"get\"} 3\n");
}

TEST_CASE("callback series are read and collectors run at each exposition", "[metrics]") {
  Registry registry;
  double source = 1;
  registry.counter_fn("read_total", "Read.", {}, [&source] { return source; });
  Gauge& derived = registry.gauge("derived", "Derived.");
  registry.on_collect([&] { derived.set(source * 10); });
  CHECK(registry.expose().find("read_total 1\n") != std::string::npos);
  source = 4;
  const std::string text = registry.expose();
  CHECK(text.find("read_total 4\n") != std::string::npos);
  CHECK(text.find("derived 40\n") != std::string::npos);
}

TEST_CASE("values print as Prometheus parses them", "[metrics]") {
  CHECK(format_value(0) == "0");
  CHECK(format_value(12) == "12");
  CHECK(format_value(-3) == "-3");
  CHECK(format_value(0.25) == "0.25");
  CHECK(format_value(1e20) == "1e+20");
  CHECK(format_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(format_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(format_value(std::nan("")) == "NaN");
}

TEST_CASE("invalid names and a type clash are refused", "[metrics]") {
  Registry registry;
  CHECK_THROWS_AS(registry.counter("2bad", "x"), ddp::InternalError);
  CHECK_THROWS_AS(registry.counter("bad-name", "x"), ddp::InternalError);
  CHECK_THROWS_AS(registry.gauge("ok", "x", {{"__reserved", "v"}}), ddp::InternalError);
  CHECK_THROWS_AS(registry.histogram("h", "x", {1, 2}, {{"le", "1"}}), ddp::InternalError);
  CHECK_THROWS_AS(registry.histogram("h2", "x", {2, 1}), ddp::InternalError);
  registry.counter("c_total", "x");
  CHECK_THROWS_AS(registry.gauge("c_total", "x"), ddp::InternalError);
  CHECK(is_valid_metric_name("ns:sub_name_1"));
  CHECK_FALSE(is_valid_label_name("with:colon"));
}
