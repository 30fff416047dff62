// LessonPanel (see lesson_panel.h). The result's table of answers is ui/models'
// LessonResultModel, written into the result's rich text with the notes and hints below it.
#include "loom/ui/workbench/lesson_panel.h"

#include <QDoubleValidator>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSettings>
#include <QTextBrowser>
#include <QThread>
#include <QUrl>
#include <QVBoxLayout>


#include "loom/ui/item_roles.h"
#include "loom/ui/lesson_result_model.h"
#include "loom/ui/workbench/lesson_session.h"

namespace loom::ui {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }
QString esc(const std::string& s) { return qs(s).toHtmlEscaped(); }

// "x" in lesson files (as the terminal prints it) is the times sign on screen.
QString unit_text(const std::string& unit) { return unit == "x" ? QStringLiteral("×") : qs(unit).toHtmlEscaped(); }

// A hint's link to its run: loom-run:ID.
constexpr const char* kRunLink = "loom-run:";

QString settings_key(const QString& lesson, const char* what) { return "lessons/" + lesson + "/" + what; }

QString lesson_html(const lessons::Lesson& l) {
  QString html = QStringLiteral("<h3>%1</h3>").arg(esc(l.title));
  for (const std::string& p : l.explanation) html += QStringLiteral("<p>%1</p>").arg(esc(p));
  if (!l.formula.empty()) html += QStringLiteral("<p style=\"margin-left:12px\"><code>%1</code></p>").arg(esc(l.formula));
  html += QStringLiteral("<p><b>Question:</b> %1 (%2)</p>").arg(esc(l.question), unit_text(l.unit));
  return html;
}

// The result model's rows as a table in the result's text: each value bold and right
// aligned, its detail (why Loom has no prediction) in normal weight after it.
QString result_table_html(const LessonResultModel& model) {
  QString html = QStringLiteral("<table cellspacing=\"0\" cellpadding=\"3\">");
  for (int r = 0; r < model.rowCount(); ++r) {
    const QModelIndex value = model.index(r, LessonResultModel::Value);
    QString value_html = value.data().toString().toHtmlEscaped();
    const QString detail = value.data(DetailRole).toString();
    if (!detail.isEmpty())
      value_html += QStringLiteral(" <span style=\"font-weight:normal\">%1</span>").arg(detail.toHtmlEscaped());
    html += QStringLiteral("<tr><td>%1</td><td align=\"right\"><b>%2</b></td></tr>")
                .arg(model.index(r, LessonResultModel::Source).data().toString().toHtmlEscaped(), value_html);
  }
  return html + QStringLiteral("</table>");
}

// The answers' table, then what the measurement shows and where to look in which run.
QString result_html(const lessons::Lesson& l, double measured, const LessonResultModel& answers,
                    const QList<qint64>& ids) {
  QString html = result_table_html(answers);
  const std::string slowdown = lessons::slowdown_note(l, measured, QThread::idealThreadCount());
  if (!slowdown.empty()) html += QStringLiteral("<p><b>%1</b></p>").arg(esc(slowdown));
  for (const std::string& p : l.after) html += QStringLiteral("<p>%1</p>").arg(esc(p));
  if (!l.hints.empty()) html += QObject::tr("<p><b>Look here</b> (click to open the run):</p><ul>");
  for (const lessons::Hint& h : l.hints) {
    const qint64 id = h.run < ids.size() ? ids[h.run] : 0;
    QString where = QObject::tr("<a href=\"%1%2\">the %3 run</a>")
                        .arg(QLatin1String(kRunLink))
                        .arg(id)
                        .arg(esc(l.runs[std::size_t(h.run)].label));
    if (h.rank) where += QObject::tr(", rank %1").arg(*h.rank);
    if (h.kind) where += QObject::tr(", %1 spans").arg(esc(*h.kind));
    html += QStringLiteral("<li>%1: %2</li>").arg(where, esc(h.text));
  }
  if (!l.hints.empty()) html += QStringLiteral("</ul>");
  return html;
}

}  // namespace

LessonPanel::LessonPanel(LessonSession* session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      list_(new QListWidget),
      text_(new QTextBrowser),
      prediction_(new QLineEdit),
      unit_(new QLabel),
      run_(new QPushButton(tr("Run the lesson"))),
      status_(new QLabel),
      result_(new QTextBrowser),
      result_model_(new LessonResultModel(this)) {
  list_->setObjectName("LessonList");
  text_->setObjectName("LessonText");
  prediction_->setObjectName("LessonPrediction");
  run_->setObjectName("LessonRun");
  status_->setObjectName("LessonStatus");
  result_->setObjectName("LessonResult");
  prediction_->setPlaceholderText(tr("your prediction"));
  prediction_->setValidator(new QDoubleValidator(prediction_));
  status_->setWordWrap(true);
  // A short list above the lesson: titles elided (whole in the tooltip), no sideways scroll.
  list_->setTextElideMode(Qt::ElideRight);
  list_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  list_->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);
  result_->hide();  // until there is a result
  result_->setOpenLinks(false);  // a hint's link opens its run in the window
  auto lessons = lessons::builtin_lessons();
  if (lessons.ok()) lessons_ = std::move(lessons).value();
  else status_->setText(qs(lessons.error().describe()));
  layOut();
  connectSignals();
  refreshProgress();
  fitListToLessons();
  if (!lessons_.empty()) list_->setCurrentRow(0);
}

