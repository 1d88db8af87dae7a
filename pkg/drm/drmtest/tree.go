package drmtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// Numbers and owners of the fake device nodes.
const (
	// DRMMajor is the char major of every DRM node.
	DRMMajor = 226
	// KFDMajor is the char major of the fake /dev/kfd (dynamic on a real
	// host; 235 is common).
	KFDMajor = 235
	// KFDMinor is the minor of the fake /dev/kfd.
	KFDMinor = 0
	// VideoGID owns card nodes, as the video group does on Debian.
	VideoGID = 44
	// RenderGID owns render nodes and /dev/kfd, as the render group does.
	RenderGID = 105
	// NodeMode is the permission of every fake node.
	NodeMode = 0o660
	// ControlMajor is the char major of habanalabs' fake control nodes
	// (dynamic on a real host).
	ControlMajor = 508
)

// ErrUnknownGPU is returned for an ID the tree does not hold.
var ErrUnknownGPU = errors.New("no such fake GPU")

// CanMknod reports whether this process can create real char device
// nodes. Without it the tree holds regular files in their place, and
// discovery skips those cards.
func CanMknod() bool { return os.Geteuid() == 0 }

// Tree is a fake sysfs and dev tree under one directory: <root>/sys and
// <root>/dev. Its methods change it the way the kernel and udev change a
// live host, and are safe for concurrent use.
type Tree struct {
	mu    sync.Mutex
	root  string
	sys   string
	dev   string
	mknod bool
	gpus  map[string]GPU
	bound map[string]bool
	// afterKernel, when set (by tests of this package), runs between the
	// kernel's and udev's part of every change.
	afterKernel func(op string, g GPU)
}

// Build creates a fake tree under root holding gpus and returns its roots.
func Build(root string, gpus ...GPU) (drm.Roots, error) {
	t, err := NewTree(root, gpus...)
	if err != nil {
		return drm.Roots{}, err
	}
	return t.Roots(), nil
}

// NewTree creates <root>/sys and <root>/dev with the skeleton every host
// has (class/drm with its version file, /dev/dri) and adds gpus.
func NewTree(root string, gpus ...GPU) (*Tree, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fake tree root %q: %w", root, err)
	}
	t := &Tree{
		root:  abs,
		sys:   filepath.Join(abs, "sys"),
		dev:   filepath.Join(abs, "dev"),
		mknod: CanMknod(),
		gpus:  map[string]GPU{},
		bound: map[string]bool{},
	}
	for _, d := range []string{
		filepath.Join(t.sys, "class", "drm"),
		filepath.Join(t.sys, "devices", "platform"),
		filepath.Join(t.sys, "bus", "pci", "devices"),
		filepath.Join(t.sys, "bus", "platform", "devices"),
		filepath.Join(t.sys, "bus", "virtio", "devices"),
		filepath.Join(t.dev, "dri"),
	} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("fake tree: %w", err)
		}
	}
	if err := writeFile(filepath.Join(t.sys, "class", "drm", "version"), "drm 1.1.0 20060810\n"); err != nil {
		return nil, err
	}
	for _, g := range gpus {
		if err := t.Add(g); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Roots returns the roots discovery reads this tree through.
func (t *Tree) Roots() drm.Roots { return drm.Roots{Sysfs: t.sys, Dev: t.dev} }

// Root is the directory that holds sys/ and dev/.
func (t *Tree) Root() string { return t.root }

// CharNodes reports whether the tree's nodes are real char devices.
func (t *Tree) CharNodes() bool { return t.mknod }

// GPUs returns the GPUs present (bound or not), sorted by ID.
func (t *Tree) GPUs() []GPU {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]GPU, 0, len(t.gpus))
	for _, g := range t.gpus {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// DevicePath returns the sysfs directory of the DRM parent device of the
// GPU with this ID (the PCI function, the virtioN device, or the platform
// gpu returns the fake GPU id; t.mu must be held.
func (t *Tree) gpu(id string) (GPU, error) {
	g, ok := t.gpus[id]
	if !ok {
		return GPU{}, fmt.Errorf("%w: %s", ErrUnknownGPU, id)
	}
	return g, nil
}

// device), e.g. <root>/sys/devices/pci0000:00/0000:00:02.0.
func (t *Tree) DevicePath(id string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g, err := t.gpu(id)
	if err != nil {
		return "", err
	}
	return t.parentDir(g), nil
}

// Add plugs in g and binds its driver: the device appears in sysfs with
// its DRM nodes, and udev's nodes and by-path links appear under dev.
func (t *Tree) Add(g GPU) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := validate(g); err != nil {
		return err
	}
	if _, ok := t.gpus[g.ID()]; ok {
		return fmt.Errorf("fake GPU %s: already present", g.ID())
	}
	if err := t.minorsFree(g); err != nil {
		return err
	}
	if err := t.createDevice(g); err != nil {
		return fmt.Errorf("fake GPU %s: %w", g.ID(), err)
	}
	return t.bindAs(g)
}

