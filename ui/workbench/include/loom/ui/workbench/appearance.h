// Light and dark palettes on the Fusion style. Qt 6.4 has no colour-scheme API, so the
// workbench sets the palette itself; widgets that paint with palette roles follow.
#pragma once

namespace loom::ui {

void apply_palette(bool dark);

}  // namespace loom::ui
