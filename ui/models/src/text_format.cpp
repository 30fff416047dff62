// groupedDigits and run_letter (see text_format.h).
#include "loom/ui/text_format.h"

namespace loom::ui {

QString groupedDigits(std::int64_t value) {
  const QString digits = QString::number(value < 0 ? -value : value);
  QString out;
  for (qsizetype i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += QLatin1Char(',');
    out += digits[i];
  }
  return value < 0 ? QLatin1Char('-') + out : out;
}

QString run_letter(int index) { return QString(QChar('A' + index)); }

}  // namespace loom::ui