// minorsFree fails when a bound GPU other than g holds g's card, render
// or accel minor: DRM never hands out one minor twice. Accel minors are
// numbered apart from DRM minors, under their own major.
func (t *Tree) minorsFree(g GPU) error {
	for _, o := range t.gpus {
		if o.ID() == g.ID() || !t.bound[o.ID()] || o.accel() != g.accel() {
			continue
		}
		if o.Card == g.Card || (g.Render >= 0 && o.Render == g.Render) {
			return fmt.Errorf("fake GPU %s: minor numbers %d/%d taken by %s", g.ID(), g.Card, g.Render, o.ID())
		}
	}
	return nil
}

// bindAs records g (new, or with new minors) and binds its driver.
func (t *Tree) bindAs(g GPU) error {
	t.gpus[g.ID()] = g
	if err := t.bind(g); err != nil {
		return fmt.Errorf("fake GPU %s: %w", g.ID(), err)
	}
	t.bound[g.ID()] = true
	return nil
}

// withGPU runs f on the GPU with this ID with the tree locked, or fails
// when there is none.
func (t *Tree) withGPU(id string, f func(g GPU) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	g, err := t.gpu(id)
	if err != nil {
		return err
	}
	return f(g)
}

// Remove unplugs the GPU with this ID: its DRM entries and device
// directory go first (the kernel's part), then its nodes and by-path
// links (udev's part).
func (t *Tree) Remove(id string) error {
	return t.withGPU(id, t.remove)
}

// remove is Remove with the tree locked.
func (t *Tree) remove(g GPU) error {
	id := g.ID()
	wasBound := t.bound[id]
	if wasBound {
		if err := t.unbindSysfs(g); err != nil {
			return err
		}
		delete(t.bound, id)
	}
	delete(t.gpus, id)
	var errs []error
	if g.bus() == "platform" {
		errs = append(errs, os.Remove(filepath.Join(t.sys, "bus", "platform", "devices", g.Platform)))
	} else {
		errs = append(errs, os.Remove(filepath.Join(t.sys, "bus", "pci", "devices", g.PCIAddress)))
		if g.bus() == "virtio" {
			errs = append(errs, os.Remove(filepath.Join(t.sys, "bus", "virtio", "devices", virtioName(g))))
			errs = append(errs, removeBackLink(filepath.Join(t.sys, "bus", "pci", "drivers", "virtio-pci"), g.PCIAddress))
		}
	}
	errs = append(errs, os.RemoveAll(t.deviceDir(g)))
	if err := errors.Join(ignoreNotExist(errs)...); err != nil {
		return fmt.Errorf("remove fake GPU %s: %w", id, err)
	}
	if wasBound {
		t.kernelDone("remove", g)
		return t.udevRemove(g)
	}
	return nil
}

