// Files for tests inside a temporary folder: one per test function, so a test never reads
// what the one before it left behind.
#pragma once

#include <QString>
#include <QTemporaryDir>
#include <QTest>

namespace loom::testing {

// `dir`/runs-<test function>.db
inline QString per_test_db(const QTemporaryDir& dir) {
  return dir.filePath(QStringLiteral("runs-%1.db").arg(QString::fromLatin1(QTest::currentTestFunction())));
}

}  // namespace loom::testing
