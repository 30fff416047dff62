// Delegates for the designer tables (delegates.h).
#include "delegates.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>

namespace loom::ui {

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
      auto* spin = new QSpinBox(box);
      spin->setRange(0, 1'000'000);
      field = spin;
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
