// The strategy form: data parallel, pipeline, sync, stragglers and training settings of
// a PlanDocument in group boxes, inside a scroll area (one column in a narrow dock, two
// when there is room). Each field shows the validation errors at its JSON path in a red
// label under it, in the window's words; its label and editor carry a tooltip (what the
// field is, the formula, what the value means for this plan); it is enabled only when
// the strategy uses it, and edits through PlanDocument::edit with an undo text naming
// the change ("Change Global batch to 128"); spin-box typing merges into one undo step
// per field.
#pragma once

#include <QWidget>

#include <functional>
#include <vector>

#include "loom/ui/designer/plan_document.h"

class QFormLayout;
class QGridLayout;
class QGroupBox;
class QLabel;
class QResizeEvent;
class QVBoxLayout;

namespace loom::ui {

class StrategyPanel : public QWidget {
  Q_OBJECT

 public:
  explicit StrategyPanel(PlanDocument* doc, QWidget* parent = nullptr);

  // The editor and the error label of a field by its JSON path ("/training/batch",
  // "/parallel/stragglers/0/rank"); nullptr when the form has no such field.
  QWidget* fieldEditor(const QString& path) const;
  QLabel* errorLabel(const QString& path) const;
  QLabel* fieldLabel(const QString& path) const;  // the form's label of the field
  int columns() const { return columns_; }

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  struct Field {
    QString path;
    QWidget* editor = nullptr;
    QLabel* error = nullptr;
    QLabel* label = nullptr;
    std::function<void()> load;  // plan -> editor; called with the editor's signals blocked
  };
  using IntGet = std::function<int(const loom::Plan&)>;
  using IntSet = std::function<void(loom::Plan&, int)>;
  using DoubleGet = std::function<double(const loom::Plan&)>;
  using DoubleSet = std::function<void(loom::Plan&, double)>;

  void buildDataParallel();
  void buildPipeline();
  void buildSync();
  void buildTraining();
  void rebuildStragglers();
  void refresh();
  void reflow(int columns);
  QString term_tooltip_for_stragglers() const;
  static QString undoName(const QString& path);

  void addRow(QFormLayout* form, QWidget* editor, Field& field);
  void addInt(std::vector<Field>& to, QFormLayout* form, const QString& path, int min, int max, IntGet get, IntSet set);
  void addDouble(std::vector<Field>& to, QFormLayout* form, const QString& path, double max, int decimals,
                 DoubleGet get, DoubleSet set);
  void addChoice(std::vector<Field>& to, QFormLayout* form, const QString& path, const QStringList& items, IntGet get,
                 IntSet set);
  void addCheck(std::vector<Field>& to, QFormLayout* form, const QString& path,
                std::function<bool(const loom::Plan&)> get, std::function<void(loom::Plan&, bool)> set);
  // Wraps an editor with its error label for a form row.
  QWidget* withErrorLabel(QWidget* editor, Field& field);
  const Field* find(const QString& path) const;

  PlanDocument* doc_;
  QGridLayout* grid_ = nullptr;
  std::vector<QGroupBox*> boxes_;  // data parallel, pipeline, sync, training, stragglers
  int columns_ = 0;
  std::vector<Field> fields_;
  std::vector<Field> straggler_fields_;  // rebuilt when the number of stragglers changes
  QVBoxLayout* stragglers_layout_ = nullptr;  // inside the Stragglers group
  QWidget* stragglers_inner_ = nullptr;       // replaced wholesale on rebuild
  int straggler_rows_ = -1;
};

}  // namespace loom::ui
