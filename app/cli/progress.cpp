// Terminal progress bar for `loom-cli run`.
#include "progress.h"

#include <unistd.h>

#include <cmath>
#include <string>

namespace loom::cli {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  const auto total = static_cast<long long>(seconds + 0.5);
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", total / 3600, (total / 60) % 60, total % 60);
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", total / 60, total % 60);
  }
  return text;
}

ProgressBar::ProgressBar(std::FILE* out) : out_(out), enabled_(isatty(fileno(out)) != 0) {}

void ProgressBar::update(const engine::StepProgress& p) {
  if (!enabled_) return;
  const std::int64_t now = trace::now_ns();
  const bool last = p.step == p.total_steps;
  if (!last && now - last_draw_ns_ < 100'000'000) return;
  last_draw_ns_ = now;
  constexpr int kWidth = 28;
  const double fraction = p.total_steps > 0 ? double(p.step) / double(p.total_steps) : 1.0;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(out_, "\r[%s] step %lld/%lld  epoch %d  loss %.4f  %.0f samples/s  elapsed %s  left %s   ",
               bar.c_str(), static_cast<long long>(p.step), static_cast<long long>(p.total_steps), p.epoch + 1, p.loss,
               p.samples_per_s, format_duration(p.elapsed_s).c_str(), format_duration(p.eta_s).c_str());
  std::fflush(out_);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (enabled_ && drawn_) std::fputc('\n', out_);
  drawn_ = false;
}

}  // namespace loom::cli
