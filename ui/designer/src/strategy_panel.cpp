// StrategyPanel (strategy_panel.h). Fields are declared once with a getter and a setter
// on the Plan; the same Field list drives loading, enabling and error labels, so a new
// field is one line per group.
#include "loom/ui/designer/strategy_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QGridLayout>
#include <QPushButton>
#include <QResizeEvent>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

#include "loom/ui/designer/plan_help.h"
#include "loom/ui/designer/strategy.h"

namespace loom::ui {
namespace {

// One merge key per field: typing "128" into a spin box is one undo step.
int mergeKeyFor(const QString& path) { return static_cast<int>(qHash(path) & 0x3fffffff) | 1; }

template <class Enum>
QStringList enumNames(std::string_view (*name)(Enum), int count) {
  QStringList out;
  for (int i = 0; i < count; ++i) out << QString::fromUtf8(name(static_cast<Enum>(i)).data());
  return out;
}

// Shows a value with as many decimals as it has (0.25, 25, 0.001), not a fixed count:
// a 0.25 MiB bucket shown with one decimal read "0.3".
class TrimmedDoubleSpinBox : public QDoubleSpinBox {
 public:
  QString textFromValue(double value) const override {
    QString text = QString::number(value, 'f', decimals());
    if (text.contains(QLatin1Char('.'))) {
      while (text.endsWith(QLatin1Char('0'))) text.chop(1);
      if (text.endsWith(QLatin1Char('.'))) text.chop(1);
    }
    return text;
  }
};

QFormLayout* group(std::vector<QGroupBox*>& boxes, const QString& title) {
  auto* box = new QGroupBox(title);
  auto* form = new QFormLayout(box);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  // Long labels wrap above their field rather than pushing the form wider than the dock.
  form->setRowWrapPolicy(QFormLayout::WrapLongRows);
  boxes.push_back(box);
  return form;
}

QString onOff(bool on) { return on ? StrategyPanel::tr("on") : StrategyPanel::tr("off"); }

}  // namespace

StrategyPanel::StrategyPanel(PlanDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  // The form scrolls inside the panel, so a short or narrow dock never squeezes the
  // fields over each other (or over the docks around it).
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* inner = new QWidget;
  grid_ = new QGridLayout(inner);
  scroll->setWidget(inner);
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->addWidget(scroll);
  buildDataParallel();
  buildPipeline();
  buildSync();
  buildTraining();
  auto* box = new QGroupBox(tr("Stragglers"));
  stragglers_layout_ = new QVBoxLayout(box);
  auto* add = new QPushButton(tr("Add straggler"));
  add->setToolTip(term_tooltip_for_stragglers());
  connect(add, &QPushButton::clicked, this, [this] {
    doc_->edit(tr("Add straggler"), [](loom::Plan& p) { p.parallel.stragglers.push_back({0, 2.0, {}, 0.0}); });
  });
  stragglers_layout_->addWidget(add);
  boxes_.push_back(box);
  reflow(1);
  connect(doc_, &PlanDocument::planChanged, this, &StrategyPanel::refresh);
  refresh();
}

QString StrategyPanel::term_tooltip_for_stragglers() const {
  return strategyFieldHelp(doc_->plan(), doc_->info(), QStringLiteral("/parallel/stragglers/0/slowdown"));
}

// One column in a narrow dock; two (data parallel, pipeline, sync | training, stragglers)
// when the panel is wide enough for both side by side.
void StrategyPanel::reflow(int columns) {
  if (columns == columns_) return;
  columns_ = columns;
  for (QGroupBox* box : boxes_) grid_->removeWidget(box);
  const int split = 3;  // boxes_[0..2] on the left
  for (int i = 0; i < static_cast<int>(boxes_.size()); ++i) {
    const bool right = columns == 2 && i >= split;
    grid_->addWidget(boxes_[static_cast<std::size_t>(i)], right ? i - split : i, right ? 1 : 0, Qt::AlignTop);
  }
  for (int r = 0; r < grid_->rowCount(); ++r) grid_->setRowStretch(r, 0);
  grid_->setRowStretch(grid_->rowCount(), 1);
}

void StrategyPanel::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  int left = 0, right = 0;
  for (std::size_t i = 0; i < boxes_.size(); ++i) {
    int& column = i < 3 ? left : right;
    column = std::max(column, boxes_[i]->minimumSizeHint().width());
  }
  const int needed = left + right + grid_->horizontalSpacing() + 2 * 24;  // margins and a scroll bar
  reflow(event->size().width() >= needed ? 2 : 1);
}

