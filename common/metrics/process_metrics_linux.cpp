// process_* metrics from /proc/self/stat (CPU ticks, start time in ticks since boot, sizes) and
// /proc/self/fd. One read of stat per scrape serves every series: a collector parses it and the
// gauges are set from the result.

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/metrics/process_metrics.hpp"
#include "common/parse_number.hpp"

namespace ddp::metrics {
namespace {

struct ProcStat {
  double cpu_seconds = 0;
  double start_seconds_since_boot = 0;
  double virtual_bytes = 0;
  double resident_bytes = 0;
};

// Fields after the command name (which may hold spaces), as numbered by proc(5).
ProcStat read_proc_stat() {
  ProcStat stat;
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return stat;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  for (int number = 3; fields >> field; ++number) {
    if (number == 14 || number == 15)
      stat.cpu_seconds += parse_number<double>(field).value_or(0) / ticks;  // utime, stime
    if (number == 22)
      stat.start_seconds_since_boot = parse_number<double>(field).value_or(0) / ticks;
    if (number == 23) stat.virtual_bytes = parse_number<double>(field).value_or(0);
    if (number == 24) stat.resident_bytes = parse_number<double>(field).value_or(0) * page;
  }
  return stat;
}

double boot_time_seconds() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value) return value;
    in.ignore(1 << 16, '\n');
  }
  return 0;
}

double open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  double count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count - 1;  // the descriptor opendir itself holds
}

}  // namespace

void export_process_metrics(Registry& registry) {
  Counter& cpu =
      registry.counter("process_cpu_seconds_total", "User and system CPU time spent in seconds.");
  Gauge& resident =
      registry.gauge("process_resident_memory_bytes", "Resident memory size in bytes.");
  Gauge& virtual_size =
      registry.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.");
  Gauge& start = registry.gauge("process_start_time_seconds",
                                "Start time of the process since unix epoch in seconds.");
  Gauge& fds = registry.gauge("process_open_fds", "Number of open file descriptors.");
  start.set(boot_time_seconds() + read_proc_stat().start_seconds_since_boot);
  registry.on_collect([&cpu, &resident, &virtual_size, &fds] {
    const ProcStat stat = read_proc_stat();
    cpu.inc(stat.cpu_seconds - cpu.value());  // a counter: set by the difference
    resident.set(stat.resident_bytes);
    virtual_size.set(stat.virtual_bytes);
    fds.set(open_fds());
  });
}

}  // namespace ddp::metrics