// Unbind detaches the driver of the GPU with this ID: DRM entries, the
// driver link, nodes and by-path links go; the device directory stays.
func (t *Tree) Unbind(id string) error {
	return t.withGPU(id, func(g GPU) error {
		if !t.bound[id] {
			return nil
		}
		if err := t.unbind(g); err != nil {
			return err
		}
		delete(t.bound, id)
		return nil
	})
}

// Rebind binds the driver of an unbound GPU again, with the same minors.
func (t *Tree) Rebind(id string) error {
	return t.withGPU(id, func(g GPU) error {
		if t.bound[id] {
			return nil
		}
		return t.bindAs(g)
	})
}

func validate(g GPU) error {
	id := g.ID()
	switch {
	case id == "":
		return errors.New("fake GPU: neither PCIAddress nor Platform set")
	case strings.ContainsAny(id, "/\x00") || id == "." || id == "..":
		return fmt.Errorf("fake GPU %q: ID is not a file name", id)
	case g.Card < 0 || g.Card > 1<<20 || g.Render > 1<<20:
		return fmt.Errorf("fake GPU %s: minor numbers %d/%d out of range", id, g.Card, g.Render)
	case strings.ContainsAny(g.Driver, "/\x00"):
		return fmt.Errorf("fake GPU %s: driver %q is not a file name", id, g.Driver)
	case g.Class != "" && g.Class != drm.ClassDRM && g.Class != drm.ClassAccel:
		return fmt.Errorf("fake GPU %s: unknown class %q", id, g.Class)
	case g.accel() && (g.Render >= 0 || len(g.Connectors) > 0 || g.KFD):
		return fmt.Errorf("fake GPU %s: an accel device has no render node, connectors or /dev/kfd", id)
	case g.Control && !g.accel():
		return fmt.Errorf("fake GPU %s: a control node needs class accel", id)
	}
	switch g.bus() {
	case "pci", "virtio":
		if g.PCIAddress == "" || strings.Count(g.PCIAddress, ":") != 2 {
			return fmt.Errorf("fake GPU %s: bus %s needs a PCI address DDDD:BB:DD.F", id, g.bus())
		}
	case "platform":
		if g.PCIAddress != "" {
			return fmt.Errorf("fake GPU %s: platform device with a PCI address", id)
		}
	default:
		return fmt.Errorf("fake GPU %s: unknown bus %q", id, g.Bus)
	}
	return nil
}

func virtioName(g GPU) string { return fmt.Sprintf("virtio%d", g.VirtioIndex) }

// pciDir is the sysfs directory of PCI function addr: on the host bridge
// for bus 00, else below a root port 00:01.0.
func (t *Tree) pciDir(addr string) string {
	dom, rest, _ := strings.Cut(addr, ":")
	bus, _, _ := strings.Cut(rest, ":")
	bridge := filepath.Join(t.sys, "devices", "pci"+dom+":00")
	if bus == "00" {
		return filepath.Join(bridge, addr)
	}
	return filepath.Join(bridge, rootPort(dom), addr)
}

func rootPort(dom string) string { return dom + ":00:01.0" }

// deviceDir is the directory Remove deletes: the PCI function or the
// platform device.
func (t *Tree) deviceDir(g GPU) string {
	if g.bus() == "platform" {
		return filepath.Join(t.sys, "devices", "platform", g.PlatformBus, g.Platform)
	}
	return t.pciDir(g.PCIAddress)
}

// parentDir is the DRM parent device.
func (t *Tree) parentDir(g GPU) string {
	if g.bus() == "virtio" {
		return filepath.Join(t.pciDir(g.PCIAddress), virtioName(g))
	}
	return t.deviceDir(g)
}

