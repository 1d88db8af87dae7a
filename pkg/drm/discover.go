package drm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/pkg/alloc"
)

// Container paths of the nodes discovery reports.
const (
	containerDRI    = "/dev/dri"
	containerAccel  = "/dev/accel"
	containerByPath = "/dev/dri/by-path"
)

// maxAttrSize bounds how much of a sysfs attribute file is read.
const maxAttrSize = 4096

// Discover walks <roots.Sysfs>/class/drm and <roots.Sysfs>/class/accel
// and returns every complete device, with its nodes checked against
// <roots.Dev>. A missing class directory holds no devices; an error is
// returned only when a class directory exists but cannot be read.
// Malformed entries are left out and explained in Inventory.Skipped.
func Discover(roots Roots) (*Inventory, error) {
	if roots.Sysfs == "" || roots.Dev == "" {
		return nil, fmt.Errorf("discover DRM cards: empty root in %+v", roots)
	}
	sys, err := filepath.Abs(roots.Sysfs)
	if err != nil {
		return nil, fmt.Errorf("sysfs root %q: %w", roots.Sysfs, err)
	}
	dev, err := filepath.Abs(roots.Dev)
	if err != nil {
		return nil, fmt.Errorf("dev root %q: %w", roots.Dev, err)
	}
	var classes [2]classDir
	for i, class := range [...]string{ClassDRM, ClassAccel} {
		dir := filepath.Join(sys, "class", class)
		dirents, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read %s class %s: %w", class, dir, err)
		}
		classes[i] = classDir{class: class, dir: dir, dirents: dirents}
	}
	if len(classes[0].dirents) == 0 && len(classes[1].dirents) == 0 {
		return &Inventory{Cards: []Card{}}, nil
	}
	// The pass's resolver resolves the root too: every path discovery
	// resolves starts with it.
	res := newResolverAt()
	defer res.close()
	sysReal, err := res.resolve(sys)
	if err != nil {
		return nil, fmt.Errorf("resolve sysfs root %s: %w", sys, err)
	}
	d := &discovery{sys: sys, sysReal: sysReal, dev: dev, res: res}
	return d.run(classes[:]), nil
}

// classDir is one class directory of sysfs and its entries.
type classDir struct {
	class   string // ClassDRM or ClassAccel
	dir     string
	dirents []fs.DirEntry
}

// classify returns the kind of an entry of the class directory.
func (c classDir) classify(name string) nodeKind {
	if c.class == ClassAccel {
		return classifyAccel(name)
	}
	return classifyEntry(name)
}

// discovery holds the state of one Discover call.
type discovery struct {
	sys, sysReal, dev string
	res               *resolver
	inv               Inventory
}

// entry is one cardN or renderDN in class/drm, or accelN in class/accel.
type entry struct {
	name   string
	kind   nodeKind
	class  string // path under class/drm or class/accel
	parent string // resolved parent device; "" when it cannot be found
	major  uint32
	minor  uint32
	err    error
}

// group is every node entry of one parent device.
type group struct {
	parent  string
	entries []*entry
}

// cardEntry is the group's cardN entry (the last, if several), else its
// accelN entry, nil when it has neither.
func (g *group) cardEntry() *entry {
	var card, accel *entry
	for _, e := range g.entries {
		switch e.kind {
		case kindCard:
			card = e
		case kindAccel:
			accel = e
		}
	}
	if card != nil {
		return card
	}
	return accel
}

// built is a complete card plus the group it was built from.
type built struct {
	card Card
	g    *group
}

func (d *discovery) run(classes []classDir) *Inventory {
	groups := map[string]*group{}
	for _, cd := range classes {
		d.collect(cd, groups)
	}
	return d.finish(groups)
}

// collect probes the node entries of one class directory and adds each
// to the group of its parent device. Entries of class/drm and
// class/accel with one parent fall into one group: one device.
func (d *discovery) collect(cd classDir, groups map[string]*group) {
	for _, de := range cd.dirents {
		kind := cd.classify(de.Name())
		if kind == kindOther {
			continue
		}
		e := &entry{name: de.Name(), kind: kind, class: joinPath(cd.dir, de.Name())}
		if kind == kindControl {
			d.skip(e, fmt.Errorf("%w: %s manages its device for every user; only accel<N> nodes are advertised", ErrControlNode, de.Name()))
			continue
		}
		d.probe(e)
		if e.parent == "" {
			d.skip(e, e.err)
			continue
		}
		g := groups[e.parent]
		if g == nil {
			g = &group{parent: e.parent}
			groups[e.parent] = g
		}
		g.entries = append(g.entries, e)
	}
}

