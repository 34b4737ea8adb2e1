// Subcommands register themselves: each src/cli/cmd_*.cpp defines a setup
// function and a ROTOR_COMMAND line; main() builds the CLI11 app from them.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace rotor::cli {

// setup adds options to `sub` and returns the action run when it is chosen
// (its return value is the exit code).
using CommandSetup = std::function<std::function<int()>(CLI::App& sub)>;

struct CommandSpec {
  std::string name;
  std::string description;
  int order;  // position in `rotor --help`
  CommandSetup setup;
};

std::vector<CommandSpec>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string description, int order, CommandSetup setup) {
    command_registry().push_back(
        {std::move(name), std::move(description), order, std::move(setup)});
  }
};

}  // namespace rotor::cli

#define ROTOR_COMMAND_CAT2(a, b) a##b
#define ROTOR_COMMAND_CAT(a, b) ROTOR_COMMAND_CAT2(a, b)
#define ROTOR_COMMAND(name, description, order, setup)                               \
  static ::rotor::cli::CommandRegistrar ROTOR_COMMAND_CAT(rotor_command_, __LINE__)( \
      name, description, order, setup)
