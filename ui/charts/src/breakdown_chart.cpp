// BreakdownChart: where each rank's wall time went, as horizontal stacked bars built from
// breakdown_segments (chart_series.h), plus a thin bar for communication hidden behind
// work, which must not be stacked (it overlaps the compute/optimizer/data segments), and
// for pipelined runs a line per stage with the measured bubble against its theory.
#include "loom/ui/charts/training_charts.h"

#include <algorithm>
#include <cmath>

#include <QEvent>
#include <QHelpEvent>
#include <QResizeEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QStringList>
#include <QToolTip>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include "loom/ui/colors.h"
#include "loom/ui/glossary.h"
#include "loom/ui/charts/chart_export.h"
#include "plot_style.h"

namespace loom::ui::charts {

namespace {

// Bar geometry in key units (one unit per rank): the stacked bar is centred on the rank,
// the hidden-communication bar sits just under it (the rank axis is reversed so rank 0 is
// on top, hence "+").
constexpr double kStackWidth = 0.5;
constexpr double kHiddenWidth = 0.16;
constexpr double kHiddenOffset = 0.38;

// A bar's name (its "segment" property), legend text and colour are its category's in
// the one table of kinds and categories (span_kinds.h), as on the timeline.
struct SegmentSpec {
  BreakdownCategory category;
  double BreakdownSegments::*field;
  const char* name() const { return breakdown_category(category).key; }
  QString legend() const { return breakdown_category(category).displayName(); }
};

// Stack order, left to right: work first, then what the rank waited for.
constexpr SegmentSpec kStack[] = {
    {BreakdownCategory::Compute, &BreakdownSegments::compute},
    {BreakdownCategory::Optimizer, &BreakdownSegments::optimizer},
    {BreakdownCategory::Data, &BreakdownSegments::data},
    {BreakdownCategory::ExposedCommunication, &BreakdownSegments::exposed_comm},
    {BreakdownCategory::Idle, &BreakdownSegments::idle},
    {BreakdownCategory::Descheduled, &BreakdownSegments::descheduled},
};

const char* const kHiddenExplanation =
    "The thin bar under each rank is communication hidden behind work: it ran while the "
    "rank computed, so it is already inside the stacked bar and is not added to it.";

QCPBars* make_bars(QCustomPlot* plot, BreakdownCategory category, const QString& legend, double width) {
  auto* bars = new QCPBars(plot->yAxis, plot->xAxis);  // key axis vertical: horizontal bars
  bars->setName(legend);
  bars->setProperty("segment", QString::fromLatin1(breakdown_category(category).key));
  bars->setProperty("category", static_cast<int>(category));
  bars->setWidth(width);
  bars->setStackingGap(0);
  return bars;
}

// The table's colour for the palette; the hidden bar is patterned: an overlay, not a part.
void color_bars(QCPBars* bars, bool dark) {
  const auto category = static_cast<BreakdownCategory>(bars->property("category").toInt());
  const QColor color = breakdown_color(category, dark);
  const bool hidden = category == BreakdownCategory::HiddenCommunication;
  bars->setBrush(hidden ? QBrush(color, Qt::Dense3Pattern) : QBrush(color));
  bars->setPen(QPen(dark ? color.lighter(125) : color.darker(130), 0));
}

QString percent_or_na(double fraction) {
  return std::isfinite(fraction) ? QStringLiteral("%1%").arg(fraction * 100.0, 0, 'f', 0) : QStringLiteral("n/a");
}

// The part between two fractions, in the same unit as the whole ("22%", "-3%"), n/a where
// either is unknown: every part of a bubble is a share of the same stage step time.
QString part_or_na(double a, double b) {
  return std::isfinite(a) && std::isfinite(b) ? percent_or_na(a - b) : QStringLiteral("n/a");
}

bool negative(double a, double b) { return std::isfinite(a) && std::isfinite(b) && std::lround((a - b) * 100.0) < 0; }

// One stage's bubble with its parts (analysis.h StageStats; docs/figures.md).
QString stage_line(const loom::analysis::StageStats& st, const QString& convention) {
  return BreakdownChart::tr("stage %1: busy %2 s, bubble %3 %4 = schedule %5 + imbalance %6 + comm/jitter %7 "
                            "(textbook %8)")
      .arg(st.stage)
      .arg(st.busy_s, 0, 'f', 3)
      .arg(percent_or_na(st.bubble_fraction), convention, percent_or_na(st.bubble_schedule),
           part_or_na(st.bubble_theory, st.bubble_schedule), part_or_na(st.bubble_fraction, st.bubble_theory),
           percent_or_na(st.bubble_textbook));
}

// What a negative part means, said only where one is shown.
QStringList negative_parts_explained(const loom::analysis::PipelineStats& stats) {
  bool imbalance = false, rest = false;
  for (const auto& st : stats.stages_stats) {
    imbalance = imbalance || negative(st.bubble_theory, st.bubble_schedule);
    rest = rest || negative(st.bubble_fraction, st.bubble_theory);
  }
  QStringList lines;
  // One line for both, short enough not to wrap in a 1280x720 window's dock.
  QStringList parts;
  if (imbalance) parts << BreakdownChart::tr("imbalance: its own op times leave it less idle than equal stages");
  if (rest) parts << BreakdownChart::tr("comm/jitter: it idled less than the replay predicts");
  if (!parts.isEmpty()) lines << BreakdownChart::tr("Negative %1.").arg(parts.join(QStringLiteral("; ")));
  return lines;
}

// Legend entries per column: no more than fit the plot's height, so that no entry is cut,
// and spread evenly over the columns that needs (7 entries where 5 fit: 4 and 3).
int legend_rows_that_fit(const QCPLegend* legend, int height) {
  int row_height = 0, items = 0;
  for (int i = 0; i < legend->itemCount(); ++i) {
    if (const QCPAbstractLegendItem* item = legend->item(i)) {
      row_height = std::max(row_height, item->minimumOuterSizeHint().height());
      ++items;
    }
  }
  const QMargins m = legend->margins();
  const int room = height - m.top() - m.bottom() - 4;
  items = std::max(1, items);
  const int fit = std::clamp(room / std::max(1, row_height + legend->rowSpacing()), 1, items);
  const int columns = (items + fit - 1) / fit;
  return (items + columns - 1) / columns;
}

}  // namespace

BreakdownChart::BreakdownChart(QWidget* parent) : QWidget(parent) {
  buildPlot();
  pipeline_label_ = new QLabel(this);
  pipeline_label_->setObjectName("pipelineLabel");
  pipeline_label_->setContentsMargins(6, 0, 6, 4);
  pipeline_label_->setWordWrap(true);
  pipeline_label_->setToolTip(
      tr("Bubble: the share of a stage's steady step time when its compute stream did no work "
         "(never above 100%), for GPipe and 1F1B alike. Textbook: (p-1)/(m+p-1) for equal stages. "
         "Schedule: the schedule replayed with equal stages and free communication. Imbalance: the "
         "replay with these stages' own op times, minus the schedule. Comm/jitter: the rest."));
  pipeline_label_->hide();
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addWidget(plot_, 1);
  layout->addWidget(pipeline_label_);
  applyPalette();
}

void BreakdownChart::buildPlot() {
  plot_ = new QCustomPlot(this);
  add_save_menu(plot_);
  // With the stage lines, the note on negative parts and a warning under it (five lines),
  // it fits a 1280x720 window's dock (about 195 px) without scrolling. A dock's scroll area
  // sizes a word-wrapped text's layout by its items' preferred heights, and the plot's
  // (about 120 px) made it scroll 13 px: the plot's preference is ignored, its minimum
  // kept, and it takes whatever height is left.
  plot_->setMinimumHeight(90);
  plot_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Ignored);
  plot_->setMouseTracking(true);
  // No fixed tooltip: Qt would show it over the one the pointer's bar asks for (eventFilter).
  plot_->installEventFilter(this);
  QCPBars* below = nullptr;
  for (const SegmentSpec& spec : kStack) {
    QCPBars* bars = make_bars(plot_, spec.category, spec.legend(), kStackWidth);
    if (below) bars->moveAbove(below);
    below = bars;
  }
  // One line, as every entry: a taller entry would set the height of every legend row.
  make_bars(plot_, BreakdownCategory::HiddenCommunication,
            tr("%1 (thin bar)").arg(breakdown_category(BreakdownCategory::HiddenCommunication).displayName()),
            kHiddenWidth);
  plot_->yAxis->setRangeReversed(true);
  plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerText>::create());
  plot_->yAxis->grid()->setVisible(false);
  // No title row: the dock is named Breakdown, and at 1280x720 every row counts.
  plot_->xAxis->setLabel(tr("seconds of each rank's training window"));
  detail::put_legend_right(plot_);
  connect(plot_, &QCustomPlot::mouseMove, this, &BreakdownChart::showToolTip);
}

