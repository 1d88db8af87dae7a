// Package drmtest builds fake sysfs and dev trees that look like a real
// host's DRM devices, for tests, demos, end-to-end harnesses and
// benchmarks of discovery.
//
// # Layout
//
// A tree under root has <root>/sys and <root>/dev, laid out as the kernel
// and udev lay them out:
//
//	sys/class/drm/card1 -> ../../devices/pci0000:00/0000:00:02.0/drm/card1
//	sys/class/drm/card1-DP-1, sys/class/drm/version      (ignored by discovery)
//	sys/devices/pci0000:00/0000:00:02.0/{vendor,device,class,numa_node}
//	sys/devices/pci0000:00/0000:00:02.0/driver -> ../../../bus/pci/drivers/i915
//	sys/devices/pci0000:00/0000:00:02.0/subsystem -> ../../../bus/pci
//	sys/devices/pci0000:00/0000:00:02.0/drm/card1/{dev,uevent,device,subsystem}
//	sys/devices/pci0000:00/0000:00:04.0/virtio1/drm/card0  (virtio-gpu)
//	sys/devices/platform/vkms/drm/card0                    (platform card)
//	sys/class/accel/accel0 -> ../../devices/pci0000:00/0000:00:0b.0/accel/accel0
//	dev/dri/card1, dev/dri/renderD128                      (char 226:N)
//	dev/accel/accel0                                       (char 261:N)
//	dev/dri/by-path/pci-0000:00:02.0-card -> ../card1
//	dev/kfd                                                (amdgpu)
//
// Functions on bus 00 sit on the host bridge; others below a root port
// 0000:00:01.0.
//
// Device nodes are real char devices when the process runs as root
// (CanMknod); otherwise regular files stand in for them, which discovery
// rejects. Tests that need nodes call SkipUnlessRoot first.
//
// # Live changes
//
// Tree.Add, Remove, Unbind and Rebind change the tree the way hotplug and
// driver binding change a host, for tests of code that rescans. As on a
// host, where udev acts on the kernel's uevent, each change completes in
// sysfs before the nodes and by-path links under dev appear or go: a
// watcher of the dev tree sees its last event once sysfs has settled.
//
// # Example
//
//	tree, err := drmtest.NewTree(dir,
//		drmtest.Simpledrm,
//		drmtest.IntelIGPU.WithNodes(1, 128))
//	if err != nil {
//		return err
//	}
//	inv, err := drm.Discover(tree.Roots())
package drmtest