void StrategyPanel::buildDataParallel() {
  QFormLayout* f = group(boxes_, tr("Data parallel"));
  addInt(fields_, f, "/parallel/data_parallel", 1, kMaxDesignerRanks,
         [](const loom::Plan& p) { return p.parallel.data_parallel; }, [](loom::Plan& p, int v) { setDataParallel(p, v); });
  addInt(fields_, f, "/parallel/grad_accumulation", 0, 4096,
         [](const loom::Plan& p) { return p.parallel.grad_accumulation; },
         [](loom::Plan& p, int v) { p.parallel.grad_accumulation = v; });
  addDouble(fields_, f, "/parallel/bucket_mb", 4096, 3,
            [](const loom::Plan& p) { return p.parallel.bucket_mb; }, [](loom::Plan& p, double v) { p.parallel.bucket_mb = v; });
  addChoice(fields_, f, "/parallel/backend", enumNames(&loom::backend_name, 2),
            [](const loom::Plan& p) { return static_cast<int>(p.parallel.backend); },
            [](loom::Plan& p, int v) { p.parallel.backend = static_cast<loom::CommBackend>(v); });
}

void StrategyPanel::buildPipeline() {
  QFormLayout* f = group(boxes_, tr("Pipeline"));
  addInt(fields_, f, "/parallel/stages", 1, 64, [](const loom::Plan& p) { return p.parallel.stages; },
         [](loom::Plan& p, int v) { setStages(p, v); });
  addInt(fields_, f, "/parallel/microbatches", 0, 4096,
         [](const loom::Plan& p) { return p.parallel.microbatches; }, [](loom::Plan& p, int v) { p.parallel.microbatches = v; });
  addChoice(fields_, f, "/parallel/schedule", enumNames(&loom::schedule_name, 2),
            [](const loom::Plan& p) { return static_cast<int>(p.parallel.schedule); },
            [](loom::Plan& p, int v) { p.parallel.schedule = static_cast<loom::Schedule>(v); });
}

void StrategyPanel::buildSync() {
  QFormLayout* f = group(boxes_, tr("Sync"));
  addChoice(fields_, f, "/parallel/sync/mode", enumNames(&loom::sync_mode_name, 4),
            [](const loom::Plan& p) { return static_cast<int>(p.parallel.sync.mode); },
            [](loom::Plan& p, int v) { setSyncMode(p, static_cast<loom::SyncMode>(v)); });
  addInt(fields_, f, "/parallel/sync/bound", 0, 1000,
         [](const loom::Plan& p) { return p.parallel.sync.bound; }, [](loom::Plan& p, int v) { p.parallel.sync.bound = v; });
  addInt(fields_, f, "/parallel/sync/period", 0, 100000,
         [](const loom::Plan& p) { return p.parallel.sync.period; }, [](loom::Plan& p, int v) { p.parallel.sync.period = v; });
  addInt(fields_, f, "/parallel/sync/servers", 1, 64,
         [](const loom::Plan& p) { return p.parallel.sync.servers; }, [](loom::Plan& p, int v) { setServers(p, v); });
  addCheck(fields_, f, "/parallel/sync/staleness_aware_lr",
           [](const loom::Plan& p) { return p.parallel.sync.staleness_aware_lr; },
           [](loom::Plan& p, bool v) { p.parallel.sync.staleness_aware_lr = v; });
}

void StrategyPanel::buildTraining() {
  QFormLayout* f = group(boxes_, tr("Training"));
  constexpr int kBig = 1'000'000'000;
  addInt(fields_, f, "/training/batch", 0, kBig,
         [](const loom::Plan& p) { return static_cast<int>(p.training.batch); }, [](loom::Plan& p, int v) { p.training.batch = v; });
  addInt(fields_, f, "/training/steps", 0, kBig,
         [](const loom::Plan& p) { return static_cast<int>(p.training.steps); }, [](loom::Plan& p, int v) { p.training.steps = v; });
  addInt(fields_, f, "/training/epochs", 0, 100000, [](const loom::Plan& p) { return p.training.epochs; },
         [](loom::Plan& p, int v) { p.training.epochs = v; });
  addChoice(fields_, f, "/training/optimizer/type", enumNames(&loom::optimizer_name, 3),
            [](const loom::Plan& p) { return static_cast<int>(p.training.optimizer.kind); },
            [](loom::Plan& p, int v) { p.training.optimizer.kind = static_cast<loom::OptimizerKind>(v); });
  addDouble(fields_, f, "/training/optimizer/lr", 10, 6,
            [](const loom::Plan& p) { return p.training.optimizer.lr; }, [](loom::Plan& p, double v) { p.training.optimizer.lr = v; });
  addDouble(fields_, f, "/training/optimizer/momentum", 1, 3,
            [](const loom::Plan& p) { return p.training.optimizer.momentum; },
            [](loom::Plan& p, double v) { p.training.optimizer.momentum = v; });
}

