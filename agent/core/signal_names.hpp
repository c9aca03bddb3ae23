#pragma once
// Signal names and numbers: parsing --signals_to_handle and naming signals in reports.

#include <string>
#include <string_view>
#include <vector>

namespace ddp::agent {

// Parses "SIGTERM,SIGINT", "TERM,2" (names with or without SIG, case-insensitive, or numbers).
// Throws ConfigError naming `origin` for an unknown signal or one that cannot be caught
// (SIGKILL, SIGSTOP).
std::vector<int> parse_signal_list(std::string_view text, std::string_view origin);

// "SIGTERM" for 15; "SIG<n>" for a number without a name.
std::string signal_name(int signal_number);

}  // namespace ddp::agent