func (t *Tree) createDevice(g GPU) error {
	if g.bus() == "platform" {
		dir := t.deviceDir(g)
		return firstErr(
			os.MkdirAll(dir, 0o755),
			writeFile(filepath.Join(dir, "uevent"), "OF_NAME=\nMODALIAS=platform:"+platformDriverName(g)+"\n"),
			relSymlink(filepath.Join(t.sys, "bus", "platform"), filepath.Join(dir, "subsystem")),
			relSymlink(dir, filepath.Join(t.sys, "bus", "platform", "devices", g.Platform)),
		)
	}
	dom, rest, _ := strings.Cut(g.PCIAddress, ":")
	if bus, _, _ := strings.Cut(rest, ":"); bus != "00" {
		port := filepath.Join(t.sys, "devices", "pci"+dom+":00", rootPort(dom))
		if _, err := os.Lstat(filepath.Join(port, "vendor")); errors.Is(err, fs.ErrNotExist) {
			if err := t.pciFunction(port, "8086", "a70d", "0x060400", -1, "pcieport"); err != nil {
				return err
			}
		}
	}
	dir := t.pciDir(g.PCIAddress)
	drv := ""
	if g.bus() == "virtio" {
		drv = "virtio-pci"
	}
	class := "0x030000" // display controller
	if g.accel() {
		class = "0x120000" // processing accelerator
	}
	if err := t.pciFunction(dir, g.Vendor, g.Device, class, g.NUMA, drv); err != nil {
		return err
	}
	if g.bus() != "virtio" {
		return nil
	}
	vdir := t.parentDir(g)
	return firstErr(
		os.MkdirAll(vdir, 0o755),
		writeFile(filepath.Join(vdir, "vendor"), "0x1af4\n"),
		writeFile(filepath.Join(vdir, "device"), "0x0010\n"),
		writeFile(filepath.Join(vdir, "features"), "0000000000000000000000000000000000000000000000000000000000000000\n"),
		relSymlink(filepath.Join(t.sys, "bus", "virtio"), filepath.Join(vdir, "subsystem")),
		relSymlink(vdir, filepath.Join(t.sys, "bus", "virtio", "devices", virtioName(g))),
	)
}

// pciFunction creates a PCI function directory with its attributes, and
// binds driver when it is not empty.
func (t *Tree) pciFunction(dir, vendor, device, class string, numa int, driver string) error {
	addr := filepath.Base(dir)
	err := firstErr(
		os.MkdirAll(dir, 0o755),
		writeFile(filepath.Join(dir, "vendor"), "0x"+vendor+"\n"),
		writeFile(filepath.Join(dir, "device"), "0x"+device+"\n"),
		writeFile(filepath.Join(dir, "class"), class+"\n"),
		writeFile(filepath.Join(dir, "numa_node"), fmt.Sprintf("%d\n", numa)),
		writeFile(filepath.Join(dir, "uevent"), fmt.Sprintf("PCI_CLASS=%s\nPCI_ID=%s:%s\nPCI_SLOT_NAME=%s\n",
			strings.TrimPrefix(class, "0x"), strings.ToUpper(vendor), strings.ToUpper(device), addr)),
		relSymlink(filepath.Join(t.sys, "bus", "pci"), filepath.Join(dir, "subsystem")),
		relSymlink(dir, filepath.Join(t.sys, "bus", "pci", "devices", addr)),
	)
	if err != nil || driver == "" {
		return err
	}
	return t.bindDriver(dir, "pci", driver)
}

// bindDriver links dir/driver to bus/<bus>/drivers/<driver> and back.
func (t *Tree) bindDriver(dir, bus, driver string) error {
	ddir := filepath.Join(t.sys, "bus", bus, "drivers", driver)
	return firstErr(
		os.MkdirAll(ddir, 0o755),
		relSymlink(ddir, filepath.Join(dir, "driver")),
		relSymlink(dir, filepath.Join(ddir, filepath.Base(dir))),
	)
}

func removeBackLink(driverDir, name string) error {
	return os.Remove(filepath.Join(driverDir, name))
}

func platformDriverName(g GPU) string {
	if g.Driver != "" {
		return g.Driver
	}
	name, _, _ := strings.Cut(g.Platform, ".")
	return name
}

