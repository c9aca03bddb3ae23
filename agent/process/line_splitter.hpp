#pragma once
// LineSplitter cuts a byte stream into lines for the console, and LineTail keeps the last N lines
// of a stream (a worker's stderr, for the failure report). Pure; no I/O.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ddp::agent {

// Feeds chunks of a stream; hands out every complete line (without its '\n'). A partial line is
// held until its newline, flush(), or until it reaches `max_line` bytes (then it is handed out
// as a line of its own, so a progress bar without newlines cannot grow memory without bound).
class LineSplitter {
 public:
  static constexpr size_t kDefaultMaxLine = 64 * 1024;
  explicit LineSplitter(size_t max_line = kDefaultMaxLine) : max_line_(max_line) {}

  // Calls on_line(std::string_view) for each complete line in `data`, in order.
  template <typename OnLine>
  void feed(std::string_view data, OnLine&& on_line) {
    while (!data.empty()) {
      const size_t nl = data.find('\n');
      if (nl == std::string_view::npos) {
        hold(data, on_line);
        return;
      }
      if (pending_.empty()) {
        on_line(data.substr(0, nl));  // the common case: no copy
      } else {
        pending_.append(data.substr(0, nl));
        on_line(std::string_view(pending_));
        pending_.clear();
      }
      data.remove_prefix(nl + 1);
    }
  }

  // Hands out the held partial line, if any.
  template <typename OnLine>
  void flush(OnLine&& on_line) {
    if (pending_.empty()) return;
    on_line(std::string_view(pending_));
    pending_.clear();
  }

  bool has_partial() const { return !pending_.empty(); }

 private:
  template <typename OnLine>
  void hold(std::string_view data, OnLine& on_line) {
    while (pending_.size() + data.size() >= max_line_) {
      const size_t take = max_line_ - pending_.size();
      pending_.append(data.substr(0, take));
      on_line(std::string_view(pending_));
      pending_.clear();
      data.remove_prefix(take);
    }
    pending_.append(data);
  }

  size_t max_line_;
  std::string pending_;
};

// The last `capacity` lines pushed, each cut to `max_line_bytes`. A ring of reused strings.
class LineTail {
 public:
  explicit LineTail(size_t capacity = 20, size_t max_line_bytes = 4096)
      : ring_(capacity), max_line_bytes_(max_line_bytes) {}

  void push(std::string_view line);
  // The kept lines, oldest first.
  std::vector<std::string> lines() const;

 private:
  std::vector<std::string> ring_;
  size_t max_line_bytes_;
  size_t next_ = 0;   // slot the next line goes to
  size_t count_ = 0;  // lines kept (<= capacity)
};

}  // namespace ddp::agent
