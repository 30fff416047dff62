// Fuzzes plan reading and validation: parse_plan on arbitrary bytes must return errors or
// a plan, never crash, overflow, or exhaust memory; a plan it accepts must survive its
// own JSON round trip and the model table.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const loom::PlanResult result = loom::parse_plan(text);
  if (!result.ok()) return 0;
  const loom::PlanResult again = loom::parse_plan(loom::plan_to_json(*result.plan));
  if (!again.ok() || !(*again.plan == *result.plan)) std::abort();  // the round trip is exact
  (void)loom::format_model_table(loom::infer_model(*result.plan, nullptr));
  return 0;
}
