#pragma once
// --rdzv_conf "k1=v1,k2=v2": the parsed map and typed accessors for the keys torchrun knows,
// with torchrun's defaults. Values are validated when parsed, so accessors never throw.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ddp::agent {

class RdzvConf {
 public:
  RdzvConf() = default;

  // Parses the flag's text. Keys and values are stripped of whitespace. Throws ConfigError
  // naming `flag` for a key without "=value", an empty value, or a known key whose value has the
  // wrong type (timeouts: integers > 0 or >= 0 as torchrun; is_host: a boolean word; protocol:
  // http or https).
  static RdzvConf parse(std::string_view text, std::string_view flag);

  // Raw access; every key the user gave, known or not, plus "timeout" (injected 900 as torchrun)
  // and, for static, "rank" (set from --node_rank by parse_launch_config).
  const std::map<std::string, std::string>& values() const { return values_; }
  std::optional<std::string> get(const std::string& key) const;
  void set(const std::string& key, std::string value) { values_[key] = std::move(value); }

  std::chrono::seconds timeout() const;              // static store timeout, default 900
  std::chrono::seconds join_timeout() const;         // c10d whole round, default 600
  std::chrono::seconds last_call_timeout() const;    // after min nodes joined, default 30
  std::chrono::seconds close_timeout() const;        // default 30
  std::chrono::seconds heartbeat_timeout() const;    // one keep-alive update, default 5
  std::chrono::seconds keep_alive_interval() const;  // between heartbeats, default 5
  int keep_alive_max_attempt() const;                // missed beats before dead, default 3
  std::chrono::seconds read_timeout() const;         // store client timeout, default 60
  // ddprun's own key connection_grace_ms: a node whose store connection closed and was not
  // re-made within this is lost (c10d), default 300 ms.
  std::chrono::milliseconds connection_grace() const;
  // ddprun's own key reform_timeout: with --recovery=inprocess, how long a live worker has to
  // re-form in the next round before it is restarted, default 30 s.
  std::chrono::seconds reform_timeout() const;
  std::optional<bool> is_host() const;               // nullopt: decide by address heuristic
  std::chrono::seconds lease_ttl() const;            // etcd: node lost after, default 10
  // ddprun's own worker_store_allow: false for "any" (workers' stores admit every address),
  // true for "members" (the default, docs/security.md).
  bool worker_store_members_only() const { return get("worker_store_allow") != "any"; }
  // True when the user gave `key` (not a value parse() injected, such as timeout=900).
  bool is_given(const std::string& key) const { return values_.count(key) && key != injected_; }

  // Renders "k=v,k=v" sorted by key, for --dry_run.
  std::string to_string() const;

 private:
  std::map<std::string, std::string> values_;
  std::string injected_;  // the key parse() added with torchrun's default, if any
};

// torchrun's boolean words: 1,true,t,yes,y / 0,false,f,no,n (case-insensitive); nullopt otherwise.
std::optional<bool> parse_bool_word(std::string_view text);

}  // namespace ddp::agent
