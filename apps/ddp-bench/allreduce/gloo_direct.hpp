#pragma once
// The baseline of ddp-bench-allreduce: float32 sum all_reduce calling Gloo directly (no worker
// thread, no arrival marks, no Work), on a context connected through the job's store, with the
// same algorithm libddp would use.

#include <cstddef>
#include <memory>
#include <string>

namespace ddp::bench {

class GlooDirect {
 public:
  // Connects rank `rank` of `size` through the store at host:port (key prefix "bench/gloo_direct")
  // on the address `hostname`; `algorithm` is "ring" or "bcube".
  GlooDirect(const std::string& host, int port, int rank, int size, const std::string& hostname,
             const std::string& algorithm);
  ~GlooDirect();

  void all_reduce_sum(float* data, std::size_t count);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::bench
