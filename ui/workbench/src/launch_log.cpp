// LaunchLog (launch_log.h). The summary's keys come from launcher/rank's print_summary;
// a key this file does not know is still shown ("key value"), so a new field is never lost.
#include "loom/ui/workbench/launch_log.h"

#include <QCoreApplication>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>

#include <cmath>

#include "loom/ui/text_format.h"

namespace loom::ui {

namespace {

QString tr(const char* text) { return QCoreApplication::translate("LaunchLog", text); }

QString number(double value, int decimals) { return QString::number(value, 'f', decimals); }

// The rank's summary is about rank 0's training loop (launcher/rank print_summary), not
// the whole run with its setup: the sentence says so, so it is not read as the run's figure.
QString summary_text(const QJsonObject& o) {
  QStringList parts;
  QJsonObject rest = o;
  auto take = [&rest](const char* key) {
    const QJsonValue v = rest.value(QLatin1String(key));
    rest.remove(QLatin1String(key));
    return v;
  };
  const QJsonValue world = take("world_size"), steps = take("steps"), wall = take("wall_s");
  const QJsonValue loss = take("final_loss"), accuracy = take("test_accuracy");
  const QJsonValue stopped = take("stopped");
  if (!world.isUndefined()) parts << tr("%1 ranks").arg(world.toInt());
  if (!steps.isUndefined() && !wall.isUndefined()) {
    parts << tr("%1 steps in %2 s of training loop").arg(steps.toInteger()).arg(number(wall.toDouble(), 2));
  }
  // Its samples/s is rank 0's loop's, warm-up included: a third figure beside the status
  // bar's and the Runs list's steady one (RunRecord::samples_per_s), so it is left out.
  take("samples_per_s");
  if (loss.isDouble()) parts << tr("final loss %1").arg(number(loss.toDouble(), 4));
  if (accuracy.isDouble()) parts << tr("test accuracy %1%").arg(number(accuracy.toDouble() * 100.0, 2));
  if (stopped.toBool()) parts << tr("stopped early");
  for (auto it = rest.begin(); it != rest.end(); ++it) {
    parts << it.key() + QLatin1Char(' ') + it.value().toVariant().toString();
  }
  return tr("Summary (rank 0): ") + parts.join(QStringLiteral(" · "));
}

}  // namespace

QString LaunchLog::readable(const QString& line) {
  const QString trimmed = line.trimmed();
  if (!trimmed.startsWith(QLatin1Char('{')) || !trimmed.endsWith(QLatin1Char('}'))) return line;
  QJsonParseError error{};
  const QJsonDocument doc = QJsonDocument::fromJson(trimmed.toUtf8(), &error);
  if (error.error != QJsonParseError::NoError || !doc.isObject()) return line;
  const QJsonObject o = doc.object();
  // Only the rank's summary: another JSON line (a user's print) stays as it was.
  if (!o.contains(QLatin1String("samples_per_s")) || !o.contains(QLatin1String("world_size"))) return line;
  return summary_text(o);
}

QString LaunchLog::append(const QString& chunk) {
  pending_ += chunk;
  const qsizetype end = pending_.lastIndexOf(QLatin1Char('\n'));
  if (end < 0) return {};
  const QString complete = pending_.left(end);
  pending_.remove(0, end + 1);
  QString out;
  for (const QString& line : complete.split(QLatin1Char('\n'))) out += readable(line) + QLatin1Char('\n');
  return out;
}

QString LaunchLog::flush() {
  if (pending_.isEmpty()) return {};
  const QString out = readable(pending_) + QLatin1Char('\n');
  pending_.clear();
  return out;
}

}  // namespace loom::ui
