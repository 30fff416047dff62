// Item delegates for the designer's tables: a combo box for fixed choices (layer type,
// device kind), a spin box for stages, and a small form for a layer's kind-specific
// settings (the LayerListModel Settings column edits a QVariantMap).
#pragma once

#include <QStringList>
#include <QStyledItemDelegate>

namespace loom::ui {

class ChoiceDelegate : public QStyledItemDelegate {
  Q_OBJECT
 public:
  ChoiceDelegate(QStringList choices, QObject* parent) : QStyledItemDelegate(parent), choices_(std::move(choices)) {}
  QWidget* createEditor(QWidget* parent, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
  void setEditorData(QWidget* editor, const QModelIndex& index) const override;
  void setModelData(QWidget* editor, QAbstractItemModel* model, const QModelIndex& index) const override;

 private:
  QStringList choices_;
};

// Edits a QVariantMap EditRole: one spin box (integers), double spin box (numbers in
// [0, 1), e.g. a dropout probability) or check box (flags) per key.
class SettingsDelegate : public QStyledItemDelegate {
  Q_OBJECT
 public:
  using QStyledItemDelegate::QStyledItemDelegate;
  QWidget* createEditor(QWidget* parent, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
  void setEditorData(QWidget* editor, const QModelIndex& index) const override;
  void setModelData(QWidget* editor, QAbstractItemModel* model, const QModelIndex& index) const override;
  void updateEditorGeometry(QWidget* editor, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
};

}  // namespace loom::ui
