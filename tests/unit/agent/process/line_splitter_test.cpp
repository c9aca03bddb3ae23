// LineSplitter and LineTail: the pure parts of output routing.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "agent/process/line_splitter.hpp"

namespace ddp::agent {
namespace {

std::vector<std::string> feed_all(LineSplitter& s, const std::vector<std::string>& chunks) {
  std::vector<std::string> lines;
  for (const auto& c : chunks) s.feed(c, [&](std::string_view l) { lines.emplace_back(l); });
  return lines;
}

TEST_CASE("lines split across chunks come out whole", "[line_splitter]") {
  LineSplitter s;
  CHECK(feed_all(s, {"ab", "c\nde", "f\n\ng"}) == std::vector<std::string>{"abc", "def", ""});
  CHECK(s.has_partial());
  std::vector<std::string> rest;
  s.flush([&](std::string_view l) { rest.emplace_back(l); });
  CHECK(rest == std::vector<std::string>{"g"});
  CHECK_FALSE(s.has_partial());
}

TEST_CASE("a partial line that reaches the limit is handed out in pieces", "[line_splitter]") {
  LineSplitter s(4);
  CHECK(feed_all(s, {"abcdefghij"}) == std::vector<std::string>{"abcd", "efgh"});
  CHECK(feed_all(s, {"k\n"}) == std::vector<std::string>{"ijk"});
  CHECK(feed_all(s, {"ab", "cd", "e\n"}) == std::vector<std::string>{"abcd", "e"});
  // A complete line inside one chunk is never held, so it is not cut.
  CHECK(feed_all(s, {"abcdefgh\n"}) == std::vector<std::string>{"abcdefgh"});
}

TEST_CASE("the tail keeps the last lines, oldest first, each cut to its limit", "[line_tail]") {
  LineTail tail(3, 5);
  CHECK(tail.lines().empty());
  tail.push("one");
  tail.push("two");
  CHECK(tail.lines() == std::vector<std::string>{"one", "two"});
  tail.push("three");
  tail.push("four-is-long");
  CHECK(tail.lines() == std::vector<std::string>{"two", "three", "four-"});
}

}  // namespace
}  // namespace ddp::agent
