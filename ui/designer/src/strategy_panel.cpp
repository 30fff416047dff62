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
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

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

QFormLayout* group(QVBoxLayout* column, const QString& title) {
  auto* box = new QGroupBox(title);
  auto* form = new QFormLayout(box);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  column->addWidget(box);
  return form;
}

}  // namespace

StrategyPanel::StrategyPanel(PlanDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  auto* columns = new QHBoxLayout(this);
  auto* left = new QVBoxLayout;
  auto* right = new QVBoxLayout;
  columns->addLayout(left);
  columns->addLayout(right);
  buildDataParallel(left);
  buildPipeline(left);
  buildSync(left);
  buildTraining(right);
  auto* box = new QGroupBox(tr("Stragglers"));
  stragglers_layout_ = new QVBoxLayout(box);
  auto* add = new QPushButton(tr("Add straggler"));
  connect(add, &QPushButton::clicked, this, [this] {
    doc_->edit(tr("Add straggler"), [](loom::Plan& p) { p.parallel.stragglers.push_back({0, 2.0, {}, 0.0}); });
  });
  stragglers_layout_->addWidget(add);
  right->addWidget(box);
  left->addStretch();
  right->addStretch();
  connect(doc_, &PlanDocument::planChanged, this, &StrategyPanel::refresh);
  refresh();
}

void StrategyPanel::buildDataParallel(QVBoxLayout* column) {
  QFormLayout* f = group(column, tr("Data parallel"));
  addInt(fields_, f, tr("Replicas"), "/parallel/data_parallel", 1, kMaxDesignerRanks,
         [](const loom::Plan& p) { return p.parallel.data_parallel; }, [](loom::Plan& p, int v) { setDataParallel(p, v); });
  addInt(fields_, f, tr("Gradient accumulation"), "/parallel/grad_accumulation", 0, 4096,
         [](const loom::Plan& p) { return p.parallel.grad_accumulation; },
         [](loom::Plan& p, int v) { p.parallel.grad_accumulation = v; });
  addDouble(fields_, f, tr("Bucket (MiB)"), "/parallel/bucket_mb", 4096, 1,
            [](const loom::Plan& p) { return p.parallel.bucket_mb; }, [](loom::Plan& p, double v) { p.parallel.bucket_mb = v; });
  addChoice(fields_, f, tr("Backend"), "/parallel/backend", enumNames(&loom::backend_name, 2),
            [](const loom::Plan& p) { return static_cast<int>(p.parallel.backend); },
            [](loom::Plan& p, int v) { p.parallel.backend = static_cast<loom::CommBackend>(v); });
}

void StrategyPanel::buildPipeline(QVBoxLayout* column) {
  QFormLayout* f = group(column, tr("Pipeline"));
  addInt(fields_, f, tr("Stages"), "/parallel/stages", 1, 64, [](const loom::Plan& p) { return p.parallel.stages; },
         [](loom::Plan& p, int v) { setStages(p, v); });
  addInt(fields_, f, tr("Micro-batches"), "/parallel/microbatches", 0, 4096,
         [](const loom::Plan& p) { return p.parallel.microbatches; }, [](loom::Plan& p, int v) { p.parallel.microbatches = v; });
  addChoice(fields_, f, tr("Schedule"), "/parallel/schedule", enumNames(&loom::schedule_name, 2),
            [](const loom::Plan& p) { return static_cast<int>(p.parallel.schedule); },
            [](loom::Plan& p, int v) { p.parallel.schedule = static_cast<loom::Schedule>(v); });
}

void StrategyPanel::buildSync(QVBoxLayout* column) {
  QFormLayout* f = group(column, tr("Sync"));
  addChoice(fields_, f, tr("Mode"), "/parallel/sync/mode", enumNames(&loom::sync_mode_name, 4),
            [](const loom::Plan& p) { return static_cast<int>(p.parallel.sync.mode); },
            [](loom::Plan& p, int v) { setSyncMode(p, static_cast<loom::SyncMode>(v)); });
  addInt(fields_, f, tr("Staleness bound"), "/parallel/sync/bound", 0, 1000,
         [](const loom::Plan& p) { return p.parallel.sync.bound; }, [](loom::Plan& p, int v) { p.parallel.sync.bound = v; });
  addInt(fields_, f, tr("Averaging period"), "/parallel/sync/period", 0, 100000,
         [](const loom::Plan& p) { return p.parallel.sync.period; }, [](loom::Plan& p, int v) { p.parallel.sync.period = v; });
  addInt(fields_, f, tr("Servers"), "/parallel/sync/servers", 1, 64,
         [](const loom::Plan& p) { return p.parallel.sync.servers; }, [](loom::Plan& p, int v) { setServers(p, v); });
  addCheck(fields_, f, tr("Staleness-aware learning rate"), "/parallel/sync/staleness_aware_lr",
           [](const loom::Plan& p) { return p.parallel.sync.staleness_aware_lr; },
           [](loom::Plan& p, bool v) { p.parallel.sync.staleness_aware_lr = v; });
}

