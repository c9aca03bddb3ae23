// The signal table is explicit rather than strsignal()/sigabbrev_np(): those give descriptions
// or need glibc 2.32 extensions, and reports must print the exact "SIGKILL" spelling.

#include "agent/core/signal_names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <csignal>

#include "agent/core/text.hpp"
#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

struct SignalEntry {
  const char* name;
  int number;
};

constexpr SignalEntry kSignals[] = {
    {"SIGHUP", SIGHUP},       {"SIGINT", SIGINT},   {"SIGQUIT", SIGQUIT},   {"SIGILL", SIGILL},
    {"SIGTRAP", SIGTRAP},     {"SIGABRT", SIGABRT}, {"SIGBUS", SIGBUS},     {"SIGFPE", SIGFPE},
    {"SIGKILL", SIGKILL},     {"SIGUSR1", SIGUSR1}, {"SIGSEGV", SIGSEGV},   {"SIGUSR2", SIGUSR2},
    {"SIGPIPE", SIGPIPE},     {"SIGALRM", SIGALRM}, {"SIGTERM", SIGTERM},   {"SIGCHLD", SIGCHLD},
    {"SIGCONT", SIGCONT},     {"SIGSTOP", SIGSTOP}, {"SIGTSTP", SIGTSTP},   {"SIGTTIN", SIGTTIN},
    {"SIGTTOU", SIGTTOU},     {"SIGURG", SIGURG},   {"SIGXCPU", SIGXCPU},   {"SIGXFSZ", SIGXFSZ},
    {"SIGVTALRM", SIGVTALRM}, {"SIGPROF", SIGPROF}, {"SIGWINCH", SIGWINCH}, {"SIGIO", SIGIO},
    {"SIGPWR", SIGPWR},       {"SIGSYS", SIGSYS},
};

std::string strip_upper(std::string_view text) {
  std::string upper(detail::strip(text));
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return upper;
}

int lookup(const std::string& word, std::string_view origin) {
  if (const auto number = parse_number<int>(word)) {
    for (const SignalEntry& entry : kSignals) {
      if (entry.number == *number) return *number;
    }
  }
  const std::string name = word.starts_with("SIG") ? word : "SIG" + word;
  for (const SignalEntry& entry : kSignals) {
    if (name == entry.name) return entry.number;
  }
  throw ConfigError(fmt::format("{}: unknown signal '{}'", origin, word));
}

}  // namespace

std::vector<int> parse_signal_list(std::string_view text, std::string_view origin) {
  std::vector<int> numbers;
  for (std::string_view item : detail::split_commas(text)) {
    const std::string word = strip_upper(item);
    if (word.empty()) continue;
    const int number = lookup(word, origin);
    if (number == SIGKILL || number == SIGSTOP) {
      throw ConfigError(fmt::format("{}: {} cannot be caught", origin, signal_name(number)));
    }
    if (std::find(numbers.begin(), numbers.end(), number) == numbers.end()) {
      numbers.push_back(number);
    }
  }
  if (numbers.empty()) {
    throw ConfigError(fmt::format("{}: expected a comma list of signals, got '{}'", origin, text));
  }
  return numbers;
}

std::string signal_name(int signal_number) {
  for (const SignalEntry& entry : kSignals) {
    if (entry.number == signal_number) return entry.name;
  }
  return fmt::format("SIG{}", signal_number);
}

}  // namespace ddp::agent
