// device_label (open_device.h): the same in every build.
#include "loom/device/open_device.h"

namespace loom::device {

std::string device_label(const DeviceSpec& device) {
  return device.kind == DeviceKind::Gpu ? "gpu " + std::to_string(device.gpu) : "cpu";
}

}  // namespace loom::device
