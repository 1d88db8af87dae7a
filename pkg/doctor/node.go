package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

func (d *doctor) checkKubelet() {
	d.checkDevicePluginDir()
	d.checkPodResources()
}

// checkDevicePluginDir reports the kubelet's device plugin registration
// socket.
func (d *doctor) checkDevicePluginDir() {
	dir := d.opts.KubeletDir
	if fi, err := os.Stat(d.host(dir)); err != nil || !fi.IsDir() {
		d.add("kubelet.device-plugins", Fail, fmt.Sprintf("%s is not a directory: is the kubelet running, with its default root dir?", dir),
			"start the kubelet; it serves kubelet.sock from /var/lib/kubelet/device-plugins (even with --root-dir); pass --kubelet-dir if yours differs")
	} else if err := isSocket(filepath.Join(dir, "kubelet.sock"), d.host(filepath.Join(dir, "kubelet.sock"))); err != nil {
		d.add("kubelet.device-plugins", Fail, err.Error()+": the kubelet's device plugin registration socket is missing",
			"start the kubelet (it re-creates kubelet.sock on start; the agent re-registers when it appears)")
	} else {
		d.add("kubelet.device-plugins", OK, filepath.Join(dir, "kubelet.sock")+" is a socket", "")
	}
}

// checkPodResources reports the kubelet's PodResources socket.
func (d *doctor) checkPodResources() {
	bad := Fail
	if d.opts.Delivery == DeliveryDeviceSpecs {
		bad = Warn
	}
	if err := isSocket(d.opts.PodResourcesSocket, d.host(d.opts.PodResourcesSocket)); err != nil {
		d.add("kubelet.pod-resources", bad, err.Error()+": the NRI plugin confirms every allocation through it",
			"start the kubelet; with --root-dir the socket is <root-dir>/pod-resources/kubelet.sock: pass that as --pod-resources-socket")
	} else {
		d.add("kubelet.pod-resources", OK, d.opts.PodResourcesSocket+" is a socket", "")
	}
}

// checkDevices runs discovery and reports the cards and what was skipped.
func (d *doctor) checkDevices() []drm.Card {
	inv, err := config.Default().Discover(drm.Roots{Sysfs: d.host(d.opts.SysfsRoot), Dev: d.host(d.opts.DevRoot)})
	if err != nil {
		d.add("devices", Fail, err.Error(), "run as root on the host, with --sysfs-root and --dev-root pointing at sysfs and /dev")
		return nil
	}
	for _, e := range inv.Skipped {
		d.add("devices.skipped", Warn, e.Error(), "a card with missing or wrong device nodes is not advertised; check udev and the driver (dmesg)")
	}
	for _, e := range inv.Companions {
		d.add("devices.companions", Warn, e.Error(), "the card is advertised without this node; check that its driver is loaded and udev made the node")
	}
	if len(inv.Cards) == 0 {
		d.add("devices", Warn, fmt.Sprintf("no DRM card under %[1]s/class/drm and no accel device under %[1]s/class/accel: nothing to advertise", d.opts.SysfsRoot),
			"load the GPU's or NPU's kernel driver (lsmod, dmesg); dri-cdi needs the device's DRM or accel nodes")
		return nil
	}
	var parts []string
	for _, c := range inv.Cards {
		var nodes []string
		for _, n := range c.DRMNodes() {
			nodes = append(nodes, filepath.Base(n.Path))
		}
		if c.DisplayOnly() {
			nodes = append(nodes, "display-only")
		}
		parts = append(parts, fmt.Sprintf("%s (%s: %s)", c.ID, c.Driver, strings.Join(nodes, ", ")))
	}
	d.add("devices", OK, fmt.Sprintf("%d device(s): %s", len(inv.Cards), strings.Join(parts, "; ")), "")
	return inv.Cards
}