// byPathPrefix is udev's ID_PATH of g (virtio is skipped over, as
// udev's path_id does).
func byPathPrefix(g GPU) string {
	if g.bus() == "platform" {
		return "platform-" + g.Platform
	}
	return "pci-" + g.PCIAddress
}

// bind makes the driver's DRM device appear in the order of a real host:
// first the kernel's part (bindSysfs), then udev's (udevAdd), which on a
// host acts on the kernel's uevent. A watcher of the dev tree thus sees
// its last event only once sysfs is complete, and a discovery that runs
// in between finds a sysfs entry whose node is not there yet, as it can
// on a host.
func (t *Tree) bind(g GPU) error {
	if err := t.bindSysfs(g); err != nil {
		return err
	}
	t.kernelDone("bind", g)
	return t.udevAdd(g)
}

// bindSysfs is the kernel's part of bind: the driver link, then the DRM
// minors (the render node before the card node, in the order
// drm_dev_register registers them), connectors and class links.
func (t *Tree) bindSysfs(g GPU) error {
	parent := t.parentDir(g)
	if g.Driver != "" {
		if err := t.bindDriver(parent, g.bus(), g.Driver); err != nil {
			return err
		}
	}
	if g.accel() {
		return t.bindAccel(parent, g)
	}
	if g.KFD {
		if _, err := os.Lstat(t.charLink(KFDMajor, KFDMinor)); errors.Is(err, fs.ErrNotExist) {
			// The kernel's part of amdkfd; udevAdd makes the node.
			if _, err := t.charSysfs(kfdDevice); err != nil {
				return err
			}
		}
	}
	card := fmt.Sprintf("card%d", g.Card)
	render := fmt.Sprintf("renderD%d", g.Render)
	if g.Render >= 0 {
		if err := t.minorDir(parent, render, g.Render); err != nil {
			return err
		}
	}
	if err := t.minorDir(parent, card, g.Card); err != nil {
		return err
	}
	for _, c := range g.Connectors {
		dir := filepath.Join(parent, "drm", card, card+"-"+c)
		err := firstErr(
			os.MkdirAll(dir, 0o755),
			writeFile(filepath.Join(dir, "status"), "disconnected\n"),
			writeFile(filepath.Join(dir, "enabled"), "disabled\n"),
			relSymlink(filepath.Join(t.sys, "class", "drm"), filepath.Join(dir, "subsystem")),
			relSymlink(dir, filepath.Join(t.sys, "class", "drm", card+"-"+c)),
		)
		if err != nil {
			return err
		}
	}
	if g.Render >= 0 {
		if err := relSymlink(filepath.Join(parent, "drm", render), filepath.Join(t.sys, "class", "drm", render)); err != nil {
			return err
		}
	}
	return relSymlink(filepath.Join(parent, "drm", card), filepath.Join(t.sys, "class", "drm", card))
}

// bindAccel is bindSysfs's part for an accel device: accel<N> (and
// accel_controlD<N>) in <parent>/accel and class/accel.
func (t *Tree) bindAccel(parent string, g GPU) error {
	for _, n := range accelNodes(g) {
		if err := t.classMinor(parent, drm.ClassAccel, n.name, n.major, g.Card); err != nil {
			return err
		}
		if err := relSymlink(filepath.Join(parent, drm.ClassAccel, n.name), filepath.Join(t.sys, "class", drm.ClassAccel, n.name)); err != nil {
			return err
		}
	}
	return nil
}

// accelNode is one node of an accel device.
type accelNode struct {
	name  string
	major int
}

// accelNodes are the nodes of accel device g: accel<N>, then
// accel_controlD<N> when g has one.
func accelNodes(g GPU) []accelNode {
	nodes := []accelNode{{fmt.Sprintf("accel%d", g.Card), drm.AccelMajor}}
	if g.Control {
		nodes = append(nodes, accelNode{fmt.Sprintf("accel_controlD%d", g.Card), ControlMajor})
	}
	return nodes
}

