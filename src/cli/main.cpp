// rotor: one command, many subcommands (see src/cli/cmd_*.cpp).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "cli/command.h"
#include "core/error.h"

namespace rotor::cli {
std::vector<CommandSpec>& command_registry() {
  static std::vector<CommandSpec> registry;
  return registry;
}
}  // namespace rotor::cli

int main(int argc, char** argv) {
  using namespace rotor::cli;
  CLI::App app{"rotor: train Transformers with rotary position embedding", "rotor"};
  app.set_version_flag("--version", std::string("rotor ") + ROTOR_VERSION);
  app.require_subcommand(1);
  auto specs = command_registry();
  std::sort(specs.begin(), specs.end(),
            [](const CommandSpec& a, const CommandSpec& b) { return a.order < b.order; });
  std::function<int()> action;
  for (auto& spec : specs) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.description);
    auto run = spec.setup(*sub);
    sub->callback([&action, run] { action = run; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return action ? action() : 0;
  } catch (const rotor::Error& e) {
    std::fprintf(stderr, "rotor: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rotor: error: %s\n", e.what());
    return 1;
  }
}