// checkSpecs validates our CDI spec files with the CDI library and
// compares their devices with the discovered cards and the host's nodes.
func (d *doctor) checkSpecs(cards []drm.Card) {
	devices, nodes, ok := d.checkSpecFiles()
	if !ok {
		return
	}
	d.checkSpecCards(cards, devices)
	d.checkSpecNodes(nodes)
}

// checkSpecFiles reports what cdi.Scan found of our kind in the CDI dir.
// It returns the files defining each device name and the first spec node
// of each host path; ok is false when there are no specs to compare.
func (d *doctor) checkSpecFiles() (devices map[string][]string, nodes map[string]nodeRef, ok bool) {
	dir, kind := d.opts.CDIDir, d.opts.CDIKind
	res, err := cdi.Scan([]string{dir}, cdi.OnlyKind(kind), cdi.WithResolve(d.host))
	if err != nil {
		d.add("cdi.specs", Fail, err.Error(), "pass the kind of the agent's config as --cdi-kind or --config")
		return nil, nil, false
	}
	if err := res.Dirs[0].Err; errors.Is(err, fs.ErrNotExist) {
		d.add("cdi.specs", Warn, dir+" does not exist: the agent has not written any CDI spec", "deploy dri-cdi (the agent creates the directory)")
		return nil, nil, false
	} else if err != nil {
		d.add("cdi.specs", Fail, fmt.Sprintf("read CDI dir: %v", err), "run as root")
		return nil, nil, false
	}
	if len(res.Files) == 0 {
		prefix, _ := cdi.FilePrefix(kind) // kind is valid: Scan took it
		d.add("cdi.specs", Warn, fmt.Sprintf("no %s* spec in %s: the agent is not running or found no card", prefix, dir), "deploy dri-cdi; check the agent's log")
		return nil, nil, false
	}
	devices, nodes = map[string][]string{}, map[string]nodeRef{}
	for _, f := range res.Files {
		switch {
		case errors.Is(f.Err, cdi.ErrOtherKind):
			d.add("cdi.spec", Fail, f.Err.Error(), "remove the file; only the agent writes files with this prefix")
			continue
		case f.Err != nil:
			d.add("cdi.spec", Fail, f.Err.Error(), "the agent rewrites its specs on start; remove the file if no agent owns it")
			continue
		}
		for _, dev := range f.Spec.Devices {
			devices[dev.Name] = append(devices[dev.Name], f.Path)
			for _, n := range dev.ContainerEdits.DeviceNodes {
				hp := n.HostPath
				if hp == "" {
					hp = n.Path
				}
				if _, ok := nodes[hp]; !ok && n.Major != 0 {
					nodes[hp] = nodeRef{major: n.Major, minor: n.Minor, device: dev.Name, file: f.Path}
				}
			}
		}
	}
	for _, dup := range res.Duplicates {
		d.add("cdi.spec", Fail, fmt.Sprintf("device %s is defined in %d files (%s): the runtime refuses ambiguous names", dup.Device, len(dup.Files), strings.Join(dup.Files, ", ")),
			"remove the files no agent owns")
	}
	invalid := len(res.Duplicates) > 0 || slices.ContainsFunc(res.Files, func(f cdi.SpecFile) bool { return f.Err != nil })
	if !invalid {
		d.add("cdi.specs", OK, fmt.Sprintf("%d valid spec file(s) of kind %s in %s", len(res.Files), kind, dir), "")
	}
	return devices, nodes, true
}

