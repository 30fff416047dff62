// The concept a span stands for, named where it happens: the words the lessons and
// docs/figures.md use, for the span's label on the timeline and its tooltip. Pure (no
// display): computed from the laid-out data on demand, for the few spans wide enough to
// carry a label or under the mouse.
//
//   idle in a pipeline step    "bubble 23% of step 4": this rank's idle time in the step
//                              over the step's length (every rank's events)
//   wait in a data-parallel    "waiting for rank 2 · exposed communication": what is left
//     step                     of the all-reduce after backward; the rank named is the last
//                              to start the step's last gradient bucket (the one the others
//                              waited for), or "the network" when that is this rank
//   all-reduce bucket          "exposed 80%": the share of the bucket that no compute span
//                              of its rank overlaps (hidden behind backward otherwise)
//   receive / pull             "from rank 1": the peer it waited for
//   push                       "staleness 2": the staleness the server recorded when it
//                              applied this gradient (TimelineData::append_updates)
#pragma once

#include <QString>

#include <cstdint>

#include "loom/ui/timeline/timeline_data.h"

namespace loom::ui::timeline {

QString concept_label(const TimelineData& data, std::uint32_t event);

}  // namespace loom::ui::timeline
