#pragma once
// Shell completion scripts for --print_completion (torchrun 2.x's --print-completion, which
// argparse's shtab adds): bash, zsh and tcsh, generated from the same option table as --help, so
// a new option completes without touching this file.

#include <string>
#include <string_view>

namespace ddp::agent {

// The script for `shell` ("bash", "zsh" or "tcsh") completing the program ddprun (or
// ddprun-launch when `legacy_launch`): option names with both spellings, the fixed choices of
// --rdzv_backend, --start_method, --log_level, --numa_binding and --print_completion, and file
// names for the script; after the script, nothing of ours is offered. Throws ConfigError naming
// --print_completion for another shell.
std::string completion_script(std::string_view shell, bool legacy_launch);

}  // namespace ddp::agent