// One form block per straggler; rebuilt only when their number changes, so typing in a
// straggler's field never destroys the widget under the cursor.
void StrategyPanel::rebuildStragglers() {
  const int count = static_cast<int>(doc_->plan().parallel.stragglers.size());
  if (count == straggler_rows_) return;
  straggler_rows_ = count;
  straggler_fields_.clear();
  if (stragglers_inner_ != nullptr) {
    // Later, not now: the remove button that triggered this edit may still be emitting.
    stragglers_inner_->hide();
    stragglers_inner_->deleteLater();
  }
  stragglers_inner_ = new QWidget;
  auto* form = new QFormLayout(stragglers_inner_);
  form->setContentsMargins(0, 0, 0, 0);
  for (int i = 0; i < count; ++i) {
    const auto at = [i](const loom::Plan& p) -> const loom::StragglerSpec& { return p.parallel.stragglers[static_cast<std::size_t>(i)]; };
    const auto mut = [i](loom::Plan& p) -> loom::StragglerSpec& { return p.parallel.stragglers[static_cast<std::size_t>(i)]; };
    const QString base = QStringLiteral("/parallel/stragglers/%1").arg(i);
    auto* remove = new QPushButton(tr("Remove straggler %1").arg(i));
    connect(remove, &QPushButton::clicked, this, [this, i] {
      doc_->edit(tr("Remove straggler"), [i](loom::Plan& p) { p.parallel.stragglers.erase(p.parallel.stragglers.begin() + i); });
    });
    form->addRow(remove);
    addInt(straggler_fields_, form, base + "/rank", -1, kMaxDesignerRanks,
           [at](const loom::Plan& p) { return at(p).rank; }, [mut](loom::Plan& p, int v) { mut(p).rank = v; });
    addDouble(straggler_fields_, form, base + "/slowdown", 100, 2,
              [at](const loom::Plan& p) { return at(p).slowdown; }, [mut](loom::Plan& p, double v) { mut(p).slowdown = v; });
    addChoice(straggler_fields_, form, base + "/delay", enumNames(&loom::delay_name, 4),
              [at](const loom::Plan& p) { return static_cast<int>(at(p).delay); },
              [mut](loom::Plan& p, int v) { mut(p).delay = static_cast<loom::DelayDistribution>(v); });
    addDouble(straggler_fields_, form, base + "/delay_ms", 100000, 1,
              [at](const loom::Plan& p) { return at(p).delay_ms; }, [mut](loom::Plan& p, double v) { mut(p).delay_ms = v; });
  }
  stragglers_layout_->insertWidget(0, stragglers_inner_);
}

void StrategyPanel::refresh() {
  rebuildStragglers();
  const loom::Plan& plan = doc_->plan();
  for (auto* list : {&fields_, &straggler_fields_}) {
    for (Field& f : *list) {
      {
        const QSignalBlocker block(f.editor);
        f.load();
      }
      bool relevant = strategyFieldRelevant(plan, f.path);
      if (f.path.endsWith(QLatin1String("/delay_ms"))) {
        const int i = f.path.section('/', 3, 3).toInt();
        relevant = plan.parallel.stragglers[static_cast<std::size_t>(i)].delay != loom::DelayDistribution::None;
      }
      f.editor->setEnabled(relevant);
      // The tooltip carries a line computed for this plan (the bubble for its p and m...).
      const QString help = strategyFieldHelp(plan, doc_->info(), f.path);
      f.editor->setToolTip(help);
      if (f.label != nullptr) f.label->setToolTip(help);
      const QStringList errors = doc_->shownErrorsAt(f.path);
      f.error->setText(errors.join(QLatin1Char('\n')));
      f.error->setVisible(!errors.isEmpty());
    }
  }
}

QWidget* StrategyPanel::withErrorLabel(QWidget* editor, Field& field) {
  auto* box = new QWidget;
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  layout->addWidget(editor);
  field.editor = editor;
  field.error = new QLabel;
  field.error->setWordWrap(true);
  field.error->setStyleSheet(QStringLiteral("color: #e53935;"));  // readable on light and dark
  field.error->setVisible(false);
  layout->addWidget(field.error);
  return box;
}