QCPBars* BreakdownChart::bars(const QString& segment) const {
  for (int i = 0; i < plot_->plottableCount(); ++i) {
    auto* b = qobject_cast<QCPBars*>(plot_->plottable(i));
    if (b && b->property("segment").toString() == segment) return b;
  }
  return nullptr;
}

void BreakdownChart::setBreakdown(const std::vector<loom::analysis::RankBreakdown>& ranks) {
  ranks_ = ranks;
  QVector<double> keys, hidden_keys, hidden;
  std::vector<QVector<double>> values(std::size(kStack));
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  double longest = 0;
  for (const auto& rank : ranks_) {
    const BreakdownSegments s = breakdown_segments(rank);
    keys.append(rank.rank);
    for (std::size_t i = 0; i < std::size(kStack); ++i) values[i].append(s.*kStack[i].field);
    hidden_keys.append(rank.rank + kHiddenOffset);
    hidden.append(s.hidden_comm);
    ticker->addTick(rank.rank, tr("rank %1").arg(rank.rank));
    longest = std::max({longest, s.stacked(), s.hidden_comm});
  }
  for (std::size_t i = 0; i < std::size(kStack); ++i) bars(kStack[i].name())->setData(keys, values[i]);
  bars("hidden_comm")->setData(hidden_keys, hidden);
  plot_->yAxis->setTicker(ticker);
  if (ranks_.empty()) {
    plot_->yAxis->setRange(-0.5, 0.5);
  } else {
    const auto [lo, hi] = std::minmax_element(keys.begin(), keys.end());
    plot_->yAxis->setRange(*lo - 0.5, *hi + 0.6);  // room for the last hidden bar
  }
  plot_->xAxis->setRange(0, longest > 0 ? longest * 1.04 : 1.0);
  plot_->replot();
}

