// completion_script: each shell gets the option list in its own syntax. Options end at the
// training script (everything after it belongs to the worker), so bash and zsh stop offering
// ddprun's options once a word that is neither an option nor an option's value has been typed.

#include "agent/cli/completion.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <vector>

#include "agent/cli/cli_args.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

// The options whose values are a fixed list, by dest.
const std::map<std::string, std::string>& value_choices() {
  static const std::map<std::string, std::string> choices = {
      {"rdzv_backend", "static c10d etcd etcd-v2 etcd-v3"},
      {"start_method", "spawn fork forkserver"},
      {"log_level", "trace debug info warn error critical off"},
      {"numa_binding", "node socket exclusive core-complex"},
      {"print_completion", "bash zsh tcsh"},
      {"local_rank_arg", "underscore dash"},
  };
  return choices;
}

std::string join(const std::vector<std::string>& words, std::string_view separator) {
  return fmt::format("{}", fmt::join(words, separator));
}

std::string bash_script(const std::string& program, const std::vector<OptionSpelling>& options) {
  std::vector<std::string> all;
  std::vector<std::string> valued;
  std::string cases;
  for (const auto& option : options) {
    all.insert(all.end(), option.names.begin(), option.names.end());
    if (!option.takes_value) continue;
    valued.insert(valued.end(), option.names.begin(), option.names.end());
    const auto choice = value_choices().find(option.dest);
    if (choice != value_choices().end()) {
      cases += fmt::format("    {}) COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")); return ;;\n",
                           join(option.names, "|"), choice->second);
    }
  }
  const char* function = program == "ddprun" ? "_ddprun" : "_ddprun_launch";
  return fmt::format(R"sh(# bash completion for {0}: eval "$({0} --print_completion bash)"
{1}() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" i word
  local valued=" {2} "
  # Options end at the training script: after it, complete file names only.
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${{COMP_WORDS[i]}}"
    if [[ "$word" == -* ]]; then
      [[ "$word" != *=* && "$valued" == *" $word "* ]] && ((i++))
    else
      COMPREPLY=($(compgen -f -- "$cur"))
      return
    fi
  done
  case "$prev" in
{3}  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "{4}" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}}
complete -o default -F {1} {0}
)sh",
                     program, function, join(valued, " "), cases, join(all, " "));
}

// zsh's _arguments specs quote help text in [...] and separate fields with ':'.
std::string zsh_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '[' || c == ']' || c == ':' || c == '\\') out.push_back('\\');
    if (c == '\'') {
      out += "'\\''";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string zsh_script(const std::string& program, const std::vector<OptionSpelling>& options) {
  std::string specs;
  for (const auto& option : options) {
    const auto choice = value_choices().find(option.dest);
    std::string action;
    if (option.takes_value) {
      action = choice != value_choices().end()
                   ? fmt::format(":{}:({})", option.dest, choice->second)
                   : fmt::format(":{}:", option.dest);
    }
    for (const auto& name : option.names) {
      const bool is_long = name.starts_with("--");
      specs += fmt::format("  '{}{}[{}]{}' \\\n", name, option.takes_value && is_long ? "=" : "",
                           zsh_escape(option.help), action);
    }
  }
  return fmt::format(R"sh(#compdef {0}
# zsh completion for {0}: eval "$({0} --print_completion zsh)"
_{1}() {{
  _arguments -S \
{2}  '1:training script:_files' \
  '*::script arguments:_normal'
}}
compdef _{1} {0}
)sh",
                     program, program == "ddprun" ? "ddprun" : "ddprun_launch", specs);
}

std::string tcsh_script(const std::string& program, const std::vector<OptionSpelling>& options) {
  std::vector<std::string> long_names;
  std::vector<std::string> short_names;
  std::string choices;
  for (const auto& option : options) {
    for (const auto& name : option.names) {
      if (name.starts_with("--")) {
        long_names.push_back(name.substr(2));
      } else {
        short_names.push_back(name.substr(1));
      }
    }
    const auto choice = value_choices().find(option.dest);
    if (choice == value_choices().end()) continue;
    for (const auto& name : option.names) {
      if (name.starts_with("--")) choices += fmt::format(" 'n/{}/({})/'", name, choice->second);
    }
  }
  return fmt::format(
      "# tcsh completion for {0}: eval \"`{0} --print_completion tcsh`\"\n"
      "complete {0} 'c/--/({1})/' 'c/-/({2})/'{3} 'p/*/f/'\n",
      program, join(long_names, " "), join(short_names, " "), choices);
}

}  // namespace

std::string completion_script(std::string_view shell, bool legacy_launch) {
  const std::string program = legacy_launch ? "ddprun-launch" : "ddprun";
  const auto options = option_spellings(legacy_launch);
  if (shell == "bash") return bash_script(program, options);
  if (shell == "zsh") return zsh_script(program, options);
  if (shell == "tcsh") return tcsh_script(program, options);
  throw ConfigError(
      fmt::format("--print_completion: invalid choice '{}' (choose from bash, zsh, tcsh)", shell));
}

}  // namespace ddp::agent
