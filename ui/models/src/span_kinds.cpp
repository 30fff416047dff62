// The span kind and breakdown category tables of span_kinds.h. Dark-palette colours are
// lighter and a little less saturated so that they keep their hue on a near-black base;
// grey kinds swap roles (idle stays close to the background in both palettes). Hues were
// checked side by side in the timeline and the breakdown in both palettes.
#include "loom/ui/span_kinds.h"

#include <array>
#include <cstdlib>

namespace loom::ui {

using loom::trace::EventKind;
using BC = BreakdownCategory;

namespace {

QColor rgb(unsigned v) { return QColor((v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff); }

SpanKindStyle kind_row(EventKind kind, const char* name, const char* explanation, std::optional<BC> category,
                       unsigned light, unsigned dark) {
  // Communication is exposed or hidden by what ran beside it, not by its kind.
  const bool comm = category == BC::HiddenCommunication;
  return SpanKindStyle{kind, name, explanation, category, comm, rgb(light), rgb(dark)};
}

const std::array<SpanKindStyle, loom::trace::kEventKindCount>& kind_table() {
  static const std::array<SpanKindStyle, loom::trace::kEventKindCount> table = {
      kind_row(EventKind::Step, "step", "One whole optimizer step; its time is counted by the spans inside it.",
               std::nullopt, 0x7d8594, 0x3c4556),
      kind_row(EventKind::Setup, "setup",
               "Setting a rank up before training: loading data, clock alignment, bandwidth probe, model build.",
               BC::Setup, 0x8d6e4a, 0xa9855a),
      kind_row(EventKind::DataLoad, "data loading", "Reading and preparing the next batch.", BC::Data, 0xa6ad22,
               0xb9c43a),
      kind_row(EventKind::Copy, "host-device copy",
               "A gpu rank copying between host and device memory (the batch upload), on the copies lane. It lies "
               "inside the data loading span, which counts it once.",
               BC::Data, 0x7d6b1e, 0xb39c3c),
      kind_row(EventKind::Forward, "forward", "Forward pass: a layer computing its output from its input.",
               BC::Compute, 0x3a7bd5, 0x5c9bf0),
      kind_row(EventKind::Loss, "loss", "Softmax cross-entropy: the loss and its gradient.", BC::Compute, 0x72c0f0,
               0x8fd0f7),
      kind_row(EventKind::Backward, "backward",
               "Backward pass: a layer computing the gradients of its input and parameters.", BC::Compute, 0x9650c8,
               0xb683e6),
      kind_row(EventKind::Optimizer, "optimizer", "Applying the gradients to the parameters.", BC::Optimizer,
               0x2e9e55, 0x4cc477),
      kind_row(EventKind::Evaluate, "evaluation", "Measuring accuracy on the test set, or on the host lane, a rank's part in it (waiting for the rank that "
               "evaluates). Not training: left out of the training window and the breakdown.", BC::Compute,
               0x22a398, 0x3cc4b6),
      kind_row(EventKind::AllReduce, "all-reduce",
               "One bucket of gradients summed across replicas, from issue to completion.", BC::HiddenCommunication,
               0xf08c1e, 0xf5a445),
      kind_row(EventKind::Broadcast, "broadcast", "One rank's tensor copied to every other rank.",
               BC::HiddenCommunication, 0xe2ae2c, 0xf0c455),
      kind_row(EventKind::Barrier, "barrier", "Every rank waiting until all have arrived.", BC::HiddenCommunication,
               0x9a4a2a, 0xc0704f),
      kind_row(EventKind::Send, "send", "Sending a tensor to another rank (a pipeline stage's output).",
               BC::HiddenCommunication, 0xe56b3c, 0xf08a60),
      kind_row(EventKind::Recv, "receive", "Receiving a tensor from another rank; waiting in a pipeline bubble counts as idle.",
               BC::HiddenCommunication,
               0xcf5578, 0xe57898),
      kind_row(EventKind::Push, "push", "A worker sending its gradient to the parameter server.",
               BC::HiddenCommunication, 0xd25d10, 0xe87d35),
      kind_row(EventKind::Pull, "pull", "A worker receiving fresh parameters from the parameter server.",
               BC::HiddenCommunication, 0xa34466, 0xc86a8c),
      kind_row(EventKind::Wait, "wait for communication",
               "The compute thread blocked until communication finished: exposed communication.",
               BC::ExposedCommunication, 0xd03232, 0xf05a55),
      kind_row(EventKind::Idle, "idle / bubble",
               "Nothing to do: in a pipeline, a stage waiting for its neighbour's activations or gradients (the "
               "bubble); in serving, the server waiting for requests or for its batch timeout.",
               BC::Idle, 0xb9b9b9, 0x6e7177),
      kind_row(EventKind::InjectedDelay, "injected delay",
               "A deliberate pause (straggler injection in the plan): idle.", BC::Idle, 0xe070bd, 0xef8fd2),
  };
  return table;
}

// The categories in stacking order; the colour comes from the kind named, if any.
struct CategoryRow {
  BC category;
  const char* key;
  const char* name;
  const char* explanation;
  std::optional<EventKind> color_of;
  unsigned light = 0, dark = 0;  // only when no kind stands for the category
};

const std::array<CategoryStyle, kBreakdownCategoryCount>& category_table() {
  static const std::array<CategoryStyle, kBreakdownCategoryCount> table = [] {
    const CategoryRow rows[] = {
        {BC::Setup, "setup", "setup", "Time before training started (data, clock alignment, probe, model build).",
         EventKind::Setup},
        {BC::Compute, "compute", "compute", "Forward, loss and backward passes.", EventKind::Forward},
        {BC::Optimizer, "optimizer", "optimizer", "Applying the gradients to the parameters.", EventKind::Optimizer},
        {BC::Data, "data", "data loading", "Reading and preparing batches.", EventKind::DataLoad},
        {BC::ExposedCommunication, "exposed_comm", "exposed communication",
         "Communication in flight while the rank did no work: the rank waited for it.", EventKind::Wait},
        // "hidden", as the glossary's term, beside "exposed": short enough for a legend row.
        {BC::HiddenCommunication, "hidden_comm", "hidden communication",
         "Communication in flight while the rank computed, hidden behind that work: it cost no time.",
         EventKind::AllReduce},
        {BC::Idle, "idle", "idle / bubble",
         "No work and no communication: pipeline bubbles, injected delays, gaps.", EventKind::Idle},
        {BC::Descheduled, "descheduled", "descheduled",
         "The rank's thread waited for a CPU because ranks outnumber cores.", std::nullopt, 0x4a505c, 0xa9b0bc},
    };
    std::array<CategoryStyle, kBreakdownCategoryCount> out{};
    std::size_t i = 0;
    for (const CategoryRow& r : rows) {
      const bool by_kind = r.color_of.has_value();
      out[i++] = CategoryStyle{r.category, r.key, r.name, r.explanation,
                               by_kind ? span_kind(*r.color_of).light : rgb(r.light),
                               by_kind ? span_kind(*r.color_of).dark : rgb(r.dark)};
    }
    return out;
  }();
  return table;
}

}  // namespace

std::span<const SpanKindStyle> span_kinds() { return kind_table(); }

const SpanKindStyle& span_kind(EventKind kind) {
  for (const SpanKindStyle& s : kind_table())
    if (s.kind == kind) return s;
  return kind_table().front();  // unreachable for a valid kind: the table holds every one
}

std::span<const CategoryStyle> breakdown_categories() { return category_table(); }

const CategoryStyle& breakdown_category(BreakdownCategory category) {
  for (const CategoryStyle& s : category_table())
    if (s.category == category) return s;
  return category_table().front();
}

QString counts_in_text(const SpanKindStyle& style) {
  if (!style.category) return QStringLiteral("not counted itself (the spans inside it are)");
  if (style.split_by_overlap)
    return QStringLiteral("%1 where the rank did no work, %2 where it computed")
        .arg(breakdown_category(BC::ExposedCommunication).displayName(),
             breakdown_category(BC::HiddenCommunication).displayName());
  return breakdown_category(*style.category).displayName();
}

QString kind_tooltip(const SpanKindStyle& style) {
  return QStringLiteral("<b>%1</b><br>%2<br><i>Breakdown:</i> %3")
      .arg(style.displayName().toHtmlEscaped(), QString::fromUtf8(style.explanation).toHtmlEscaped(),
           counts_in_text(style).toHtmlEscaped());
}

bool is_dark(const QPalette& palette) { return palette.color(QPalette::Base).lightness() < 128; }

QColor event_kind_color(EventKind kind, bool dark_palette) { return span_kind(kind).color(dark_palette); }

QString event_kind_display_name(EventKind kind) { return span_kind(kind).displayName(); }

QColor breakdown_color(BreakdownCategory category, bool dark_palette) {
  return breakdown_category(category).color(dark_palette);
}

QString stream_label(loom::trace::Stream stream) {
  switch (stream) {
    case loom::trace::Stream::Compute: return QStringLiteral("compute");
    case loom::trace::Stream::Comm: return QStringLiteral("collectives");
    case loom::trace::Stream::Host: return QStringLiteral("steps · messages");
    case loom::trace::Stream::Copy: return QStringLiteral("copies");
  }
  return QString::fromUtf8(loom::trace::stream_name(stream));
}

}  // namespace loom::ui
