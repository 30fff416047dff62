// Timeline redraw and append time for 10k / 100k / 1M synthetic events on 4 ranks, at
// full zoom (everything visible) and deep zoom (a 1 ms window in the middle), against the
// 30 ms redraw target. The events imitate a pipelined data-parallel run: per step a Step
// span holding per-micro-batch Forward/Backward spans that hold per-layer spans (compute),
// point-to-point sends/receives and all-reduce buckets (comm), a data load (host). They
// are delivered in batches of 4096 per rank in end order, as the live recorder does, so a
// Step arrives after its children. Run with QT_QPA_PLATFORM=offscreen.
//
// `bench_timeline --png DIR` also saves DIR/timeline_full.png and DIR/timeline_deep.png of
// the 100k case, to look at what was timed.
//
// "paint" is the lane painter alone (TimelineView::lastPaintMs); "replot" is the whole
// synchronous QCustomPlot replot (axes, labels, lanes, arrows) that a user waits for.
#include <QApplication>
#include <QElapsedTimer>
#include <QPixmap>
#include <QString>
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "loom/ui/timeline/timeline_view.h"

using loom::trace::Event;
using loom::trace::EventKind;
using loom::trace::Stream;
using loom::ui::timeline::TimelineView;
using loom::ui::timeline::Viewport;