void StrategyPanel::buildTraining(QVBoxLayout* column) {
  QFormLayout* f = group(column, tr("Training"));
  constexpr int kBig = 1'000'000'000;
  addInt(fields_, f, tr("Global batch"), "/training/batch", 0, kBig,
         [](const loom::Plan& p) { return static_cast<int>(p.training.batch); }, [](loom::Plan& p, int v) { p.training.batch = v; });
  addInt(fields_, f, tr("Steps (0 = epochs)"), "/training/steps", 0, kBig,
         [](const loom::Plan& p) { return static_cast<int>(p.training.steps); }, [](loom::Plan& p, int v) { p.training.steps = v; });
  addInt(fields_, f, tr("Epochs"), "/training/epochs", 0, 100000, [](const loom::Plan& p) { return p.training.epochs; },
         [](loom::Plan& p, int v) { p.training.epochs = v; });
  addChoice(fields_, f, tr("Optimizer"), "/training/optimizer/type", enumNames(&loom::optimizer_name, 3),
            [](const loom::Plan& p) { return static_cast<int>(p.training.optimizer.kind); },
            [](loom::Plan& p, int v) { p.training.optimizer.kind = static_cast<loom::OptimizerKind>(v); });
  addDouble(fields_, f, tr("Learning rate"), "/training/optimizer/lr", 10, 6,
            [](const loom::Plan& p) { return p.training.optimizer.lr; }, [](loom::Plan& p, double v) { p.training.optimizer.lr = v; });
  addDouble(fields_, f, tr("Momentum"), "/training/optimizer/momentum", 1, 3,
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
    addInt(straggler_fields_, form, tr("Rank"), base + "/rank", -1, kMaxDesignerRanks,
           [at](const loom::Plan& p) { return at(p).rank; }, [mut](loom::Plan& p, int v) { mut(p).rank = v; });
    addDouble(straggler_fields_, form, tr("Slowdown (x)"), base + "/slowdown", 100, 2,
              [at](const loom::Plan& p) { return at(p).slowdown; }, [mut](loom::Plan& p, double v) { mut(p).slowdown = v; });
    addChoice(straggler_fields_, form, tr("Delay"), base + "/delay", enumNames(&loom::delay_name, 4),
              [at](const loom::Plan& p) { return static_cast<int>(at(p).delay); },
              [mut](loom::Plan& p, int v) { mut(p).delay = static_cast<loom::DelayDistribution>(v); });
    addDouble(straggler_fields_, form, tr("Mean delay (ms)"), base + "/delay_ms", 100000, 1,
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
      const QStringList errors = doc_->errorsAt(f.path);
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
  field.error->setStyleSheet(QStringLiteral("color: #c62828;"));
  field.error->setVisible(false);
  layout->addWidget(field.error);
  return box;
}

void StrategyPanel::addInt(std::vector<Field>& to, QFormLayout* form, const QString& label, const QString& path,
                           int min, int max, IntGet get, IntSet set) {
  auto* spin = new QSpinBox;
  spin->setRange(min, max);
  Field field{path, nullptr, nullptr, {}};
  form->addRow(label, withErrorLabel(spin, field));
  field.load = [this, spin, get] {
    const int value = get(doc_->plan());
    if (spin->value() != value) spin->setValue(value);  // leaves the cursor alone while typing
  };
  connect(spin, &QSpinBox::valueChanged, this, [this, label, path, set](int v) {
    doc_->edit(tr("Set %1").arg(label), [&](loom::Plan& p) { set(p, v); }, mergeKeyFor(path));
  });
  connect(spin, &QSpinBox::editingFinished, doc_, &PlanDocument::endMerge);
  to.push_back(std::move(field));
}

void StrategyPanel::addDouble(std::vector<Field>& to, QFormLayout* form, const QString& label, const QString& path,
                              double max, int decimals, DoubleGet get, DoubleSet set) {
  auto* spin = new QDoubleSpinBox;
  spin->setDecimals(decimals);
  spin->setRange(0, max);
  spin->setSingleStep(decimals >= 4 ? 0.0001 : 0.1);
  Field field{path, nullptr, nullptr, {}};
  form->addRow(label, withErrorLabel(spin, field));
  field.load = [this, spin, get] {
    const double value = get(doc_->plan());
    if (spin->value() != value) spin->setValue(value);
  };
  connect(spin, &QDoubleSpinBox::valueChanged, this, [this, label, path, set](double v) {
    doc_->edit(tr("Set %1").arg(label), [&](loom::Plan& p) { set(p, v); }, mergeKeyFor(path));
  });
  connect(spin, &QDoubleSpinBox::editingFinished, doc_, &PlanDocument::endMerge);
  to.push_back(std::move(field));
}

void StrategyPanel::addChoice(std::vector<Field>& to, QFormLayout* form, const QString& label, const QString& path,
                              const QStringList& items, IntGet get, IntSet set) {
  auto* combo = new QComboBox;
  combo->addItems(items);
  Field field{path, nullptr, nullptr, {}};
  form->addRow(label, withErrorLabel(combo, field));
  field.load = [this, combo, get] { combo->setCurrentIndex(get(doc_->plan())); };
  connect(combo, &QComboBox::currentIndexChanged, this, [this, label, set](int v) {
    if (v >= 0) doc_->edit(tr("Set %1").arg(label), [&](loom::Plan& p) { set(p, v); });
  });
  to.push_back(std::move(field));
}

void StrategyPanel::addCheck(std::vector<Field>& to, QFormLayout* form, const QString& label, const QString& path,
                             std::function<bool(const loom::Plan&)> get, std::function<void(loom::Plan&, bool)> set) {
  auto* check = new QCheckBox;
  Field field{path, nullptr, nullptr, {}};
  form->addRow(label, withErrorLabel(check, field));
  field.load = [this, check, get] { check->setChecked(get(doc_->plan())); };
  connect(check, &QCheckBox::toggled, this, [this, label, set](bool v) {
    doc_->edit(tr("Set %1").arg(label), [&](loom::Plan& p) { set(p, v); });
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

QWidget* StrategyPanel::fieldEditor(const QString& path) const {
  const Field* f = find(path);
  return f ? f->editor : nullptr;
}

QLabel* StrategyPanel::errorLabel(const QString& path) const {
  const Field* f = find(path);
  return f ? f->error : nullptr;
}

}  // namespace loom::ui
