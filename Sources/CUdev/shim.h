#ifndef SMP_CUDEV_SHIM_H
#define SMP_CUDEV_SHIM_H
// libudev (systemd) for device discovery: enumeration of the tty subsystem, parent USB devices and
// interfaces, their properties and sysfs attributes, and the hotplug monitor.
#include <libudev.h>
#endif
