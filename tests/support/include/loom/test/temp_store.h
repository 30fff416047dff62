// A run store in a fresh temporary folder (runs.db) that goes with it when the test ends.
// It is a RunStore: tests call it and pass it on as they would the store they opened.
#pragma once

#include <QTemporaryDir>

#include "loom/store/run_store.h"
#include "loom/test/expect.h"

namespace loom::testing {

namespace detail {
// A base, so the folder is made before the store opens in it and removed after it closes.
struct TempFolder {
  QTemporaryDir dir;
};
}  // namespace detail

class TempStore : private detail::TempFolder, public loom::store::RunStore {
 public:
  TempStore() : RunStore(must(RunStore::open(dir.filePath("runs.db").toStdString()))) {}
};

}  // namespace loom::testing
