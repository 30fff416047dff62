// Number formatting shared by the workbench's tables and panels.
#pragma once

#include <QString>

#include <cstdint>

namespace loom::ui {

// 235146 -> "235,146": parameter counts are read at a glance. Not QLocale: the C locale
// omits separators and a user's locale would make tests and screenshots differ.
QString groupedDigits(std::int64_t value);

// The index-th run of a comparison as every view names it: "A", "B", ...
QString run_letter(int index);

}  // namespace loom::ui