// The row's label from plan_help's table, so the form, the tooltips and the error
// messages ("Strategy › Training › Global batch") use one name.
void StrategyPanel::addRow(QFormLayout* form, QWidget* editor, Field& field) {
  auto* label = new QLabel(strategyFieldName(field.path));
  form->addRow(label, withErrorLabel(editor, field));
  field.label = label;
}

// How an undo step names the field: "Global batch", "straggler 0 slowdown (x)".
QString StrategyPanel::undoName(const QString& path) {
  const QString name = strategyFieldName(path);
  if (!path.startsWith(QLatin1String("/parallel/stragglers/"))) return name;
  return tr("straggler %1 %2").arg(path.section('/', 3, 3), name.toLower());
}

void StrategyPanel::addInt(std::vector<Field>& to, QFormLayout* form, const QString& path, int min, int max, IntGet get,
                           IntSet set) {
  auto* spin = new QSpinBox;
  spin->setRange(min, max);
  Field field;
  field.path = path;
  addRow(form, spin, field);
  field.load = [this, spin, get] {
    const int value = get(doc_->plan());
    if (spin->value() != value) spin->setValue(value);  // leaves the cursor alone while typing
  };
  connect(spin, &QSpinBox::valueChanged, this, [this, path, set](int v) {
    doc_->edit(tr("Change %1 to %2").arg(undoName(path)).arg(v), [&](loom::Plan& p) { set(p, v); }, mergeKeyFor(path));
  });
  connect(spin, &QSpinBox::editingFinished, doc_, &PlanDocument::endMerge);
  to.push_back(std::move(field));
}

void StrategyPanel::addDouble(std::vector<Field>& to, QFormLayout* form, const QString& path, double max, int decimals,
                              DoubleGet get, DoubleSet set) {
  auto* spin = new TrimmedDoubleSpinBox;
  spin->setDecimals(decimals);
  spin->setRange(0, max);
  spin->setSingleStep(decimals >= 4 ? 0.0001 : 0.1);
  Field field;
  field.path = path;
  addRow(form, spin, field);
  field.load = [this, spin, get] {
    const double value = get(doc_->plan());
    if (spin->value() != value) spin->setValue(value);
  };
  connect(spin, &QDoubleSpinBox::valueChanged, this, [this, spin, path, set](double v) {
    doc_->edit(tr("Change %1 to %2").arg(undoName(path), spin->textFromValue(v)), [&](loom::Plan& p) { set(p, v); },
               mergeKeyFor(path));
  });
  connect(spin, &QDoubleSpinBox::editingFinished, doc_, &PlanDocument::endMerge);
  to.push_back(std::move(field));
}

void StrategyPanel::addChoice(std::vector<Field>& to, QFormLayout* form, const QString& path, const QStringList& items,
                              IntGet get, IntSet set) {
  auto* combo = new QComboBox;
  combo->addItems(items);
  Field field;
  field.path = path;
  addRow(form, combo, field);
  field.load = [this, combo, get] { combo->setCurrentIndex(get(doc_->plan())); };
  connect(combo, &QComboBox::currentIndexChanged, this, [this, path, items, set](int v) {
    if (v >= 0) doc_->edit(tr("Change %1 to %2").arg(undoName(path), items.value(v)), [&](loom::Plan& p) { set(p, v); });
  });
  to.push_back(std::move(field));
}

void StrategyPanel::addCheck(std::vector<Field>& to, QFormLayout* form, const QString& path,
                             std::function<bool(const loom::Plan&)> get, std::function<void(loom::Plan&, bool)> set) {
  auto* check = new QCheckBox;
  Field field;
  field.path = path;
  addRow(form, check, field);
  field.load = [this, check, get] { check->setChecked(get(doc_->plan())); };
  connect(check, &QCheckBox::toggled, this, [this, path, set](bool v) {
    doc_->edit(tr("Turn %1 %2").arg(onOff(v), undoName(path)), [&](loom::Plan& p) { set(p, v); });
  });
  to.push_back(std::move(field));
}

const StrategyPanel::Field* StrategyPanel::find(const QString& path) const {
  for (const auto* list : {&fields_, &straggler_fields_}) {
    for (const Field& f : *list) {
      if (f.path == path) return &f;
    }
  }
  return nullptr;
}

QLabel* StrategyPanel::fieldLabel(const QString& path) const {
  const Field* f = find(path);
  return f ? f->label : nullptr;
}

QWidget* StrategyPanel::fieldEditor(const QString& path) const {
  const Field* f = find(path);
  return f ? f->editor : nullptr;
}

QLabel* StrategyPanel::errorLabel(const QString& path) const {
  const Field* f = find(path);
  return f ? f->error : nullptr;
}

}  // namespace loom::ui
