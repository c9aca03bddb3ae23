#pragma once
// OutputRouter: one worker stream (stdout or stderr) from its pipe to where it belongs: the
// agent's console line by line (whole lines per write, so workers never interleave mid-line), a
// log file (raw bytes, --redirects/--tee), and a tail of its last lines (stderr, for reports).
// Reads on the io_context's thread; owned by the WorkerGroup through a shared_ptr.

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/process/filtered_log.hpp"
#include "agent/process/line_splitter.hpp"
#include "common/unique_fd.hpp"

namespace ddp::agent {

struct OutputRoute {
  int console_fd = -1;         // the agent's stdout or stderr; -1 keeps the stream off the console
  std::string console_prefix;  // put before every console line ("[default0]:", "[host:3]: ")
  std::string labelled;        // lines that start with this keep no console_prefix ("[host:")
  std::string file_path;       // raw copy of the stream; "" for none
  bool keep_tail = false;      // keep the last 20 lines (stderr)
  // --duplicate_*_filters: matching console lines also go here, after `tee_prefix` (torchrun's
  // log line prefix, without --label's). Null: none.
  std::shared_ptr<FilteredLog> filtered;
  std::string tee_prefix;
};

// The tee prefix of one worker's console lines: torchrun's default "[<role><local_rank>]:" when
// `templ` is empty, else Python's Template(templ).safe_substitute(role_name=, rank=,
// local_rank=, hostname=, pid=) ("$name", "${name}", "$$"; unknown names are left as they are).
// `hostname` is the node's name, `pid` the worker's process id.
std::string tee_line_prefix(std::string_view templ, std::string_view role_name, int rank,
                            int local_rank, std::string_view hostname = "", long pid = 0);

class OutputRouter : public std::enable_shared_from_this<OutputRouter> {
 public:
  // Creates the pipe and opens the file (truncating it). `buffer` is scratch space shared by
  // every router of a group (one thread) and must outlive this router. Throws IoError naming
  // the file or the pipe.
  OutputRouter(boost::asio::io_context& io, OutputRoute route, std::span<char> buffer);
  ~OutputRouter();
  OutputRouter(const OutputRouter&) = delete;
  OutputRouter& operator=(const OutputRouter&) = delete;

  // The pipe's write end, for the child's fd 1 or 2; close it in the agent once the child is
  // forked (close_child_end), or EOF never comes.
  int child_end() const { return child_end_.get(); }
  void close_child_end();

  // Replaces the route's console_prefix and tee_prefix (once the worker's pid is known, for
  // ${pid}). Call before start().
  void set_prefixes(std::string console_prefix, std::string tee_prefix);

  // Starts reading on the loop; at EOF the partial last line is flushed and the pipe closed.
  void start();

  // Reads what is in the pipe right now without waiting (a worker that exited has nothing left
  // in flight), then flushes a partial last line. Reading on the loop continues afterwards:
  // grandchildren may still write.
  void drain_and_flush();

  bool at_eof() const { return eof_; }

  // Console bytes dropped because the console (non-blocking, someone else's) stayed full for
  // 100 ms: the rest of a batch of lines that did not fit. The log file and tail keep them.
  std::size_t console_dropped_bytes() const { return console_dropped_bytes_; }
  std::vector<std::string> tail_lines() const;

 private:
  void arm();
  void read_available();
  void route_lines(std::string_view chunk);
  void take_line(std::string_view line);
  void write_console();
  void finish();

  OutputRoute route_;
  std::span<char> buffer_;
  UniqueFd child_end_;  // before pipe_: pipe_'s initializer sets it
  boost::asio::posix::stream_descriptor pipe_;
  UniqueFd file_fd_;
  bool eof_ = false;
  LineSplitter splitter_;
  std::optional<LineTail> tail_;
  std::string console_batch_;  // prefixed whole lines of one read, written with one write()
  std::size_t console_dropped_bytes_ = 0;
};

}  // namespace ddp::agent