// udevAdd is udev's part of bind: the device nodes, each followed by its
// by-path link, and /dev/kfd. Accel nodes have no by-path links.
func (t *Tree) udevAdd(g GPU) error {
	if g.accel() {
		for _, n := range accelNodes(g) {
			if err := t.node(filepath.Join(t.dev, drm.ClassAccel, n.name), n.major, g.Card, RenderGID); err != nil {
				return err
			}
		}
		return nil
	}
	card := fmt.Sprintf("card%d", g.Card)
	render := fmt.Sprintf("renderD%d", g.Render)
	dri := filepath.Join(t.dev, "dri")
	byPath := filepath.Join(dri, "by-path")
	if g.Render >= 0 {
		if err := t.node(filepath.Join(dri, render), DRMMajor, g.Render, RenderGID); err != nil {
			return err
		}
		if err := relSymlink(filepath.Join(dri, render), filepath.Join(byPath, byPathPrefix(g)+"-render")); err != nil {
			return err
		}
	}
	if err := t.node(filepath.Join(dri, card), DRMMajor, g.Card, VideoGID); err != nil {
		return err
	}
	if err := relSymlink(filepath.Join(dri, card), filepath.Join(byPath, byPathPrefix(g)+"-card")); err != nil {
		return err
	}
	if g.KFD {
		return t.node(filepath.Join(t.dev, "kfd"), KFDMajor, KFDMinor, RenderGID)
	}
	return nil
}

// kfdDevice is amdkfd's class device: a virtual device of its own, which
// stays while the amdgpu module is loaded.
var kfdDevice = CharDevice{Class: "kfd", Name: "kfd", Major: KFDMajor, Minor: KFDMinor, GID: RenderGID}

// CharDevice is a char device of another subsystem than DRM, for
// companion nodes: its class device in sysfs (with the kernel's
// <sysfs>/dev/char link) and its node under dev.
type CharDevice struct {
	// Class is the subsystem: video4linux, media, dma_heap, misc,
	// scsi_generic, ...
	Class string
	// Name is the class device's name (video10, system, rga, sg0).
	Name string
	// Parent is the device it sits below, relative to sys/devices
	// (platform/soc/soc:bcm2835-codec, pci0000:00/0000:00:02.0); empty
	// for a virtual device, sys/devices/virtual/<Class>/<Name>.
	Parent string
	// DevName is its node's path under dev (dma_heap/system); empty
	// means Name.
	DevName string
	// Major and Minor are its numbers; GID owns the node.
	Major, Minor, GID int
}

// AddCharDevice adds d: the kernel's part (class device, class link,
// dev/char link), then udev's (the node).
func (t *Tree) AddCharDevice(d CharDevice) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.charDevice(d)
}

// charDevice is AddCharDevice with the tree locked.
func (t *Tree) charDevice(d CharDevice) error {
	devname, err := t.charSysfs(d)
	if err != nil {
		return err
	}
	return t.node(filepath.Join(t.dev, devname), d.Major, d.Minor, d.GID)
}

