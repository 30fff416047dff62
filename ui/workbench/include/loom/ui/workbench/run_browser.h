// The Runs dock: every run of the open store in a sortable table (RunListModel behind a
// filter box), several selectable at once, with the actions a run needs: open it, compare
// 2 to 6 of them, rename, tag, delete (after a confirmation naming what goes), and open
// another store file. Reads and edits run on the thread pool with their own RunStore (one
// connection per thread), so the window never waits on SQLite; an edit reloads the list
// when it is done, and a failure is reported through errorOccurred, the rows kept. The
// store's files are watched, so runs another process adds or finishes are listed too.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <QWidget>

#include <functional>
#include <optional>

class QLabel;
class QLineEdit;
class QMenu;
class QSortFilterProxyModel;
class QTableView;
class QToolButton;
class QAction;
class QFileSystemWatcher;
class QTimer;

namespace loom::ui {

class RunListModel;

class RunBrowser : public QWidget {
  Q_OBJECT

 public:
  explicit RunBrowser(QWidget* parent = nullptr);

  // Lists the runs of this store (reloading in the background), and watches it.
  void setDatabase(const QString& path);
  static constexpr int kStoreWatchDelayMs = 1000;  // a change is looked at within this
  QString database() const { return path_; }
  void refresh();

  RunListModel* model() const { return model_; }
  QSortFilterProxyModel* proxy() const { return proxy_; }
  QTableView* table() const { return table_; }
  QLineEdit* filterBox() const { return filter_; }
  // Ids of the selected runs, in the order they are listed.
  QList<qint64> selectedRunIds() const;
  // Selects these runs (those listed; others are ignored) and nothing else.
  void selectRuns(const QList<qint64>& ids);

  QAction* openAction() const { return open_; }
  QAction* compareAction() const { return compare_; }
  QAction* renameAction() const { return rename_; }
  QAction* tagAction() const { return tag_; }
  QAction* deleteAction() const { return delete_; }
  QAction* openStoreAction() const { return open_store_; }

  // The edits, as the actions run them once their questions are answered.
  void renameRun(qint64 id, const QString& name);
  void setTags(qint64 id, const QStringList& tags);
  void deleteRuns(const QList<qint64>& ids);

  // Tests and scripts answer the questions without dialogs: a text (nullopt cancels) and a
  // yes/no to deleting.
  using TextPrompt = std::function<std::optional<QString>(const QString& title, const QString& label,
                                                          const QString& initial)>;
  void setTextPrompt(TextPrompt prompt) { text_prompt_ = std::move(prompt); }
  void setDeletePrompt(std::function<bool(const QString& question)> prompt) { delete_prompt_ = std::move(prompt); }

 signals:
  void openRequested(qint64 runId);
  void compareRequested(const QList<qint64>& runIds);
  void openStoreRequested();
  void errorOccurred(const QString& title, const QString& text);
  void listReloaded();  // the rows of the latest reload are in the model
  void editFinished();  // an edit was stored (or failed) and the list reloaded

 private:
  void createActions();
  void updateActions();
  void watchForChanges();
  void watchStoreFiles();
  static QString store_signature(const QString& path);
  void showContextMenu(const QPoint& pos);
  // The store's name beside the filter, with a note ("no runs yet") and details as tooltip.
  void showStore(const QString& note, const QString& detail);
  void askRename();
  void askTags();
  void askDelete();
  std::optional<QString> askText(const QString& title, const QString& label, const QString& initial);
  // Runs `edit` with a store of path_ on the thread pool; then reloads, reporting failure.
  void runEdit(const QString& what, std::function<QString(const std::string& path)> edit);

  RunListModel* model_ = nullptr;
  QSortFilterProxyModel* proxy_ = nullptr;
  QTableView* table_ = nullptr;
  QLineEdit* filter_ = nullptr;
  QLabel* store_label_ = nullptr;
  QAction *open_ = nullptr, *compare_ = nullptr, *rename_ = nullptr, *tag_ = nullptr, *delete_ = nullptr;
  QAction* open_store_ = nullptr;
  QString path_;
  QString loaded_path_;           // the store the rows came from
  QFileSystemWatcher* watcher_ = nullptr;
  QTimer* store_changed_ = nullptr;  // throttles reloads while the store keeps changing
  QString signature_;                // store_signature when the list was last reloaded for a change
  quint64 reload_generation_ = 0;  // a slower, older reload must not replace a newer one
  TextPrompt text_prompt_;
  std::function<bool(const QString&)> delete_prompt_;
};

}  // namespace loom::ui
