// The wallsim command: argument parsing and exit codes; the work lives in the libraries.
#include <cstdlib>
#include <iostream>

#include "commands.h"
#include "wallsim/base/params.h"
#include "wallsim/memory/memory_error.h"
#include "wallsim/runtime/session.h"
#include "wallsim/sim/exec.h"

int main(int argc, char** argv) {
  using namespace wallsim::cli;
  wallsim::sim::init_systemc();
  CLI::App app{"wallsim: cycle-level simulator of a dataflow AI accelerator and its runtime"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "wallsim 0.1.0");
  add_config_commands(app);
  add_plan_commands(app);
  add_exec_command(app);
  add_compile_command(app);
  add_run_command(app);
  add_study_command(app);
  add_sweep_commands(app);
  add_validate_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const Exit& e) {
    return e.code;
  } catch (const CLI::ParseError& e) {
    std::cerr << "wallsim: " << e.what() << " (see wallsim --help)\n";
    return kExitBadInput;
  } catch (const wallsim::runtime::RuntimeError& e) {
    std::cerr << "wallsim: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const wallsim::sim::SimulationError& e) {
    std::cerr << "wallsim: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const wallsim::memory::MemoryError& e) {
    std::cerr << "wallsim: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const wallsim::base::InputError& e) {
    std::cerr << "wallsim: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "wallsim: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
  return kExitOk;
}
