// RunBrowser: the Runs dock's table, filter, actions and background store work.
#include "loom/ui/workbench/run_browser.h"

#include <QAction>
#include <QApplication>
#include <QDir>
#include <QFileInfo>
#include <QFileSystemWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPainter>
#include <QPointer>
#include <QSortFilterProxyModel>
#include <QStyle>
#include <QTableView>
#include <QThreadPool>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <set>

#include "loom/analysis/compare.h"
#include "loom/store/run_store.h"
#include "loom/ui/item_roles.h"
#include "loom/ui/run_list_model.h"
#include "loom/ui/run_rows.h"

namespace loom::ui {

namespace {

QString qs(const std::string& text) { return QString::fromStdString(text); }

QToolButton* tool_button(QAction* action) {
  auto* button = new QToolButton;
  button->setDefaultAction(action);
  button->setToolButtonStyle(Qt::ToolButtonTextOnly);
  button->setAutoRaise(true);
  return button;
}

// The store line: as wide as its text where the row has room (the filter box gives way
// first), ending in "…" where it has not, instead of cut mid-word ("(no runs" for "(no
// runs yet)" at 1280x720). The full path is in its tooltip.
class StoreLabel : public QLabel {
 public:
  QSize minimumSizeHint() const override { return {fontMetrics().horizontalAdvance(QStringLiteral("Store: \u2026")), QLabel::minimumSizeHint().height()}; }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter painter(this);
    const QRect r = contentsRect();
    style()->drawItemText(&painter, r, Qt::AlignLeft | Qt::AlignVCenter, palette(), isEnabled(),
                          fontMetrics().elidedText(text(), Qt::ElideRight, r.width()), foregroundRole());
  }
};

}  // namespace

RunBrowser::RunBrowser(QWidget* parent) : QWidget(parent) {
  model_ = new RunListModel(this);
  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(SortRole);
  proxy_->setFilterRole(FilterRole);
  proxy_->setFilterKeyColumn(0);
  proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);

  table_ = new QTableView;
  table_->setObjectName("RunTable");
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(RunListModel::Id, Qt::DescendingOrder);  // newest first
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setContextMenuPolicy(Qt::CustomContextMenu);
  table_->setWordWrap(false);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  table_->verticalHeader()->hide();
  // Rows as high as a line of text (the style's default is about 30 px): at 1280x720 the
  // dock then lists 6 runs where it listed 4.
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  table_->setToolTip(tr("Double-click a run to show it; select 2 to 6 and choose Compare"));
  connect(table_, &QTableView::doubleClicked, this,
          [this](const QModelIndex& index) { emit openRequested(index.data(RunIdRole).toLongLong()); });
  connect(table_, &QWidget::customContextMenuRequested, this, &RunBrowser::showContextMenu);
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &RunBrowser::updateActions);

  filter_ = new QLineEdit;
  filter_->setObjectName("RunFilter");
  filter_->setPlaceholderText(tr("Filter: name, mode, device, status, tag or #id"));
  filter_->setClearButtonEnabled(true);
  connect(filter_, &QLineEdit::textChanged, proxy_, &QSortFilterProxyModel::setFilterFixedString);

  store_label_ = new StoreLabel;
  store_label_->setTextFormat(Qt::PlainText);

  createActions();
  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(4, 2, 4, 2);
  bar->addWidget(filter_, 2);
  for (QAction* a : {open_, compare_, rename_, tag_, delete_, open_store_}) bar->addWidget(tool_button(a));
  bar->addWidget(store_label_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addLayout(bar);
  layout->addWidget(table_, 1);
  connect(model_, &QAbstractItemModel::modelReset, this, &RunBrowser::updateActions);
  updateActions();
  watchForChanges();
}

