// The holder reads the roll call key after deleting its bell, so a bell rung for a newer
// generation while it answered an older one is never lost: that generation was claimed before
// its bell was set, and so before the delete and the read.

#include "rendezvous/store/store_roll_call.hpp"

#include <charconv>

namespace ddp::rdzv {

Bytes roll_call_value(std::int64_t generation, const std::string& caller) {
  return to_bytes(std::to_string(generation) + " " + caller);
}

std::int64_t roll_call_generation(const Bytes& value) {
  const std::string text = to_string(value);
  std::int64_t generation = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), generation);
  if (ec != std::errc() || end == text.data() || generation < 0) return 0;
  return generation;
}

std::string roll_call_answers_key(const std::string& call_key, std::int64_t generation) {
  return call_key + "/" + std::to_string(generation);
}

asio::awaitable<std::string> answer_roll_call(Store& store, const Bytes& bell,
                                              const std::string& answered) {
  const std::string call_key = to_string(bell);
  const Bytes value = co_await store.get(call_key);  // set before any bell was rung
  const std::string answers = roll_call_answers_key(call_key, roll_call_generation(value));
  if (answers != answered) co_await store.add(answers, 1);
  co_return answers;
}

}  // namespace ddp::rdzv
