// OomWatch: locating the memory cgroup's oom_kill counter from /proc/self/cgroup and
// /proc/self/mountinfo. Hybrid hosts (like the CI VM: cgroup2 without the memory controller,
// memory on v1) are common, so v2 is tried first and v1 next; /proc/vmstat counts every OOM
// kill on the host, a coarse but honest last resort.

#include "agent/process/oom_watch.hpp"
#include "common/parse_number.hpp"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace ddp::agent {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

struct Mount {
  std::string point;
  std::string root;
};

// The cgroup2 mount, or the v1 mount whose super options name `controller`.
std::optional<Mount> find_cgroup_mount(const std::string& mountinfo, bool v2,
                                       std::string_view controller) {
  std::istringstream lines(mountinfo);
  std::string line;
  while (std::getline(lines, line)) {
    // "id parent maj:min root point opts [optional...] - fstype source superopts"
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash));
    std::istringstream tail(line.substr(dash + 3));
    std::string id, parent, dev, root, point, fstype, source, superopts;
    head >> id >> parent >> dev >> root >> point;
    tail >> fstype >> source >> superopts;
    if (v2 && fstype == "cgroup2") return Mount{point, root};
    if (!v2 && fstype == "cgroup") {
      std::istringstream opts(superopts);
      std::string opt;
      while (std::getline(opts, opt, ',')) {
        if (opt == controller) return Mount{point, root};
      }
    }
  }
  return std::nullopt;
}

// The path of this process's cgroup in the v2 hierarchy (v2) or the v1 `controller` hierarchy.
std::optional<std::string> find_cgroup_path(const std::string& cgroups, bool v2,
                                            std::string_view controller) {
  std::istringstream lines(cgroups);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t a = line.find(':');
    const size_t b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string_view controllers = std::string_view(line).substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (v2 && line.compare(0, a, "0") == 0 && controllers.empty()) return path;
    if (!v2) {
      size_t pos = 0;
      while (pos <= controllers.size()) {
        const size_t comma = controllers.find(',', pos);
        if (controllers.substr(pos, comma - pos) == controller) return path;
        if (comma == std::string_view::npos) break;
        pos = comma + 1;
      }
    }
  }
  return std::nullopt;
}

// <mount point>/<cgroup path relative to the mount's root>/<file>, when it exists.
std::string cgroup_file(const Mount& mount, std::string path, const std::string& file) {
  if (mount.root != "/" && path.starts_with(mount.root)) path.erase(0, mount.root.size());
  if (path == "/") path.clear();
  for (const std::string& candidate :
       {mount.point + path + "/" + file, mount.point + "/" + file}) {
    if (file_exists(candidate) && parse_oom_kill_count(read_file(candidate))) return candidate;
  }
  return {};
}

}  // namespace

std::optional<uint64_t> parse_oom_kill_count(const std::string& text) {
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    if (line.starts_with("oom_kill ")) {
      if (const auto value = parse_leading_number<uint64_t>(line.substr(9))) return value;
    }
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  return std::nullopt;
}

OomWatch::OomWatch(const std::string& proc_root) {
  const std::string mountinfo = read_file(proc_root + "/self/mountinfo");
  const std::string cgroups = read_file(proc_root + "/self/cgroup");
  if (auto mount = find_cgroup_mount(mountinfo, true, ""); mount) {
    if (auto path = find_cgroup_path(cgroups, true, ""); path) {
      path_ = cgroup_file(*mount, *path, "memory.events");
    }
  }
  if (path_.empty()) {
    if (auto mount = find_cgroup_mount(mountinfo, false, "memory"); mount) {
      if (auto path = find_cgroup_path(cgroups, false, "memory"); path) {
        path_ = cgroup_file(*mount, *path, "memory.oom_control");
      }
    }
  }
  if (path_.empty() && parse_oom_kill_count(read_file(proc_root + "/vmstat"))) {
    path_ = proc_root + "/vmstat";
  }
}

std::optional<uint64_t> OomWatch::read() const {
  if (path_.empty()) return std::nullopt;
  return parse_oom_kill_count(read_file(path_));
}

void OomWatch::mark() { baseline_ = read(); }

bool OomWatch::rose_since_mark() const {
  // The baseline stays put: two workers killed by one OOM event must both be marked.
  const auto now = read();
  return now && baseline_ && *now > *baseline_;
}

}  // namespace ddp::agent
