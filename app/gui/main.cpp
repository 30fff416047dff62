// `loom`: the workbench. `loom [PLAN.json]` opens the window on that plan (the embedded
// default plan otherwise). Where there is no display it says so and runs the plan
// headless through loom-cli instead, so the README's first command does the main job
// on any machine.
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>

#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

#include "loom/ui/workbench/main_window.h"

namespace {

bool have_display() {
  return !qEnvironmentVariableIsEmpty("DISPLAY") || !qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") ||
         !qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM");
}

// Replaces this process with loom-cli, which the build puts beside this executable.
int run_headless(const char* argv0, const std::vector<std::string>& plan_args) {
  const QString self = QFileInfo(QString::fromLocal8Bit(argv0)).absolutePath();
  std::string cli = (self + "/loom-cli").toStdString();
  std::fprintf(stderr, "loom: no display (DISPLAY and WAYLAND_DISPLAY are unset); running the plan headless: %s run\n",
               cli.c_str());
  std::vector<char*> args{cli.data(), const_cast<char*>("run")};
  for (const std::string& a : plan_args) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(cli.c_str(), args.data());
  std::perror(("loom: cannot start " + cli).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (!have_display()) {
    std::vector<std::string> rest(argv + 1, argv + argc);
    return run_headless(argv[0], rest);
  }
  QApplication app(argc, argv);
  QApplication::setOrganizationName("Loom");
  QApplication::setApplicationName("Loom");
  QApplication::setApplicationVersion(LOOM_VERSION);
  QCommandLineParser parser;
  parser.setApplicationDescription("Loom workbench: design, run and profile parallel training.");
  parser.addHelpOption();
  parser.addVersionOption();
  QCommandLineOption db({"d", "db"}, "Run database (default $LOOM_DB or ~/.local/share/loom/runs.db).", "path");
  parser.addOption(db);
  parser.addPositionalArgument("plan", "A loom-plan JSON file to open (the default plan otherwise).");
  parser.process(app);

  loom::ui::MainWindow window;
  if (parser.isSet(db)) window.setDbPath(parser.value(db));
  const QStringList plans = parser.positionalArguments();
  if (!plans.isEmpty() && !window.openPlanFile(plans.front())) return 2;
  window.show();
  return QApplication::exec();
}