// The lesson list above; below it the lesson's text, the answer row, status and result.
void LessonPanel::layOut() {
  auto* answer = new QHBoxLayout;
  answer->addWidget(prediction_, 1);
  answer->addWidget(unit_);
  answer->addWidget(run_);
  auto* lesson_area = new QWidget;
  auto* lesson_layout = new QVBoxLayout(lesson_area);
  lesson_layout->setContentsMargins(0, 0, 0, 0);
  lesson_layout->addWidget(text_, 3);
  lesson_layout->addLayout(answer);
  lesson_layout->addWidget(status_);
  lesson_layout->addWidget(result_, 2);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(list_);
  layout->addWidget(lesson_area, 1);
}

void LessonPanel::connectSignals() {
  connect(list_, &QListWidget::currentRowChanged, this, &LessonPanel::showLesson);
  connect(run_, &QPushButton::clicked, this, &LessonPanel::runLesson);
  connect(prediction_, &QLineEdit::returnPressed, this, &LessonPanel::runLesson);
  connect(session_, &LessonSession::runRequested, this,
          [this](const loom::Plan&, const QString& label, int index, int count) { onRunRequested(label, index, count); });
  connect(session_, &LessonSession::measured, this, &LessonPanel::onMeasured);
  connect(session_, &LessonSession::failed, this, &LessonPanel::onFailed);
  connect(result_, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
    const QString link = url.toString();
    if (link.startsWith(QLatin1String(kRunLink))) emit openRunRequested(link.mid(int(qstrlen(kRunLink))).toLongLong());
  });
}

// Every title in view (11 lessons: about 200 px), the text below taking the rest.
void LessonPanel::fitListToLessons() {
  const int rows = list_->count();
  const int row_height = rows > 0 ? list_->sizeHintForRow(0) : list_->fontMetrics().height();
  list_->setFixedHeight(rows * row_height + 2 * list_->frameWidth() + 2);
}

const lessons::Lesson* LessonPanel::current() const {
  const int row = list_->currentRow();
  return row >= 0 && std::size_t(row) < lessons_.size() ? &lessons_[std::size_t(row)] : nullptr;
}

QString LessonPanel::currentLesson() const { return current() ? qs(current()->name) : QString(); }

bool LessonPanel::selectLesson(const QString& name) {
  for (std::size_t i = 0; i < lessons_.size(); ++i) {
    if (qs(lessons_[i].name) != name) continue;
    list_->setCurrentRow(int(i));
    return true;
  }
  return false;
}

// The list shows each lesson's order and title, with the last measurement once run.
void LessonPanel::refreshProgress() {
  const int row = list_->currentRow();
  const QSignalBlocker block(list_);
  list_->clear();
  QSettings settings;
  for (const lessons::Lesson& l : lessons_) {
    // Done lessons are ticked; their answer is not shown above the question (the list sits
    // above the lesson text), only in the lesson's result once it is run again.
    const bool done = settings.value(settings_key(qs(l.name), "measured")).isValid();
    auto* item = new QListWidgetItem(done ? QStringLiteral("✓ ") + qs(l.title) : qs(l.title), list_);
    item->setToolTip(done ? tr("%1 (done)").arg(qs(l.title)) : qs(l.title));
  }
  if (row >= 0) list_->setCurrentRow(row);
}

void LessonPanel::showLesson(int row) {
  if (row < 0 || std::size_t(row) >= lessons_.size()) return;
  const lessons::Lesson& l = lessons_[std::size_t(row)];
  text_->setHtml(lesson_html(l));
  unit_->setText(unit_text(l.unit));
  QSettings settings;
  prediction_->setText(settings.value(settings_key(qs(l.name), "prediction")).toString());
  result_->clear();
  result_->hide();
  result_html_.clear();
  result_model_->clear();
  if (!session_->isActive()) status_->clear();
}

void LessonPanel::runLesson() {
  const lessons::Lesson* l = current();
  if (!l || session_->isActive()) return;
  QSettings().setValue(settings_key(qs(l->name), "prediction"), prediction_->text());
  result_->clear();
  result_->hide();
  if (session_->start(*l)) {
    run_->setEnabled(false);
    list_->setEnabled(false);
  }
}

void LessonPanel::onRunRequested(const QString& label, int index, int count) {
  status_->setText(tr("Run %1 of %2: %3 (watch it on the timeline)…").arg(index + 1).arg(count).arg(label));
}

void LessonPanel::onMeasured(const QString& lesson, double value, const QList<qint64>& runIds) {
  run_->setEnabled(true);
  list_->setEnabled(true);
  QSettings().setValue(settings_key(lesson, "measured"), value);
  refreshProgress();
  const lessons::Lesson* l = current();
  if (!l || qs(l->name) != lesson) return;
  bool ok = false;
  const double predicted = QLocale().toDouble(prediction_->text(), &ok);
  status_->setText(tr("Done: %1 runs stored.").arg(runIds.size()));
  result_model_->setResult(*l, value, ok ? std::optional(predicted) : std::nullopt, session_->loomAnswer());
  result_html_ = result_html(*l, value, *result_model_, runIds);
  result_->setHtml(result_html_);
  result_->show();
  // The screen shows the run the question asked about, not merely the last one run.
  const int asked = l->answer.run;
  if (asked >= 0 && asked < runIds.size()) emit openRunRequested(runIds[asked]);
}

// A link's colour is fixed when the HTML is read: read it again in the new palette (the
// dark palette's links would stay dark blue on dark grey).
void LessonPanel::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  const bool palette = event->type() == QEvent::PaletteChange || event->type() == QEvent::ApplicationPaletteChange;
  if (palette && !result_html_.isEmpty()) result_->setHtml(result_html_);
}

void LessonPanel::onFailed(const QString&, const QString& message) {
  run_->setEnabled(true);
  list_->setEnabled(true);
  status_->setText(tr("The lesson stopped: %1").arg(message));
}

}  // namespace loom::ui