// charSysfs is the kernel's part of AddCharDevice; it returns the node's
// path under dev.
func (t *Tree) charSysfs(d CharDevice) (string, error) {
	if d.Class == "" || d.Name == "" || strings.ContainsAny(d.Class+d.Name, "/\x00") {
		return "", fmt.Errorf("fake char device %q of class %q: not file names", d.Name, d.Class)
	}
	devname := d.DevName
	if devname == "" {
		devname = d.Name
	}
	var dir string
	if d.Parent == "" {
		dir = filepath.Join(t.sys, "devices", "virtual", d.Class, d.Name)
	} else {
		parent := filepath.Join(t.sys, "devices", d.Parent)
		dir = filepath.Join(parent, d.Class, d.Name)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return "", err
		}
	}
	err := firstErr(
		os.MkdirAll(dir, 0o755),
		writeFile(filepath.Join(dir, "dev"), fmt.Sprintf("%d:%d\n", d.Major, d.Minor)),
		writeFile(filepath.Join(dir, "uevent"), fmt.Sprintf("MAJOR=%d\nMINOR=%d\nDEVNAME=%s\n", d.Major, d.Minor, devname)),
		relSymlink(filepath.Join(t.sys, "class", d.Class), filepath.Join(dir, "subsystem")),
		relSymlink(dir, filepath.Join(t.sys, "class", d.Class, d.Name)),
		relSymlink(dir, t.charLink(d.Major, d.Minor)),
	)
	if err == nil && d.Parent != "" {
		err = relSymlink(filepath.Join(t.sys, "devices", d.Parent), filepath.Join(dir, "device"))
	}
	if err != nil {
		return "", fmt.Errorf("fake char device %s: %w", d.Name, err)
	}
	return devname, nil
}

// minorDir creates <parent>/drm/<name> as the kernel does for a DRM
// minor, with its <sysfs>/dev/char/<major>:<minor> link.
func (t *Tree) minorDir(parent, name string, minor int) error {
	return t.classMinor(parent, drm.ClassDRM, name, DRMMajor, minor)
}

// classMinor creates <parent>/<class>/<name> as the kernel does for a
// char device of that class, with its <sysfs>/dev/char link; the node is
// <dev>/<class dir>/<name> (dri for class drm).
func (t *Tree) classMinor(parent, class, name string, major, minor int) error {
	dir := filepath.Join(parent, class, name)
	devname, devtype := "accel/"+name, ""
	if class == drm.ClassDRM {
		devname, devtype = "dri/"+name, "DEVTYPE=drm_minor\n"
	}
	return firstErr(
		os.MkdirAll(dir, 0o755),
		writeFile(filepath.Join(dir, "dev"), fmt.Sprintf("%d:%d\n", major, minor)),
		writeFile(filepath.Join(dir, "uevent"), fmt.Sprintf("MAJOR=%d\nMINOR=%d\nDEVNAME=%s\n%s", major, minor, devname, devtype)),
		os.Symlink("../../../"+filepath.Base(parent), filepath.Join(dir, "device")),
		relSymlink(filepath.Join(t.sys, "class", class), filepath.Join(dir, "subsystem")),
		relSymlink(dir, t.charLink(major, minor)),
	)
}

// charLink is the kernel's <sysfs>/dev/char link of char device
// major:minor.
func (t *Tree) charLink(major, minor int) string {
	return filepath.Join(t.sys, "dev", "char", fmt.Sprintf("%d:%d", major, minor))
}

// unbind undoes bind in the order of a real host: the kernel's part
// (unbindSysfs), then udev's (udevRemove).
func (t *Tree) unbind(g GPU) error {
	if err := t.unbindSysfs(g); err != nil {
		return err
	}
	t.kernelDone("unbind", g)
	return t.udevRemove(g)
}

func (t *Tree) kernelDone(op string, g GPU) {
	if t.afterKernel != nil {
		t.afterKernel(op, g)
	}
}

// unbindSysfs removes the DRM entries (card node before render node, as
// the kernel unregisters them) and the driver link.
func (t *Tree) unbindSysfs(g GPU) error {
	parent := t.parentDir(g)
	var errs []error
	if g.accel() {
		for _, n := range accelNodes(g) {
			errs = append(errs, os.Remove(filepath.Join(t.sys, "class", drm.ClassAccel, n.name)), os.Remove(t.charLink(n.major, g.Card)))
		}
		errs = append(errs, os.RemoveAll(filepath.Join(parent, drm.ClassAccel)))
	} else {
		errs = append(errs, t.unbindDRM(parent, g)...)
	}
	if g.Driver != "" {
		errs = append(errs,
			os.Remove(filepath.Join(parent, "driver")),
			removeBackLink(filepath.Join(t.sys, "bus", g.bus(), "drivers", g.Driver), filepath.Base(parent)))
	}
	if err := errors.Join(ignoreNotExist(errs)...); err != nil {
		return fmt.Errorf("unbind fake GPU %s: %w", g.ID(), err)
	}
	return nil
}