// checkSpecCards compares the cards with the spec devices: every card
// with a render node needs one, and no device may name a card that is
// not on this node.
func (d *doctor) checkSpecCards(cards []drm.Card, devices map[string][]string) {
	byID := map[string]bool{}
	var missing []string
	for _, c := range cards {
		byID[c.ID] = true
		if _, ok := devices[c.ID]; !ok && !c.DisplayOnly() {
			missing = append(missing, c.ID)
		}
	}
	var stale []string
	for name := range devices {
		if name != cdi.AllDevice && !byID[name] {
			stale = append(stale, name)
		}
	}
	sort.Strings(stale)
	if len(missing) > 0 {
		d.add("cdi.cards", Warn, "card(s) without a CDI device: "+strings.Join(missing, ", "),
			"the agent writes a spec for every card a pool takes: check that it runs and that the config's pools take these cards")
	}
	if len(stale) > 0 {
		d.add("cdi.cards", Fail, "CDI device(s) for card(s) not on this node: "+strings.Join(stale, ", ")+"; pods allocated them fail to start",
			"start the agent (it removes specs of cards that are gone), or remove those files")
	}
	if len(missing) == 0 && len(stale) == 0 {
		d.add("cdi.cards", OK, "every card with a render node has a CDI device", "")
	}
}

// checkSpecNodes compares the spec's device nodes with the host's.
func (d *doctor) checkSpecNodes(nodes map[string]nodeRef) {
	var wrong []string
	for hp, ref := range nodes {
		if msg := d.compareNode(hp, ref); msg != "" {
			wrong = append(wrong, msg)
		}
	}
	sort.Strings(wrong)
	if len(wrong) > 0 {
		d.add("cdi.nodes", Fail, strings.Join(wrong, "; "),
			"the specs are stale: start the agent, which rewrites them when the nodes change")
	} else {
		d.add("cdi.nodes", OK, fmt.Sprintf("%d device node(s) in the specs match the host", len(nodes)), "")
	}
}

type nodeRef struct {
	major, minor int64
	device, file string
}

// compareNode checks that the host node a spec names exists with the
// spec's numbers. Host paths under /dev are looked up under DevRoot.
func (d *doctor) compareNode(hostPath string, ref nodeRef) string {
	p := d.host(hostPath)
	if rest, ok := strings.CutPrefix(hostPath, "/dev/"); ok {
		p = d.host(filepath.Join(d.opts.DevRoot, rest))
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return fmt.Sprintf("%s (device %s): %v", hostPath, ref.device, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return fmt.Sprintf("%s (device %s) is not a character device", hostPath, ref.device)
	}
	maj, mnr := int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
	if maj != ref.major || mnr != ref.minor {
		return fmt.Sprintf("%s (device %s) is %d:%d on the host, %d:%d in %s", hostPath, ref.device, maj, mnr, ref.major, ref.minor, ref.file)
	}
	return ""
}

// advise recommends a delivery mode from what the runtime supports.
func (d *doctor) advise(rt runtimeState) {
	switch {
	case rt.cdi == yes && rt.nri == yes:
		d.rep.Recommended = DeliveryCDICRI
	case rt.nri == yes:
		d.rep.Recommended = DeliveryNRI
	case rt.nri == no:
		d.rep.Recommended = DeliveryDeviceSpecs
	default:
		d.rep.Recommended = DeliveryNRI
	}
	why := map[string]string{
		DeliveryCDICRI:      "containerd resolves our CDI names and NRI is reachable",
		DeliveryNRI:         "NRI is reachable but containerd may not resolve our CDI names",
		DeliveryDeviceSpecs: "NRI is not reachable",
	}[d.rep.Recommended]
	overlay := map[string]string{
		DeliveryCDICRI:      "kustomize base or k3s overlay; Helm delivery=cdi-cri",
		DeliveryNRI:         "kustomize overlay nri-mode; Helm delivery=nri",
		DeliveryDeviceSpecs: "kustomize overlay device-specs; Helm delivery=device-specs,nri.enabled=false",
	}[d.rep.Recommended]
	if d.opts.Delivery == d.rep.Recommended {
		d.add("delivery", OK, fmt.Sprintf("%s fits this node: %s", d.opts.Delivery, why), "")
		return
	}
	d.add("delivery", Warn, fmt.Sprintf("deployed with %s, but %s fits this node: %s", d.opts.Delivery, d.rep.Recommended, why),
		fmt.Sprintf("deploy with --delivery %s (%s)", d.rep.Recommended, overlay))
}