// Runs added or finished by another process (loom-cli, a run launched from another
// window) reach the list without a click: the store's folder and files are watched, and a
// change is looked at once the changes have paused or at most once a second. Only a new
// signature of the store's contents (store_signature) reloads the list: reading the list
// itself creates and removes SQLite's -wal file, which must not start another read.
void RunBrowser::watchForChanges() {
  watcher_ = new QFileSystemWatcher(this);
  store_changed_ = new QTimer(this);
  store_changed_->setSingleShot(true);
  store_changed_->setInterval(kStoreWatchDelayMs);
  auto changed = [this] {
    if (!store_changed_->isActive()) store_changed_->start();
  };
  connect(watcher_, &QFileSystemWatcher::fileChanged, this, changed);
  connect(watcher_, &QFileSystemWatcher::directoryChanged, this, changed);
  connect(store_changed_, &QTimer::timeout, this, [this] {
    watchStoreFiles();  // a file removed and made again is watched afresh
    const QString now = store_signature(path_);
    if (now == signature_) return;
    signature_ = now;
    refresh();
  });
}

void RunBrowser::watchStoreFiles() {
  if (path_.isEmpty()) return;
  const QString folder = QFileInfo(path_).absolutePath();
  QStringList wanted;
  for (const QString& p : {folder, path_, path_ + QStringLiteral("-wal")})
    if (QFileInfo::exists(p) && !watcher_->files().contains(p) && !watcher_->directories().contains(p)) wanted << p;
  if (!wanted.isEmpty()) watcher_->addPaths(wanted);
}

// The store's contents as its files show them: the main file's size and time, and the
// write-ahead log's while it holds anything (an empty or missing one is the same store).
QString RunBrowser::store_signature(const QString& path) {
  const QFileInfo db(path), wal(path + QStringLiteral("-wal"));
  QString signature = db.exists() ? QStringLiteral("%1@%2").arg(db.size()).arg(db.lastModified().toMSecsSinceEpoch())
                                  : QStringLiteral("none");
  if (wal.exists() && wal.size() > 0)
    signature += QStringLiteral(" wal %1@%2").arg(wal.size()).arg(wal.lastModified().toMSecsSinceEpoch());
  return signature;
}

void RunBrowser::createActions() {
  open_ = new QAction(tr("Open"), this);
  open_->setToolTip(tr("Show the selected run in the timeline and result views"));
  connect(open_, &QAction::triggered, this, [this] {
    const QList<qint64> ids = selectedRunIds();
    if (ids.size() == 1) emit openRequested(ids.front());
  });
  compare_ = new QAction(tr("Compare"), this);
  compare_->setToolTip(tr("Compare the selected runs (2 to 6): curves, timelines, metrics, phases"));
  connect(compare_, &QAction::triggered, this, [this] {
    const QList<qint64> ids = selectedRunIds();
    if (ids.size() >= loom::analysis::kMinCompared && ids.size() <= loom::analysis::kMaxCompared)
      emit compareRequested(ids);
  });
  rename_ = new QAction(tr("Rename…"), this);
  connect(rename_, &QAction::triggered, this, &RunBrowser::askRename);
  tag_ = new QAction(tr("Tags…"), this);
  tag_->setToolTip(tr("Label the selected run; the filter box finds runs by tag"));
  connect(tag_, &QAction::triggered, this, &RunBrowser::askTags);
  delete_ = new QAction(tr("Delete…"), this);
  delete_->setToolTip(tr("Remove the selected runs and everything they recorded from the store"));
  connect(delete_, &QAction::triggered, this, &RunBrowser::askDelete);
  open_store_ = new QAction(tr("Open store…"), this);
  open_store_->setToolTip(tr("List the runs of another run database (.db)"));
  connect(open_store_, &QAction::triggered, this, &RunBrowser::openStoreRequested);
}

void RunBrowser::updateActions() {
  const int n = static_cast<int>(selectedRunIds().size());
  open_->setEnabled(n == 1);
  rename_->setEnabled(n == 1);
  tag_->setEnabled(n == 1);
  delete_->setEnabled(n >= 1);
  compare_->setEnabled(n >= loom::analysis::kMinCompared && n <= loom::analysis::kMaxCompared);
  compare_->setText(n > loom::analysis::kMaxCompared ? tr("Compare (at most %1)").arg(loom::analysis::kMaxCompared)
                                                     : tr("Compare"));
}