// unbindDRM removes the DRM entries of card g with parent device parent,
// card node before render node, and returns the errors.
func (t *Tree) unbindDRM(parent string, g GPU) []error {
	card := fmt.Sprintf("card%d", g.Card)
	render := fmt.Sprintf("renderD%d", g.Render)
	class := filepath.Join(t.sys, "class", "drm")
	errs := []error{os.Remove(filepath.Join(class, card))}
	for _, c := range g.Connectors {
		errs = append(errs, os.Remove(filepath.Join(class, card+"-"+c)))
	}
	if g.Render >= 0 {
		errs = append(errs, os.Remove(filepath.Join(class, render)))
	}
	errs = append(errs, os.RemoveAll(filepath.Join(parent, "drm")), os.Remove(t.charLink(DRMMajor, g.Card)))
	if g.Render >= 0 {
		errs = append(errs, os.Remove(t.charLink(DRMMajor, g.Render)))
	}
	return errs
}

// udevRemove removes the nodes and by-path links of g, and /dev/kfd when
// no other bound GPU needs it.
func (t *Tree) udevRemove(g GPU) error {
	if g.accel() {
		var errs []error
		for _, n := range accelNodes(g) {
			errs = append(errs, os.Remove(filepath.Join(t.dev, drm.ClassAccel, n.name)))
		}
		if err := errors.Join(ignoreNotExist(errs)...); err != nil {
			return fmt.Errorf("unbind fake GPU %s: %w", g.ID(), err)
		}
		return nil
	}
	card := fmt.Sprintf("card%d", g.Card)
	render := fmt.Sprintf("renderD%d", g.Render)
	dri := filepath.Join(t.dev, "dri")
	errs := []error{
		os.Remove(filepath.Join(dri, "by-path", byPathPrefix(g)+"-card")),
		os.Remove(filepath.Join(dri, card)),
	}
	if g.Render >= 0 {
		errs = append(errs,
			os.Remove(filepath.Join(dri, "by-path", byPathPrefix(g)+"-render")),
			os.Remove(filepath.Join(dri, render)))
	}
	if g.KFD && !t.otherKFD(g.ID()) {
		errs = append(errs, os.Remove(filepath.Join(t.dev, "kfd")))
	}
	if err := errors.Join(ignoreNotExist(errs)...); err != nil {
		return fmt.Errorf("unbind fake GPU %s: %w", g.ID(), err)
	}
	return nil
}

// otherKFD reports whether another bound GPU still needs /dev/kfd.
func (t *Tree) otherKFD(id string) bool {
	for oid, g := range t.gpus {
		if oid != id && g.KFD && t.bound[oid] {
			return true
		}
	}
	return false
}

// node creates a device node: a real char device when the process may,
// else a regular file standing in for it.
func (t *Tree) node(path string, major, minor, gid int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if !t.mknod {
		return firstErr(os.WriteFile(path, nil, NodeMode), os.Chmod(path, NodeMode))
	}
	if err := unix.Mknod(path, unix.S_IFCHR|NodeMode, int(unix.Mkdev(uint32(major), uint32(minor)))); err != nil {
		return fmt.Errorf("mknod %s: %w", path, err)
	}
	return firstErr(os.Chmod(path, NodeMode), os.Lchown(path, 0, gid))
}

// relSymlink makes link point at target with a relative path, as sysfs
// and udev links do, replacing what was there.
func relSymlink(target, link string) error {
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(link), target)
	if err != nil {
		return err
	}
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Symlink(rel, link)
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o444)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func ignoreNotExist(errs []error) []error {
	out := errs[:0]
	for _, err := range errs {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			out = append(out, err)
		}
	}
	return out
}