// finish builds a device of each group, drops the ones that cannot be
// told apart, and fills the inventory.
func (d *discovery) finish(groups map[string]*group) *Inventory {
	parents := make([]string, 0, len(groups))
	for p := range groups {
		parents = append(parents, p)
	}
	sort.Strings(parents)

	var cards []built
	for _, p := range parents {
		if b, ok := d.buildGroup(groups[p]); ok {
			cards = append(cards, b)
		}
	}
	cards = d.dropDuplicates(cards)
	cards = d.dropConflicts(cards)
	sort.Slice(cards, func(i, j int) bool { return cards[i].card.ID < cards[j].card.ID })
	d.attachByPath(cards)

	d.inv.Cards = make([]Card, 0, len(cards))
	for _, b := range cards {
		d.inv.Cards = append(d.inv.Cards, b.card)
	}
	sort.SliceStable(d.inv.Skipped, func(i, j int) bool {
		return d.inv.Skipped[i].Error() < d.inv.Skipped[j].Error()
	})
	return &d.inv
}

// skip records that entry e was left out because of err.
func (d *discovery) skip(e *entry, err error) {
	d.inv.Skipped = append(d.inv.Skipped, fmt.Errorf("skip DRM entry %s: %w", e.class, err))
}

// skipGroup leaves out every entry of g: culprit with err, the others as
// its siblings.
func (d *discovery) skipGroup(g *group, culprit *entry, err error) {
	for _, e := range g.entries {
		if e == culprit {
			d.skip(e, err)
			continue
		}
		d.skip(e, fmt.Errorf("%w: %s of device %s", ErrSibling, culprit.name, g.parent))
	}
}

// probe resolves e's sysfs directory, parent device and numbers. It sets
// e.parent whenever the parent can be told, even when e is malformed, so
// that a broken render node takes its card down with it instead of
// leaving a card that looks display-only.
func (d *discovery) probe(e *entry) {
	dir, err := d.resolve(e.class)
	if err != nil {
		e.parent = d.parentHint(e.class)
		e.err = err
		return
	}
	// dir is resolved and clean: joining needs no filepath.Clean.
	parent, err := d.resolve(joinPath(dir, "device"))
	if err != nil {
		if p, herr := d.resolve(filepath.Dir(filepath.Dir(dir))); herr == nil {
			e.parent = p
		}
		e.err = err
		return
	}
	e.parent = parent
	raw, err := d.res.readAttr(joinPath(dir, "dev"))
	if err != nil {
		e.err = err
		return
	}
	e.major, e.minor, err = ParseDev(raw)
	if err != nil {
		e.err = fmt.Errorf("%s: %w", joinPath(dir, "dev"), err)
	}
}

// resolve follows every symlink in path and checks that the result stays
// under the sysfs root.
func (d *discovery) resolve(path string) (string, error) {
	r, err := d.res.resolve(path)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	if !within(d.sysReal, r) {
		return "", fmt.Errorf("resolve %s: %w %s: %s", path, ErrOutsideRoot, d.sys, r)
	}
	return r, nil
}

// underSys is the path under the sysfs root as given of p, a resolved
// path within d.sysReal (d.resolve checked that).
func (d *discovery) underSys(p string) string {
	switch {
	case p == d.sysReal:
		return d.sys
	case d.sysReal == "/":
		return joinPath(d.sys, p[1:])
	default:
		return joinPath(d.sys, p[len(d.sysReal)+1:])
	}
}

// parentHint guesses the parent device of a class/drm link that does not
// resolve, from the link text alone (…/<parent>/drm/<name>).
func (d *discovery) parentHint(class string) string {
	target, err := os.Readlink(class)
	if err != nil {
		return ""
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(class), target)
	}
	p, err := d.resolve(filepath.Dir(filepath.Dir(filepath.Clean(target))))
	if err != nil {
		return ""
	}
	return p
}

// within reports whether path is root or below it.
func within(root, path string) bool {
	if path == root {
		return true
	}
	if root == "/" {
		return strings.HasPrefix(path, "/")
	}
	return strings.HasPrefix(path, root+string(filepath.Separator))
}

