// The wallsim command: argument parsing and exit codes; the work lives in the libraries.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "commands.h"
#include "wallsim/base/host_memory.h"
#include "wallsim/base/params.h"
#include "wallsim/compiler_stub/compile.h"
#include "wallsim/memory/memory_error.h"
#include "wallsim/runtime/session.h"
#include "wallsim/sim/exec.h"
#include "wallsim/traces/write_error.h"

namespace {

// The deepest subcommand the command line reached.
const CLI::App* deepest_parsed(const CLI::App& app) {
  const CLI::App* cur = &app;
  for (bool deeper = true; deeper;) {
    deeper = false;
    for (const CLI::App* sub : cur->get_subcommands()) {
      cur = sub;
      deeper = true;
      break;
    }
  }
  return cur;
}

// A CLI11 parse error as one line. A command that needs a subcommand names what it was given
// and lists the ones it knows.
std::string parse_error_line(const CLI::App& app, const CLI::ParseError& e) {
  const CLI::App* cur = deepest_parsed(app);
  std::string msg = e.what();
  if (cur->get_require_subcommand_min() > 0 && cur->get_subcommands().empty()) {
    std::string known;
    for (const CLI::App* sub :
         cur->get_subcommands([](const CLI::App* s) { return !s->get_name().empty(); })) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    std::string where = cur == &app ? "" : cur->get_name() + ": ";
    const std::vector<std::string> rest = cur->remaining();
    const std::string kind = cur == &app ? "command" : cur->get_name();
    msg = rest.empty() || rest.front().empty() || rest.front()[0] == '-'
              ? where + "a " + kind + " name is required (known: " + known + ")"
              : where + "unknown " + kind + " '" + rest.front() + "' (known: " + known + ")";
  }
  for (char& c : msg) {
    if (c == '\n') c = ' ';
  }
  while (!msg.empty() && msg.back() == ' ') msg.pop_back();
  return msg;
}

// An error is one line: a line break inside a message (an ONNX node name, a workload spec, a
// list of verifier findings) is written as "\n".
std::string one_line(const std::string& msg) {
  std::string out;
  out.reserve(msg.size());
  for (char c : msg) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// --help shows each option's default, except an empty list ("[]") and -1, which marks "not
// given" (run --steps: the workload's own; sweep --index: $SLURM_ARRAY_TASK_ID).
void hide_empty_defaults(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (o->get_default_str() == "[]" || o->get_default_str() == "-1") o->default_str("");
  }
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    hide_empty_defaults(*sub);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace wallsim::cli;
  wallsim::sim::init_systemc();
  // A file-size limit (ulimit -f) is a failed write, reported in one line with exit code 2 and
  // cleaned up after, not a SIGXFSZ that kills the process halfway through an output.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"wallsim: cycle-level simulator of a dataflow AI accelerator and its runtime"};
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.set_version_flag("--version", std::string("wallsim 0.1.0 (compiler ") +
                                        wallsim::compiler_stub::build_id() + ")");
  add_config_commands(app);
  add_plan_commands(app);
  add_exec_command(app);
  add_collectives_command(app);
  add_compile_command(app);
  add_run_command(app);
  add_study_command(app);
  add_sweep_commands(app);
  add_validate_command(app);
  add_import_command(app);
  add_capture_command(app);
  hide_empty_defaults(app);
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
    std::cerr << "wallsim: " << parse_error_line(app, e) << " (see wallsim --help)\n";
    return kExitBadInput;
  } catch (const wallsim::runtime::RuntimeError& e) {
    std::cerr << "wallsim: " << one_line(e.what()) << "\n";
    return kExitBadInput;
  } catch (const wallsim::sim::SimulationError& e) {
    std::cerr << "wallsim: " << one_line(e.what()) << "\n";
    return kExitBadInput;
  } catch (const wallsim::memory::MemoryError& e) {
    std::cerr << "wallsim: " << one_line(e.what()) << "\n";
    return kExitBadInput;
  } catch (const wallsim::base::InputError& e) {
    std::cerr << "wallsim: " << one_line(e.what()) << "\n";
    return kExitBadInput;
  } catch (const wallsim::traces::WriteError& e) {
    std::cerr << "wallsim: " << one_line(e.what()) << "\n";
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    std::cerr << "wallsim: out of host memory: an allocation failed ("
              << wallsim::base::host_memory_limit_text()
              << "); try a smaller workload or raise the limit\n";
    return kExitBadInput;
  } catch (const Failed& e) {
    std::cerr << "wallsim: " << one_line(e.what()) << "\n";
    return kExitFailed;
  } catch (const std::exception& e) {
    std::cerr << "wallsim: internal error: " << one_line(e.what()) << "\n";
    return kExitInternal;
  }
  return kExitOk;
}
