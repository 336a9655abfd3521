// fatpack: the packager CLI. Each subcommand lives in its own cmd_*.cpp; this file wires them up
// and owns the exit-code policy (0 ok, 1 failure, 2 usage).
#include "cleanup.hpp"
#include "response_file.hpp"
#include "tool.hpp"

#include "fatpack/core/package.hpp"

#include <algorithm>
#include <iostream>
#include <map>

int main(int argc, char** argv) {
  using namespace fatpack::tool;
  // Before any thread starts: a signal stops the children, removes temporary files and ends the
  // process with that signal (cleanup.hpp).
  install_signal_cleanup();
  // `@FILE` arguments are replaced by the file's words (response_file.hpp), before anything else.
  auto expanded = expand_response_files(std::vector<std::string>(argv + std::min(argc, 1), argv + argc));
  if (!expanded) {
    print_error(expanded.error().message);
    return exit_usage;
  }
  std::vector<std::string> words = std::move(expanded).value();
  words.insert(words.begin(), argc > 0 ? argv[0] : "fatpack");
  // Everything after a bare `--` goes to nvcc unchanged (`fatpack build ... -- -O3`); CLI11 must
  // not see it.
  std::vector<char*> args;
  for (auto& w : words) args.push_back(w.data());
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (std::string(args[i]) == "--") {
      passthrough_args().assign(args.begin() + long(i) + 1, args.end());
      args.resize(i);
      break;
    }
  }

  // `--name=` (an unset variable after '='): CLI11 takes the next word as the value, so an input
  // became the package name. Refused before parsing, as an empty value given apart is (not_empty).
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string a = args[i];
    if (a.size() > 3 && a.compare(0, 2, "--") == 0 && a.back() == '=') {
      print_error(a.substr(0, a.size() - 1) + ": is empty (an unset variable?): give a value, or leave " +
                  a.substr(0, a.size() - 1) + " out");
      std::cerr << "Run 'fatpack --help' or 'fatpack <command> --help' for usage.\n";
      return exit_usage;
    }
  }

  CLI::App app{"fatpack " FATPACK_VERSION
               ": package CUDA kernels (SASS for several GPUs + PTX) into one compressed, checksummed .fpk "
               "package and inspect, verify, extract, plan and embed packages; prebuild and maintain the runtime's JIT "
               "cache.\n"
               "Exit status: 0 success, 1 failure, 2 usage error.",
               "fatpack"};
  app.footer("Response files: an argument @FILE (before a bare --) is replaced by the words of FILE: whitespace "
             "separates them, '...' and \"...\" group, a backslash escapes; nested at most 8 deep, at most 1 MiB "
             "each.\nEnvironment: FATPACK_MAX_INPUT_SIZE bounds every input file read (bytes; default 4294967296).");
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       std::string("fatpack ") + FATPACK_VERSION + " (package format " +
                           std::to_string(fatpack::core::format_major) + "." +
                           std::to_string(fatpack::core::format_minor) + ")");
  std::map<CLI::App*, command_runner> runners;
  auto add = [&](command_runner (*adder)(CLI::App&)) {
    const std::size_t before = app.get_subcommands({}).size();
    command_runner run = adder(app);
    runners[app.get_subcommands({}).at(before)] = std::move(run);
  };
  add(add_build_command);
  add(add_pack_command);
  add(add_inspect_command);
  add(add_verify_command);
  add(add_extract_command);
  add(add_plan_command);
  add(add_embed_command);
  add(add_export_fatbin_command);
  add(add_cache_command);
  add(add_warm_command);
  add(add_doctor_command);
  add(add_link_lto_command);
  add(add_split_ptx_command);

  // A word that is no option and no command, first or after a command that has its own (`cache`):
  // say so, with the nearest name (CLI11 would only say that a subcommand is required).
  auto unknown = [&](const CLI::App& parent, const std::string& word, const std::string& usage) {
    std::vector<std::string> names;
    for (const CLI::App* sub : parent.get_subcommands({})) names.push_back(sub->get_name());
    if (names.empty() || std::find(names.begin(), names.end(), word) != names.end()) return false;
    const std::string near = nearest_name(word, names);
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    const std::string what = &parent == &app ? "command" : parent.get_name() + " command";
    print_error("unknown " + what + " '" + word + "'" +
                (near.empty() ? " (" + what + "s: " + list + ")" : "; did you mean '" + near + "'?"));
    std::cerr << "Run '" << usage << " --help' for usage.\n";
    return true;
  };
  if (args.size() > 1 && args[1][0] != '-') {
    if (unknown(app, args[1], "fatpack")) return exit_usage;
    const CLI::App* command = nullptr;
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->get_name() == args[1]) command = sub;
    if (command && args.size() > 2 && args[2][0] != '-' &&
        unknown(*command, args[2], "fatpack " + command->get_name()))
      return exit_usage;
  }
  try {
    app.parse(int(args.size()), args.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(e.what());
    std::cerr << "Run 'fatpack --help' or 'fatpack <command> --help' for usage.\n";
    return exit_usage;
  }
  for (auto& [sub, run] : runners) {
    if (sub->parsed()) {
      int rc = exit_usage;
      try {
        rc = run();
      } catch (const usage_error& e) {
        print_error(e.message);
        std::cerr << "Run 'fatpack " << sub->get_name() << " --help' for usage.\n";
      }
      finish_signal_cleanup();
      return rc;
    }
  }
  return exit_usage;
}