void RunBrowser::showContextMenu(const QPoint& pos) {
  QMenu menu(this);
  menu.addActions({open_, compare_});
  menu.addSeparator();
  menu.addActions({rename_, tag_, delete_});
  menu.addSeparator();
  menu.addAction(open_store_);
  menu.exec(table_->viewport()->mapToGlobal(pos));
}

void RunBrowser::setDatabase(const QString& path) {
  const QStringList watched = watcher_->files() + watcher_->directories();
  if (!watched.isEmpty()) watcher_->removePaths(watched);
  path_ = path;
  signature_ = store_signature(path_);
  watchStoreFiles();
  showStore({}, {});
  refresh();
}

void RunBrowser::showStore(const QString& note, const QString& detail) {
  const QString name = QFileInfo(path_).fileName();
  store_label_->setText(note.isEmpty() ? tr("Store: %1").arg(name) : tr("Store: %1 (%2)").arg(name, note));
  store_label_->setToolTip(detail.isEmpty() ? path_ : path_ + QStringLiteral("\n") + detail);
}

// Reads the run list on the thread pool; the result lands back on the GUI thread, and is
// dropped if the browser is gone or a newer reload started meanwhile.
void RunBrowser::refresh() {
  QPointer<RunBrowser> self(this);
  const quint64 generation = ++reload_generation_;
  const std::string path = path_.toStdString();
  QThreadPool::globalInstance()->start([self, path, generation] {
    auto rows = load_run_rows(path);
    QMetaObject::invokeMethod(qApp, [self, rows = std::move(rows), generation, path_text = path]() mutable {
      if (!self || generation != self->reload_generation_) return;
      const QList<qint64> selected = self->selectedRunIds();
      const QString path = QString::fromStdString(path_text);
      if (rows.ok()) {
        // Columns fit their text when a store is first listed; after that the user's widths stay.
        const bool fit = self->loaded_path_ != path || self->model_->rowCount() == 0;
        self->model_->setRows(std::move(*rows));
        if (fit) self->table_->resizeColumnsToContents();
        self->loaded_path_ = path;
        self->showStore({}, {});
      } else {
        // A transient failure (the store busy) keeps the rows; another store's rows must go,
        // or an edit would hit the wrong run.
        if (self->loaded_path_ != path) self->model_->setRows({});
        const bool missing = rows.error().code == loom::ErrorCode::NotFound;
        self->showStore(missing ? tr("no runs yet") : tr("not readable"), QString::fromStdString(rows.error().describe()));
      }
      self->selectRuns(selected);
      emit self->listReloaded();
    });
  });
}

QList<qint64> RunBrowser::selectedRunIds() const {
  QList<qint64> ids;
  const QModelIndexList rows = table_->selectionModel()->selectedRows();
  std::vector<std::pair<int, qint64>> ordered;
  for (const QModelIndex& index : rows) ordered.emplace_back(index.row(), index.data(RunIdRole).toLongLong());
  std::sort(ordered.begin(), ordered.end());
  for (const auto& [row, id] : ordered) ids.append(id);
  return ids;
}

void RunBrowser::selectRuns(const QList<qint64>& ids) {
  QItemSelection selection;
  for (qint64 id : ids) {
    const int source_row = model_->rowForRunId(id);
    if (source_row < 0) continue;
    const QModelIndex index = proxy_->mapFromSource(model_->index(source_row, 0));
    if (index.isValid()) selection.select(index, index);
  }
  table_->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  updateActions();
}

std::optional<QString> RunBrowser::askText(const QString& title, const QString& label, const QString& initial) {
  if (text_prompt_) return text_prompt_(title, label, initial);
  bool ok = false;
  const QString text = QInputDialog::getText(this, title, label, QLineEdit::Normal, initial, &ok);
  return ok ? std::optional<QString>(text) : std::nullopt;
}

void RunBrowser::askRename() {
  const QList<qint64> ids = selectedRunIds();
  if (ids.size() != 1) return;
  const RunRow& run = model_->run(model_->rowForRunId(ids.front()));
  const auto name = askText(tr("Rename run %1").arg(run.id), tr("Name:"), qs(run.name));
  if (name) renameRun(run.id, *name);
}