// readAttr reads a small sysfs attribute file. It opens without blocking
// and reads only regular files, so a FIFO or device in a corrupt tree
// cannot hang discovery. A discovery pass reads five attributes per card,
// so this takes the system calls directly: no os.File (whose poller
// registration is one more call per file), and no read to find the end of
// a file whose size fstat gave (sysfs reports a page for every attribute,
// so there the end is found by reading). The directory of path must be
// resolved.
func (r *resolver) readAttr(path string) (string, error) {
	dirfd, name := r.at(path)
	fd, err := openAttr(dirfd, name)
	if errors.Is(err, unix.ELOOP) {
		return "", fmt.Errorf("open %s: a symlink, not followed (a sysfs attribute is a regular file): %w", path, err)
	}
	if err != nil {
		return "", &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", fmt.Errorf("read %s: not a regular file (%s)", path, fileType(st.Mode))
	}
	buf := r.buf[:maxAttrSize]
	n := 0
	for n < len(buf) && (st.Size <= 0 || int64(n) < st.Size) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", path, err)
		}
		if m == 0 {
			break
		}
		n += m
	}
	return string(buf[:n]), nil
}

// openAttr opens name in dirfd for readAttr, retried when a signal
// interrupts it. A sysfs attribute is a regular file, never a symlink:
// O_NOFOLLOW keeps a link in its place (a tampered or odd tree) from
// making discovery read a file outside the sysfs root.
func openAttr(dirfd int, name string) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// fileType is the fs.FileMode type bits of a stat(2) mode, as
// os.FileInfo.Mode().Type() gives them.
func fileType(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// buildGroup turns the entries of one parent device into a card, or
// records why it cannot.
func (d *discovery) buildGroup(g *group) (built, bool) {
	for _, e := range g.entries {
		if e.err != nil {
			for _, o := range g.entries {
				if o.err != nil {
					d.skip(o, o.err)
				} else {
					d.skip(o, fmt.Errorf("%w: %s of device %s", ErrSibling, e.name, g.parent))
				}
			}
			return built{}, false
		}
	}
	var n nodes
	nCard, nRender, nAccel := 0, 0, 0
	for _, e := range g.entries {
		switch e.kind {
		case kindCard:
			n.card = e
			nCard++
		case kindRender:
			n.render = e
			nRender++
		case kindAccel:
			n.accel = e
			nAccel++
		}
	}
	// A DRM card has one card node and at most one render node; an
	// accel device has one accel node and no render node without a card.
	if nCard > 1 || nRender > 1 || nAccel > 1 || (nCard == 0 && (nAccel == 0 || nRender > 0)) {
		err := fmt.Errorf("%w: device %s has %d card, %d render and %d accel nodes", ErrUnpaired, g.parent, nCard, nRender, nAccel)
		for _, e := range g.entries {
			d.skip(e, err)
		}
		return built{}, false
	}
	b, culprit, err := d.build(g, n)
	if err != nil {
		d.skipGroup(g, culprit, err)
		return built{}, false
	}
	return b, true
}

// nodes are the node entries of one device: card or accel (or both),
// and render if any.
type nodes struct {
	card, render, accel *entry
}

// primary is the entry named after the device and blamed for its
// parent's faults: the card node, else the accel node.
func (n nodes) primary() *entry {
	if n.card != nil {
		return n.card
	}
	return n.accel
}

// build reads the parent device of a card and checks its nodes. On error
// it also returns the entry to blame.
func (d *discovery) build(g *group, n nodes) (built, *entry, error) {
	parent := g.parent
	cardE := n.primary()
	c := Card{Name: cardE.name, NUMANode: -1}

	bus, err := d.linkName(joinPath(parent, "subsystem"))
	if err != nil {
		return built{}, cardE, err
	}
	c.Bus = bus
	if c.Driver, err = d.driverName(parent, bus); err != nil {
		return built{}, cardE, err
	}

	idDev, idBus := parent, bus
	if bus == "virtio" {
		// virtioN is numbered in probe order; the transport device
		// (the virtio-pci function, or a virtio-mmio platform device)
		// above it is what stays put.
		idDev = parentDir(parent)
		if !within(d.sysReal, idDev) { // parent is the sysfs root itself
			return built{}, cardE, fmt.Errorf("virtio device %s: transport device %w %s: %s", parent, ErrOutsideRoot, d.sys, idDev)
		}
		if idBus, err = d.linkName(joinPath(idDev, "subsystem")); err != nil {
			return built{}, cardE, fmt.Errorf("virtio device %s has no transport device: %w", parent, err)
		}
	}
	name := filepath.Base(idDev)
	numaDev := parent
	if idBus == "pci" && isPCIAddress(name) {
		c.PCIAddress = name
		numaDev = idDev
		if c.VendorID, err = d.readHexID(joinPath(idDev, "vendor")); err != nil {
			return built{}, cardE, err
		}
		if c.DeviceID, err = d.readHexID(joinPath(idDev, "device")); err != nil {
			return built{}, cardE, err
		}
	}
	if c.NUMANode, err = d.readNUMA(joinPath(numaDev, "numa_node")); err != nil {
		return built{}, cardE, err
	}
	if err := alloc.ValidCardID(name); err != nil {
		return built{}, cardE, fmt.Errorf("%w %s of device %s: %w", ErrBadID, quote(name), idDev, err)
	}
	c.ID = name
	c.SysfsPath = d.underSys(parent)

	if n.card != nil {
		if c.CardNode, err = d.node(n.card, containerDRI); err != nil {
			return built{}, n.card, err
		}
	}
	if n.render != nil {
		rn, err := d.node(n.render, containerDRI)
		if err != nil {
			return built{}, n.render, err
		}
		c.RenderNode = &rn
	}
	if n.accel != nil {
		an, err := d.node(n.accel, containerAccel)
		if err != nil {
			return built{}, n.accel, err
		}
		c.AccelNode = &an
	}
	return built{card: c, g: g}, nil, nil
}

// linkName returns the name a `driver` or `subsystem` link gives: the
// last element of its target. Only the name is used, so a target of the
// kernel's shape (…/drivers/<driver>; …/bus/<bus> or …/class/<class>) is
// taken as it is written, whether or not it resolves: a tree copied from
// a host without its /sys/bus still names every driver and bus. Any
// other target must resolve within the sysfs root.
func (d *discovery) linkName(path string) (string, error) {
	target, err := d.res.readlink(path)
	if err != nil {
		return "", fmt.Errorf("read link %s: %w", path, &fs.PathError{Op: "readlink", Path: path, Err: err})
	}
	name, err := LinkName(target)
	if err != nil {
		return "", fmt.Errorf("link %s: %w", path, err)
	}
	if kernelShaped(filepath.Base(path), target) {
		return name, nil
	}
	if _, err := d.resolve(path); err != nil {
		return "", err
	}
	return name, nil
}

// kernelShaped reports whether target is what the kernel writes into a
// link named link: "driver" -> …/drivers/<name>, "subsystem" ->
// …/bus/<name> or …/class/<name>.
func kernelShaped(link, target string) bool {
	dir := filepath.Base(filepath.Dir(filepath.Clean(target)))
	switch link {
	case "driver":
		return dir == "drivers"
	case "subsystem":
		return dir == "bus" || dir == "class"
	}
	return false
}

// driverName returns the driver bound to a parent device. Platform and
// faux devices of DRM drivers that register their own device (vkms) have
// no driver of their own, or the generic faux_driver; their device name
// without the instance suffix names the driver.
func (d *discovery) driverName(parent, bus string) (string, error) {
	link := joinPath(parent, "driver")
	name, err := d.linkName(link)
	softwareBus := bus == "platform" || bus == "faux"
	switch {
	case err == nil && !(bus == "faux" && name == "faux_driver"):
		return name, nil
	case err == nil, softwareBus && isNotExist(link):
		return platformDriver(filepath.Base(parent)), nil
	default:
		return "", err
	}
}

func isNotExist(path string) bool {
	_, err := os.Lstat(path)
	return errors.Is(err, fs.ErrNotExist)
}

// platformDriver strips a ".N" instance suffix from a device name.
func platformDriver(dev string) string {
	if i := strings.LastIndexByte(dev, '.'); i > 0 {
		if _, ok := parseUintStrict(dev[i+1:]); ok {
			return dev[:i]
		}
	}
	return dev
}

func (d *discovery) readHexID(path string) (string, error) {
	raw, err := d.res.readAttr(path)
	if err != nil {
		return "", err
	}
	id, err := ParseHexID(raw)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return id, nil
}

func (d *discovery) readNUMA(path string) (int, error) {
	raw, err := d.res.readAttr(path)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := ParseNUMANode(raw)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// node checks the host node of e under the dev root: a char device with
// the numbers sysfs reports. dir is the node's directory in a container
// (/dev/dri, /dev/accel), and the host's under the dev root.
func (d *discovery) node(e *entry, dir string) (DeviceNode, error) {
	dri := joinPath(d.dev, strings.TrimPrefix(dir, "/dev/"))
	host := joinPath(dri, e.name)
	fd, name := unix.AT_FDCWD, host
	realDri, driErr := d.res.resolve(dri)
	if driErr == nil {
		fd, name = d.res.at(joinPath(realDri, e.name))
	}
	n, err := statCharAt(fd, name, host)
	if err != nil {
		return DeviceNode{}, err
	}
	// statChar found a char device, no symlink: attachByPath's
	// resolutions of this node and of the by-path links to it need not
	// look at it again.
	if driErr == nil {
		d.res.known(joinPath(realDri, e.name), false)
	}
	if n.Major != e.major || n.Minor != e.minor {
		return DeviceNode{}, fmt.Errorf("%w: %s is %d:%d, sysfs says %d:%d",
			ErrNodeMismatch, host, n.Major, n.Minor, e.major, e.minor)
	}
	n.Path = dir + "/" + e.name
	return n, nil
}

// statChar returns the numbers, mode and owner of a char device node,
// without following a symlink at path.
func statChar(path string) (DeviceNode, error) {
	return statCharAt(unix.AT_FDCWD, path, path)
}

// statCharAt is statChar of name in dirfd, which is path.
func statCharAt(dirfd int, name, path string) (DeviceNode, error) {
	var st unix.Stat_t
	if err := fstatatNoFollow(dirfd, name, &st); err != nil {
		return DeviceNode{}, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return DeviceNode{}, fmt.Errorf("%w: %s is not a char device", ErrNodeMismatch, path)
	}
	rdev := uint64(st.Rdev) //nolint:unconvert // Rdev is narrower on some platforms
	return DeviceNode{
		HostPath: path,
		Major:    unix.Major(rdev),
		Minor:    unix.Minor(rdev),
		Mode:     os.FileMode(st.Mode & 0o777),
		UID:      st.Uid,
		GID:      st.Gid,
	}, nil
}

// fstatatNoFollow is fstatat(2) of a link itself, retried when a signal
// interrupts it.
func fstatatNoFollow(dirfd int, name string, st *unix.Stat_t) error {
	for {
		if err := unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW); err != unix.EINTR {
			return err
		}
	}
}

// dropDuplicates leaves out every card whose ID another card also has:
// neither can be told apart from the other by its ID.
func (d *discovery) dropDuplicates(cards []built) []built {
	byID := map[string][]int{}
	for i, b := range cards {
		byID[b.card.ID] = append(byID[b.card.ID], i)
	}
	kept := make([]built, 0, len(cards))
	for _, b := range cards {
		same := byID[b.card.ID]
		if len(same) == 1 {
			kept = append(kept, b)
			continue
		}
		var others []string
		for _, j := range same {
			if cards[j].g != b.g {
				others = append(others, cards[j].g.parent)
			}
		}
		err := fmt.Errorf("%w %s: also the ID of %s", ErrDuplicateID, b.card.ID, strings.Join(others, ", "))
		d.skipGroup(b.g, b.g.cardEntry(), err)
	}
	return kept
}

// attachByPath adds every <dev>/dri/by-path link that resolves to a
// card's card or render node to that card.
func (d *discovery) attachByPath(cards []built) {
	dir := joinPath(joinPath(d.dev, "dri"), "by-path")
	links, err := os.ReadDir(dir)
	if err != nil || len(links) == 0 {
		return
	}
	type ref struct {
		card int
		node DeviceNode
	}
	targets := map[string]ref{}
	for i := range cards {
		for _, n := range cards[i].card.DRMNodes() {
			if r, err := d.res.resolve(n.HostPath); err == nil {
				targets[r] = ref{card: i, node: n}
			}
		}
	}
	for _, l := range links {
		if l.Type()&fs.ModeSymlink == 0 {
			continue
		}
		link := joinPath(dir, l.Name())
		r, err := d.res.resolve(link)
		if err != nil {
			continue
		}
		t, ok := targets[r]
		if !ok {
			continue
		}
		n := t.node
		n.Path = containerByPath + "/" + l.Name()
		n.HostPath = link
		cards[t.card].card.ByPath = append(cards[t.card].card.ByPath, n)
	}
}
