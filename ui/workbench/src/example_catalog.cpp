// ExampleCatalog (example_catalog.h).
#include "loom/ui/workbench/example_catalog.h"

#include <QCoreApplication>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

namespace loom::ui {

ExampleCatalog::ExampleCatalog(const QByteArray& json) {
  QJsonParseError parse{};
  const QJsonDocument doc = QJsonDocument::fromJson(json, &parse);
  if (parse.error != QJsonParseError::NoError || !doc.isObject()) {
    error_ = QStringLiteral("examples index: %1").arg(parse.errorString());
    return;
  }
  for (const QJsonValue& v : doc.object().value(QLatin1String("examples")).toArray()) {
    const QJsonObject o = v.toObject();
    ExamplePlan e{o.value(QLatin1String("file")).toString(), o.value(QLatin1String("title")).toString(),
                  o.value(QLatin1String("description")).toString(), o.value(QLatin1String("look_at")).toString()};
    if (!e.file.isEmpty()) examples_.push_back(std::move(e));
  }
}

ExampleCatalog ExampleCatalog::builtIn() {
  QFile file(QStringLiteral(":/examples.json"));
  if (!file.open(QIODevice::ReadOnly)) return {};
  return ExampleCatalog(file.readAll());
}

const ExamplePlan* ExampleCatalog::find(const QString& file) const {
  for (const ExamplePlan& e : examples_) {
    if (e.file == file) return &e;
  }
  return nullptr;
}

QStringList ExampleCatalog::undescribed(const QStringList& files) const {
  QStringList out;
  for (const QString& f : files) {
    const ExamplePlan* e = find(f);
    if (e == nullptr || e->title.isEmpty() || e->description.isEmpty() || e->look_at.isEmpty()) out << f;
  }
  return out;
}

QString ExampleCatalog::toolTip(const ExamplePlan& example) {
  return example.description + QStringLiteral("\n") +
         QCoreApplication::translate("ExampleCatalog", "Look at: %1").arg(example.look_at);
}

}  // namespace loom::ui
