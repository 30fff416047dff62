// Delegates for the designer tables (delegates.h).
#include "delegates.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QSpinBox>
#include <QToolTip>

#include "loom/core/plan_limits.h"

namespace loom::ui {

namespace {

// A layer setting's largest value: the plan's own limit (docs/plan-format.md, Limits).
int setting_maximum(const QString& key) {
  if (key == QLatin1String("kernel") || key == QLatin1String("stride") || key == QLatin1String("padding"))
    return static_cast<int>(loom::limits::kMaxKernel);
  return static_cast<int>(loom::limits::kMaxDimension);
}

// A spin box that says when a typed number is past its maximum, instead of refusing the
// digits without a word (a QSpinBox's own validator): the number stays on screen while
// typed, a tooltip names the limit, and finishing the edit keeps the maximum.
class BoundedSpinBox : public QSpinBox {
 public:
  BoundedSpinBox(const QString& key, QWidget* parent) : QSpinBox(parent), key_(key) {
    setRange(0, setting_maximum(key));
    setToolTip(tr("%1: at most %2 (a plan limit)").arg(key, QLocale().toString(maximum())));
  }

 protected:
  QValidator::State validate(QString& text, int& pos) const override {
    const QValidator::State state = QSpinBox::validate(text, pos);
    bool number = false;
    const qlonglong typed = text.toLongLong(&number);
    if (state != QValidator::Invalid || !number || typed <= maximum()) return state;
    QToolTip::showText(mapToGlobal(QPoint(0, height())),
                       tr("%1 is too large: %2 is at most %3 (a plan limit)")
                           .arg(QLocale().toString(typed), key_, QLocale().toString(maximum())),
                       const_cast<BoundedSpinBox*>(this));
    return QValidator::Intermediate;
  }
  void fixup(QString& text) const override {
    bool number = false;
    if (text.toLongLong(&number) > maximum() && number) text = QString::number(maximum());
    QSpinBox::fixup(text);
  }

 private:
  QString key_;
};

}  // namespace

QWidget* ChoiceDelegate::createEditor(QWidget* parent, const QStyleOptionViewItem&, const QModelIndex&) const {
  auto* combo = new QComboBox(parent);
  combo->addItems(choices_);
  return combo;
}

void ChoiceDelegate::setEditorData(QWidget* editor, const QModelIndex& index) const {
  static_cast<QComboBox*>(editor)->setCurrentText(index.data(Qt::EditRole).toString());
}

void ChoiceDelegate::setModelData(QWidget* editor, QAbstractItemModel* model, const QModelIndex& index) const {
  model->setData(index, static_cast<QComboBox*>(editor)->currentText(), Qt::EditRole);
}

// The editor's children are named after the map keys, so reading them back needs no
// bookkeeping beyond the widget tree.
QWidget* SettingsDelegate::createEditor(QWidget* parent, const QStyleOptionViewItem&, const QModelIndex& index) const {
  auto* box = new QWidget(parent);
  box->setAutoFillBackground(true);
  auto* row = new QHBoxLayout(box);
  row->setContentsMargins(2, 0, 2, 0);
  const QVariantMap map = index.data(Qt::EditRole).toMap();
  for (auto it = map.begin(); it != map.end(); ++it) {
    QWidget* field = nullptr;
    if (it.value().typeId() == QMetaType::Bool) {
      field = new QCheckBox(it.key(), box);
    } else if (it.value().typeId() == QMetaType::Double) {
      auto* spin = new QDoubleSpinBox(box);
      spin->setRange(0.0, 0.99);
      spin->setSingleStep(0.05);
      field = spin;
      row->addWidget(new QLabel(it.key(), box));
    } else {
      field = new BoundedSpinBox(it.key(), box);
      row->addWidget(new QLabel(it.key(), box));
    }
    field->setObjectName(it.key());
    row->addWidget(field);
  }
  return box;
}

void SettingsDelegate::setEditorData(QWidget* editor, const QModelIndex& index) const {
  const QVariantMap map = index.data(Qt::EditRole).toMap();
  for (auto it = map.begin(); it != map.end(); ++it) {
    QWidget* field = editor->findChild<QWidget*>(it.key());
    if (auto* check = qobject_cast<QCheckBox*>(field)) check->setChecked(it.value().toBool());
    if (auto* spin = qobject_cast<QSpinBox*>(field)) spin->setValue(it.value().toInt());
    if (auto* spin = qobject_cast<QDoubleSpinBox*>(field)) spin->setValue(it.value().toDouble());
  }
}

void SettingsDelegate::setModelData(QWidget* editor, QAbstractItemModel* model, const QModelIndex& index) const {
  QVariantMap map;
  for (QWidget* field : editor->findChildren<QWidget*>()) {
    if (auto* check = qobject_cast<QCheckBox*>(field)) map[field->objectName()] = check->isChecked();
    if (auto* spin = qobject_cast<QSpinBox*>(field)) map[field->objectName()] = spin->value();
    if (auto* spin = qobject_cast<QDoubleSpinBox*>(field)) map[field->objectName()] = spin->value();
  }
  model->setData(index, map, Qt::EditRole);
}

void SettingsDelegate::updateEditorGeometry(QWidget* editor, const QStyleOptionViewItem& option, const QModelIndex&) const {
  // A conv layer has five settings: let the editor grow past a narrow column.
  QRect r = option.rect;
  r.setWidth(std::max(r.width(), editor->sizeHint().width()));
  editor->setGeometry(r);
}

}  // namespace loom::ui
