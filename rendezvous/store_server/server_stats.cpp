// ServerStats: the process-wide instance and the live-table list. A function-local static, so
// servers created during static initialisation (none today) would still find it constructed.

#include "rendezvous/store_server/server_stats.hpp"

#include <algorithm>

#include "rendezvous/store/key_table.hpp"

namespace ddp::rdzv {

const char* command_label(wire::Command command) {
  using C = wire::Command;
  switch (command) {
    case C::kValidate:
      return "validate";
    case C::kSet:
      return "set";
    case C::kCompareSet:
      return "compare_set";
    case C::kGet:
      return "get";
    case C::kAdd:
      return "add";
    case C::kCheck:
      return "check";
    case C::kWait:
      return "wait";
    case C::kGetNumKeys:
      return "get_num_keys";
    case C::kWatchKey:
      return "watch_key";
    case C::kDeleteKey:
      return "delete_key";
    case C::kAppend:
      return "append";
    case C::kMultiGet:
      return "multi_get";
    case C::kMultiSet:
      return "multi_set";
    case C::kCancelWait:
      return "cancel_wait";
    case C::kPing:
      return "ping";
    case C::kQueuePush:
      return "queue_push";
    case C::kQueuePop:
      return "queue_pop";
    case C::kQueueLen:
      return "queue_len";
    case C::kListKeys:
      return "list_keys";
    case C::kBarrier:
      return "barrier";
  }
  return "unknown";
}

ServerStats& server_stats() {
  static ServerStats stats;
  return stats;
}

std::size_t ServerStats::sum_over_tables(std::size_t (KeyTable::*count)() const) const {
  const std::lock_guard lock(tables_mutex_);
  std::size_t total = 0;
  for (const KeyTable* table : tables_) total += (table->*count)();
  return total;
}

std::size_t ServerStats::key_count() const { return sum_over_tables(&KeyTable::size); }
std::size_t ServerStats::waiter_count() const { return sum_over_tables(&KeyTable::waiter_count); }
std::size_t ServerStats::queued_value_count() const {
  return sum_over_tables(&KeyTable::queued_value_count);
}

ServerStats::TableRegistration::TableRegistration(const KeyTable& table) : table_(&table) {
  ServerStats& stats = server_stats();
  const std::lock_guard lock(stats.tables_mutex_);
  stats.tables_.push_back(table_);
}

ServerStats::TableRegistration::~TableRegistration() {
  ServerStats& stats = server_stats();
  const std::lock_guard lock(stats.tables_mutex_);
  std::erase(stats.tables_, table_);
}

}  // namespace ddp::rdzv