void BreakdownChart::setPipeline(const loom::analysis::PipelineStats& stats) {
  QStringList lines;
  if (stats.stages > 1) {
    const QString convention = QString::fromStdString(stats.bubble_convention);
    for (const auto& st : stats.stages_stats) lines << stage_line(st, convention);
    lines << negative_parts_explained(stats);
    if (!stats.warning.empty()) lines << tr("Warning: %1").arg(QString::fromStdString(stats.warning));
  }
  pipeline_label_->setText(lines.join(QLatin1Char('\n')));
  pipeline_label_->setVisible(!lines.isEmpty());
}

QString BreakdownChart::pipelineText() const { return pipeline_label_->isHidden() ? QString() : pipeline_label_->text(); }

void BreakdownChart::clear() {
  setBreakdown({});
  setPipeline({});
}

// Segments by their glossary key: the same explanation as the Help menu's glossary.
QString BreakdownChart::segmentExplanation(const QString& segment) {
  return term_tooltip(segment);  // "compute", "optimizer", "data", "exposed_comm", "idle", "hidden_comm"
}

// Over a legend entry: what that category counts. Over a rank's bar: its figures, and
// what the category under the pointer counts.
QString BreakdownChart::toolTipAt(const QPoint& pos) const {
  for (int i = 0; i < plot_->legend->itemCount(); ++i) {
    auto* item = qobject_cast<QCPPlottableLegendItem*>(plot_->legend->item(i));
    if (item != nullptr && item->visible() && item->rect().contains(pos)) {
      return segmentExplanation(item->plottable()->property("segment").toString());
    }
  }
  if (ranks_.empty() || !plot_->axisRect()->rect().contains(pos)) return {};
  // The hidden bar belongs to the rank above it (offset < 0.5 + its width).
  const double key = plot_->yAxis->pixelToCoord(pos.y());
  const int rank = static_cast<int>(std::lround(key - 0.12));
  QString text = toolTipForRank(rank);
  if (text.isEmpty()) return {};
  const QString segment = segmentAt(rank, plot_->xAxis->pixelToCoord(pos.x()), key - rank > 0.25);
  if (!segment.isEmpty()) text += QStringLiteral("<p>%1</p>").arg(segmentExplanation(segment).toHtmlEscaped());
  return text;
}