void RunBrowser::askTags() {
  const QList<qint64> ids = selectedRunIds();
  if (ids.size() != 1) return;
  const RunRow& run = model_->run(model_->rowForRunId(ids.front()));
  QStringList current;
  for (const std::string& t : run.tags) current << qs(t);
  const auto text = askText(tr("Tags of run %1").arg(run.id), tr("Tags, separated by commas (empty removes all):"),
                            current.join(QStringLiteral(", ")));
  if (!text) return;
  QStringList tags;
  for (const QString& t : text->split(QLatin1Char(','), Qt::SkipEmptyParts))
    if (!t.trimmed().isEmpty()) tags << t.trimmed();
  setTags(run.id, tags);
}

void RunBrowser::askDelete() {
  const QList<qint64> ids = selectedRunIds();
  if (ids.isEmpty()) return;
  QStringList names;
  for (qint64 id : ids) names << QStringLiteral("#%1 %2").arg(id).arg(qs(model_->run(model_->rowForRunId(id)).name));
  const QString question =
      (ids.size() == 1 ? tr("Delete this run from %1?") : tr("Delete %1 runs from %2?").arg(ids.size()))
          .arg(QFileInfo(path_).fileName()) +
      QStringLiteral("\n\n%1\n\n").arg(names.join(QStringLiteral("\n"))) +
      tr("Their events, metrics, updates and tags are removed from the store; this cannot be undone.");
  const bool yes = delete_prompt_ ? delete_prompt_(question)
                                  : QMessageBox::question(this, tr("Delete runs"), question,
                                                          QMessageBox::Yes | QMessageBox::Cancel,
                                                          QMessageBox::Cancel) == QMessageBox::Yes;
  if (yes) deleteRuns(ids);
}

void RunBrowser::renameRun(qint64 id, const QString& name) {
  const std::string text = name.trimmed().toStdString();
  runEdit(tr("Renaming run %1 failed").arg(id), [id, text](const std::string& path) -> QString {
    auto store = loom::store::RunStore::open(path);
    if (!store.ok()) return qs(store.error().describe());
    const loom::Status s = store->rename_run(id, text);
    return s.ok() ? QString() : qs(s.error().describe());
  });
}

void RunBrowser::setTags(qint64 id, const QStringList& tags) {
  std::vector<std::string> list;
  for (const QString& t : tags) list.push_back(t.toStdString());
  runEdit(tr("Tagging run %1 failed").arg(id), [id, list](const std::string& path) -> QString {
    auto store = loom::store::RunStore::open(path);
    if (!store.ok()) return qs(store.error().describe());
    const loom::Status s = store->set_tags(id, list);
    return s.ok() ? QString() : qs(s.error().describe());
  });
}

// Each run in its own transaction: a running one is refused (its owner still writes it)
// while the others go.
void RunBrowser::deleteRuns(const QList<qint64>& ids) {
  runEdit(tr("Deleting runs failed"), [ids](const std::string& path) -> QString {
    auto store = loom::store::RunStore::open(path);
    if (!store.ok()) return qs(store.error().describe());
    QStringList errors;
    for (qint64 id : ids) {
      const loom::Status s = store->delete_run(id);
      if (!s.ok()) errors << qs(s.error().describe());
    }
    return errors.join(QStringLiteral("\n"));
  });
}

void RunBrowser::runEdit(const QString& what, std::function<QString(const std::string& path)> edit) {
  QPointer<RunBrowser> self(this);
  const std::string path = path_.toStdString();
  QThreadPool::globalInstance()->start([self, path, what, edit = std::move(edit)] {
    const QString error = edit(path);
    QMetaObject::invokeMethod(qApp, [self, what, error] {
      if (!self) return;
      if (!error.isEmpty()) emit self->errorOccurred(what, error);
      auto once = std::make_shared<QMetaObject::Connection>();
      *once = connect(self, &RunBrowser::listReloaded, self, [self, once] {
        QObject::disconnect(*once);
        emit self->editFinished();
      });
      self->refresh();
    });
  });
}

}  // namespace loom::ui
