// The example plans' descriptions (resources/examples.json, compiled in beside the plans
// at :/examples.json): a title, one line on what the plan shows and what to look at
// after pressing Run, for File > Examples and the tour. The plan files cannot carry them:
// core's plan reader rejects unknown top-level keys. QtCore only: tested without a display.
#pragma once

#include <QByteArray>
#include <QString>
#include <QStringList>

#include <vector>

namespace loom::ui {

struct ExamplePlan {
  QString file;         // "gpipe_mlp.json", relative to the plans folder
  QString title;        // "Pipeline: GPipe, 2 stages, 8 micro-batches"
  QString description;  // what the plan is
  QString look_at;      // what to look at after Run
};

class ExampleCatalog {
 public:
  ExampleCatalog() = default;
  // Parses the index; on malformed JSON the catalog is empty and error() says why.
  explicit ExampleCatalog(const QByteArray& json);
  // The compiled-in index (:/examples.json); empty where the resource is not linked in.
  static ExampleCatalog builtIn();

  const std::vector<ExamplePlan>& examples() const { return examples_; }
  const ExamplePlan* find(const QString& file) const;  // by file name; nullptr when not listed
  QString error() const { return error_; }
  // The plan files of `files` (names) that the index does not describe.
  QStringList undescribed(const QStringList& files) const;
  // "Description\nLook at: ..." for a tooltip.
  static QString toolTip(const ExamplePlan& example);

 private:
  std::vector<ExamplePlan> examples_;
  QString error_;
};

}  // namespace loom::ui