// Which stacked segment of `rank` covers `seconds` ("" past the bar's end).
QString BreakdownChart::segmentAt(int rank, double seconds, bool hiddenBar) const {
  for (const auto& r : ranks_) {
    if (r.rank != rank) continue;
    const BreakdownSegments s = breakdown_segments(r);
    if (hiddenBar) return seconds >= 0 && seconds <= s.hidden_comm ? QStringLiteral("hidden_comm") : QString();
    double end = 0;
    for (const SegmentSpec& spec : kStack) {
      end += s.*spec.field;
      if (seconds >= 0 && seconds <= end) return QString::fromLatin1(spec.name());
    }
  }
  return {};
}

QString BreakdownChart::toolTipForRank(int rank) const {
  for (const auto& r : ranks_) {
    if (r.rank != rank) continue;
    const BreakdownSegments s = breakdown_segments(r);
    // Each figure in seconds and as its share of this rank's training window.
    const double window = s.stacked();
    auto row = [window](const QString& label, double seconds) {
      const QString share = window > 0 ? QStringLiteral("%1%").arg(100.0 * seconds / window, 0, 'f', 1) : QString();
      return QStringLiteral("<tr><td>%1</td><td align=right>%2 s</td><td align=right>%3</td></tr>")
          .arg(label)
          .arg(seconds, 0, 'f', 3)
          .arg(share);
    };
    QString html = QStringLiteral("<b>rank %1</b><table><tr><th></th><th align=right>seconds</th>"
                                  "<th align=right>of window</th></tr>")
                       .arg(rank);
    for (const SegmentSpec& spec : kStack) html += row(spec.legend(), s.*spec.field);
    html += row(tr("<i>stacked total</i> (the training window)"), s.stacked());
    html += row(tr("communication, all"), s.exposed_comm + s.hidden_comm);
    html += row(QStringLiteral("&nbsp;&nbsp;") + breakdown_category(BreakdownCategory::HiddenCommunication).displayName(),
                s.hidden_comm);
    html += row(breakdown_category(BreakdownCategory::Setup).displayName() + tr(" (before training, not drawn)"),
                r.setup_s);
    html += QStringLiteral("</table><p>%1</p>").arg(tr(kHiddenExplanation));
    return html;
  }
  return {};
}

// The plot's tooltip event (the pointer rested) and its resizes: the tooltip is the one
// for the point under the pointer, and the legend wraps into as many columns as it needs.
bool BreakdownChart::eventFilter(QObject* watched, QEvent* event) {
  if (watched == plot_ && event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const QString text = toolTipAt(help->pos());
    if (text.isEmpty()) {
      QToolTip::hideText();
    } else {
      QToolTip::showText(help->globalPos(), text, plot_);
    }
    return true;
  }
  if (watched == plot_ && event->type() == QEvent::Resize) fitLegend(static_cast<QResizeEvent*>(event)->size().height());
  return QWidget::eventFilter(watched, event);
}

void BreakdownChart::fitLegend(int height) {
  QCPLegend* legend = plot_->legend;
  const int rows = legend_rows_that_fit(legend, height);
  if (rows == legend->wrap() && legend->fillOrder() == QCPLayoutGrid::foRowsFirst) return;
  legend->setWrap(rows);  // before the fill order, which rearranges with the wrap it finds
  legend->setFillOrder(QCPLayoutGrid::foRowsFirst, true);
}

int BreakdownChart::legendColumns() const { return plot_->legend->columnCount(); }

void BreakdownChart::showToolTip(QMouseEvent* event) {
  const QString text = toolTipAt(event->pos());
  if (text.isEmpty()) {
    QToolTip::hideText();
  } else {
    QToolTip::showText(event->globalPosition().toPoint(), text, plot_);
  }
}

void BreakdownChart::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::StyleChange) {
    applyPalette();
    plot_->replot();
  }
}

void BreakdownChart::applyPalette() {
  detail::apply_palette(plot_, palette());
  const bool dark = is_dark(palette());
  for (int i = 0; i < plot_->plottableCount(); ++i)
    if (auto* b = qobject_cast<QCPBars*>(plot_->plottable(i))) color_bars(b, dark);
}

}  // namespace loom::ui::charts