namespace {

constexpr int kRanks = 4, kLayers = 12, kMicro = 4;
constexpr std::int64_t kClockSkewNs = 1700000;  // rank r's clock runs r * 1.7 ms ahead

Event span(EventKind kind, Stream stream, std::int64_t s, std::int64_t e, int step, int layer = -1, int mb = -1) {
  Event ev;
  ev.kind = kind;
  ev.stream = stream;
  ev.start_ns = s;
  ev.end_ns = e;
  ev.step = step;
  ev.layer = layer;
  ev.microbatch = static_cast<std::int16_t>(mb);
  return ev;
}

// One step of one rank starting at t (this rank's clock), children before parents.
std::int64_t emit_step(int rank, int step, std::int64_t t, std::mt19937& rng, std::vector<Event>& out) {
  std::uniform_int_distribution<int> jitter(0, 8000);
  const std::int64_t step_start = t;
  out.push_back(span(EventKind::DataLoad, Stream::Host, t, t + 150000 + jitter(rng), step));
  for (int m = 0; m < kMicro; ++m) {
    const int msg = step * kMicro + m;
    if (rank > 0) {  // receive activations from the previous stage
      Event r = span(EventKind::Recv, Stream::Comm, t, t + 25000, step, -1, m);
      r.peer = rank - 1, r.message = msg, r.bytes = 1 << 20;
      out.push_back(r);
      t += 25000;
    }
    const std::int64_t fwd_start = t;
    for (int l = 0; l < kLayers; ++l, t += 42000 + jitter(rng))
      out.push_back(span(EventKind::Forward, Stream::Compute, t, t + 40000, step, l, m));
    out.push_back(span(EventKind::Forward, Stream::Compute, fwd_start, t, step, -1, m));
    if (rank + 1 < kRanks) {
      Event s = span(EventKind::Send, Stream::Comm, t, t + 20000, step, -1, m);
      s.peer = rank + 1, s.message = msg, s.bytes = 1 << 20;
      out.push_back(s);
    }
    out.push_back(span(EventKind::Loss, Stream::Compute, t, t + 15000, step, -1, m));
    t += 16000;
    const std::int64_t bwd_start = t;
    for (int l = kLayers - 1; l >= 0; --l, t += 82000 + jitter(rng))
      out.push_back(span(EventKind::Backward, Stream::Compute, t, t + 80000, step, l, m));
    out.push_back(span(EventKind::Backward, Stream::Compute, bwd_start, t, step, -1, m));
  }
  for (int b = 0; b < 4; ++b) {  // gradient buckets, reduced after the last backward
    Event a = span(EventKind::AllReduce, Stream::Comm, t + b * 120000, t + b * 120000 + 110000, step);
    a.bytes = 8 << 20;
    out.push_back(a);
  }
  t += 4 * 120000;
  out.push_back(span(EventKind::Optimizer, Stream::Compute, t, t + 250000, step));
  t += 260000;
  out.push_back(span(EventKind::Step, Stream::Compute, step_start, t, step));
  return t + 20000;
}

// Per rank, about total/kRanks events in end order on that rank's own clock.
std::vector<std::vector<Event>> generate(std::size_t total) {
  std::vector<std::vector<Event>> ranks(kRanks);
  std::mt19937 rng(42);
  for (int r = 0; r < kRanks; ++r) {
    std::int64_t t = 1000000000LL + r * kClockSkewNs;
    for (int step = 0; ranks[r].size() < total / kRanks; ++step) t = emit_step(r, step, t, rng, ranks[r]);
  }
  return ranks;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Timing {
  double paint_ms = 0, replot_ms = 0;
};

Timing measure(TimelineView& view, const Viewport& v) {
  view.setViewport(v);
  view.replotNow();  // warm up caches and the layout for this window
  std::vector<double> paint, replot;
  for (int i = 0; i < 10; ++i) {
    QElapsedTimer timer;
    timer.start();
    view.replotNow();
    replot.push_back(static_cast<double>(timer.nsecsElapsed()) / 1e6);
    paint.push_back(view.lastPaintMs());
  }
  return {median(paint), median(replot)};
}

void run(std::size_t total, const QString& png_dir) {
  const auto ranks = generate(total);
  TimelineView view;
  view.resize(1600, 900);
  view.show();
  QApplication::processEvents();
  std::vector<loom::trace::RankRecord> clocks(kRanks);
  for (int r = 0; r < kRanks; ++r) clocks[r].rank = r, clocks[r].offset_ns = r * kClockSkewNs;
  view.setClocks(clocks);
  QElapsedTimer timer;
  timer.start();
  std::size_t count = 0;
  for (std::size_t at = 0;; at += 4096) {  // interleave the ranks' batches as they arrive live
    bool any = false;
    for (const auto& events : ranks) {
      if (at >= events.size()) continue;
      const std::size_t n = std::min<std::size_t>(4096, events.size() - at);
      view.appendEvents(static_cast<int>(&events - ranks.data()), std::span(events).subspan(at, n));
      count += n;
      any = true;
    }
    if (!any) break;
  }
  const double append_ms = static_cast<double>(timer.nsecsElapsed()) / 1e6;
  view.fitAll();
  const Viewport all = view.viewport();
  const Timing full = measure(view, all);
  if (!png_dir.isEmpty()) view.grab().save(png_dir + QStringLiteral("/timeline_full.png"));
  const double mid = 0.5 * (all.t0_ns + all.t1_ns);
  const Timing deep = measure(view, Viewport{mid - 500000, mid + 500000, all.width_px});
  if (!png_dir.isEmpty()) view.grab().save(png_dir + QStringLiteral("/timeline_deep.png"));
  const bool pass = full.replot_ms <= 30 && deep.replot_ms <= 30;
  std::printf("%9zu %6zu %6zu %10.1f %8.2f %8.2f %9.2f %8.2f %9.2f %6s\n", count, view.data().lanes().size(),
              view.data().arrows().size(), append_ms, count / append_ms / 1000.0, full.paint_ms, full.replot_ms,
              deep.paint_ms, deep.replot_ms, pass ? "PASS" : "MISS");
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  std::printf("Timeline, 4 ranks, view 1600x900 offscreen; redraw target 30 ms (whole replot) at full and deep (1 ms) zoom.\n");
  std::printf("Times are medians of 10 synchronous replots; append is all batches of 4096 into TimelineData.\n\n");
  std::printf("%9s %6s %6s %10s %8s %8s %9s %8s %9s %6s\n", "events", "lanes", "arrows", "append ms", "Mev/s",
              "full pnt", "full rplt", "deep pnt", "deep rplt", "30 ms");
  const QStringList args = QApplication::arguments();
  const qsizetype png = args.indexOf(QStringLiteral("--png"));
  const QString png_dir = png >= 0 && png + 1 < args.size() ? args[png + 1] : QString();
  for (std::size_t n : {10000u, 100000u, 1000000u}) run(n, n == 100000u ? png_dir : QString());
  return 0;
}
