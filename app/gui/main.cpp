// `loom`: the workbench. `loom [PLAN.json]` opens the window on that plan (the embedded
// default plan otherwise); `loom --lesson NAME` opens it on a lesson. Where there is no
// display it says so and runs the plan (or the lesson) headless through loom-cli instead,
// so the README's first command does the main job on any machine.
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>

#include <algorithm>
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

// Replaces this process with loom-cli, which the build puts beside this executable:
// `loom-cli lesson NAME` for --lesson NAME, else `loom-cli run` with the arguments.
int run_headless(const char* argv0, std::vector<std::string> rest) {
  const QString self = QFileInfo(QString::fromLocal8Bit(argv0)).absolutePath();
  std::string cli = (self + "/loom-cli").toStdString();
  std::string command = "run";
  if (auto it = std::find(rest.begin(), rest.end(), "--lesson"); it != rest.end()) {
    command = "lesson";
    it = rest.erase(it);  // the name that followed stays, now a positional argument
  }
  std::fprintf(stderr, "loom: no display (DISPLAY and WAYLAND_DISPLAY are unset); running headless: %s %s\n",
               cli.c_str(), command.c_str());
  std::vector<char*> args{cli.data(), command.data()};
  for (std::string& a : rest) args.push_back(a.data());
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
  QCommandLineOption lesson("lesson", "Open the Lessons dock on this lesson (`loom-cli lesson` lists them).", "name");
  parser.addOption(lesson);
  parser.addPositionalArgument("plan", "A loom-plan JSON file to open (the default plan otherwise).");
  parser.process(app);

  loom::ui::MainWindow window;
  if (parser.isSet(db)) window.setDbPath(parser.value(db));
  const QStringList plans = parser.positionalArguments();
  if (!plans.isEmpty() && !window.openPlanFile(plans.front())) return 2;
  if (parser.isSet(lesson) && !window.openLesson(parser.value(lesson))) {
    std::fprintf(stderr, "loom: no lesson named '%s' (`loom-cli lesson` lists them)\n", qPrintable(parser.value(lesson)));
    return 2;
  }
  if (window.opensMaximized()) window.showMaximized();
  else window.show();
  return QApplication::exec();
}
