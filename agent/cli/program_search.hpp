#pragma once
// Whether an entry point names an executable program: the user's path as given, or a bare name
// looked up in PATH the way execvp would.

#include <map>
#include <string>

namespace ddp::agent {

// True for a regular file with an execute bit that access(X_OK) allows. An entry with a '/', or
// one that exists in the working directory, is checked as given; any other is searched in each
// non-empty directory of env["PATH"] (false when PATH is unset).
bool is_executable_program(const std::string& entry,
                           const std::map<std::string, std::string>& env);

}  // namespace ddp::agent
