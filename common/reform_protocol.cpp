// The hand-over channel's lines. A place's JSON is parsed without exceptions: a malformed line
// from a peer is a value, not a failure of the reader.

#include "common/reform_protocol.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>

namespace ddp::reform {

std::string encode_hello(int local_rank, long pid) {
  return fmt::format("hello {} {}\n", local_rank, pid);
}

std::string encode_reformed(int round) { return fmt::format("reformed {}\n", round); }

std::string encode_place(const Place& place) {
  nlohmann::json doc;
  doc["round"] = place.round;
  doc["env"] = place.env;
  return "place " + doc.dump() + "\n";
}

WorkerLine parse_worker_line(std::string_view line) {
  std::istringstream in{std::string(line)};
  std::string verb;
  in >> verb;
  WorkerLine parsed;
  if (verb == "hello") {
    parsed.kind = (in >> parsed.local_rank >> parsed.pid) && parsed.local_rank >= 0
                      ? WorkerLine::Kind::kHello
                      : WorkerLine::Kind::kBad;
  } else if (verb == "reformed") {
    parsed.kind = (in >> parsed.round) ? WorkerLine::Kind::kReformed : WorkerLine::Kind::kBad;
  }
  return parsed;
}

std::optional<Place> parse_place_line(std::string_view line) {
  constexpr std::string_view kVerb = "place ";
  if (line.substr(0, kVerb.size()) != kVerb) return std::nullopt;
  const auto doc = nlohmann::json::parse(line.substr(kVerb.size()), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
  const auto round = doc.find("round");
  const auto env = doc.find("env");
  if (round == doc.end() || !round->is_number_integer() || env == doc.end() || !env->is_object()) {
    return std::nullopt;
  }
  Place place;
  place.round = round->get<int>();
  for (const auto& [key, value] : env->items()) {
    if (!value.is_string()) return std::nullopt;
    place.env[key] = value.get<std::string>();
  }
  return place;
}

}  // namespace ddp::reform
