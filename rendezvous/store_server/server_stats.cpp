// ServerStats: the process-wide instance and the live-table list. A function-local static, so
// servers created during static initialisation (none today) would still find it constructed.

#include "rendezvous/store_server/server_stats.hpp"

#include <algorithm>
#include <iterator>

#include "rendezvous/store/key_table.hpp"

namespace ddp::rdzv {

const char* command_label(wire::Command command) {
  // In wire::Command's order.
  static constexpr const char* kLabels[] = {
      "validate",   "set",       "compare_set",  "get",         "add",
      "check",      "wait",      "get_num_keys", "watch_key",   "delete_key",
      "append",     "multi_get", "multi_set",    "cancel_wait", "ping",
      "queue_push", "queue_pop", "queue_len",    "list_keys",   "barrier"};
  static_assert(std::size(kLabels) == kCommandCount);
  return kLabels[static_cast<std::size_t>(command)];
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
