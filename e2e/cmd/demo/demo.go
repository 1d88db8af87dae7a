package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// resource is the default pool of the fake i915 GPU.
const resource = "dri-cdi.dev/i915"

type narrator struct {
	w       io.Writer
	verbose bool
}

// Logf receives the harness's progress lines; they are shown with
// DEMO_VERBOSE=1.
func (n narrator) Logf(format string, args ...any) {
	if n.verbose {
		fmt.Fprintf(n.w, "      · %s\n", fmt.Sprintf(format, args...))
	}
}

func (n narrator) say(format string, args ...any) { fmt.Fprintf(n.w, format+"\n", args...) }

func (n narrator) block(text string) {
	for _, l := range strings.Split(text, "\n") {
		fmt.Fprintf(n.w, "        %s\n", l)
	}
}

func run(ctx context.Context, w io.Writer) (err error) {
	say := narrator{w: w, verbose: os.Getenv("DEMO_VERBOSE") != ""}
	start := time.Now()
	gpu := harness.IntelGPU(0)
	render := harness.RenderPath(gpu)
	// The command people run to check a GPU in a container.
	script := fmt.Sprintf("exec 3<>%s && echo opened %s", render, render)

	v2, err := cgroupV2FromEnv()
	if err != nil {
		return err
	}
	hierarchy := "cgroup v1 (this machine's hierarchy): the devices controller enforces each container's device access"
	if harness.HostCgroupUnified() {
		hierarchy = "cgroup v2 (this machine's hierarchy): runc attaches an eBPF program (cgroup_device) to each container's cgroup"
	}
	if v2 || harness.HostCgroupUnified() {
		// The container must outlive the open (a failed exec redirection
		// ends the shell, hence the subshell), so that its cgroup and its
		// device program are still there for bpftool.
		script = "(" + script + "); exec sleep 3600"
	}
	if v2 {
		hierarchy = "cgroup v2: runc attaches an eBPF program (cgroup_device) to each container's cgroup; containerd, runc and the kubelet run in a private mount and cgroup namespace whose /sys/fs/cgroup is the kernel's cgroup2 tree"
	}
	say.say("dri-cdi demo: a real kubelet, containerd and runc on this machine, with a fake GPU.")
	say.say("")
	say.say("[1/6] Setting up a node on private paths")
	say.say("      every step runs on %s", hierarchy)
	if harness.LockBusy(harness.LockPath) {
		say.say("      another e2e run holds %s; waiting for it to finish", harness.LockPath)
	}
	suite, err := harness.NewSuite(ctx, say)
	if err != nil {
		return err
	}
	stopSignals := suite.InstallSignalHandler()
	defer stopSignals()
	defer func() {
		say.say("")
		say.say("[6/6] Cleaning up: pods, dri-cdi, kubelet, containerd, shims, mounts, cgroups")
		if cerr := suite.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if err == nil {
			say.say("      done in %s; nothing is left running.", time.Since(start).Round(time.Second))
		}
	}()
	node, err := suite.StartNode(ctx, say, harness.NodeOptions{
		Name:     "demo",
		GPUs:     []drmtest.GPU{gpu},
		Delivery: harness.DeliveryCDICRI,
		NRI:      true,
		CgroupV2: v2,
	})
	if err != nil {
		return err
	}
	say.say("      kubelet (standalone, static pods), containerd with NRI, runc, dri-cdi-agent, dri-cdi-nri")
	say.say("      fake GPU: PCI %s (%s), %s = char 226:%d, %s = char 226:%d",
		gpu.ID(), gpu.Driver, harness.CardPath(gpu), gpu.Card, render, gpu.Render)
	say.say("      these are real device nodes (mknod); no GPU driver serves those numbers here.")

	say.say("")
	say.say("[2/6] The bug: a pod mounts /dev/dri as a hostPath and runs: %s", script)
	bug := harness.PodSpec{Name: "hostpath-gpu", HostPathDRI: true, Script: script}
	if err := showPod(ctx, say, node, bug, render, harness.EPERM); err != nil {
		return err
	}
	say.say("      EPERM: the container's device cgroup denies every device the runtime was not")
	say.say("      asked for. A hostPath is only a mount; it grants nothing.")
	if err := showFilter(ctx, say, node, bug.Name); err != nil {
		return err
	}

	say.say("")
	say.say("[3/6] The fix: dri-cdi advertises the GPU as %s; the pod requests one", resource)
	if _, err := node.WaitAllocatable(ctx, resource, 1, 90*time.Second); err != nil {
		return err
	}
	names, err := harness.CDINames(node.CDIDir)
	if err != nil {
		return err
	}
	say.say("      CDI devices written by dri-cdi-agent: %s", strings.Join(names, ", "))
	fix := harness.PodSpec{Name: "dri-cdi-gpu", Resources: map[string]int64{resource: 1}, Script: script}
	if err := showPod(ctx, say, node, fix, render, harness.ENXIO); err != nil {
		return err
	}
	c, err := node.PodContainer(ctx, fix.Name)
	if err != nil {
		return err
	}
	spec, err := node.Inspect(ctx, c.ID)
	if err != nil {
		return err
	}
	say.say("      the kubelet passed the CDI device to containerd: %s", strings.Join(spec.CDIDevices, ", "))
	var devs []string
	rules := map[string]bool{}
	for _, d := range spec.Devices {
		if d.Major == 226 {
			devs = append(devs, fmt.Sprintf("%s (c %d:%d)", d.Path, d.Major, d.Minor))
			for _, r := range spec.AllowRules(d.Major, d.Minor) {
				rules[fmt.Sprintf("c %d:%d %s", *r.Major, *r.Minor, r.Access)] = true
			}
		}
	}
	say.say("      container spec, linux.devices: %s", strings.Join(devs, ", "))
	say.say("      container spec, device cgroup allows: %s", strings.Join(slices.Sorted(maps.Keys(rules)), ", "))
	if err := showFilter(ctx, say, node, fix.Name); err != nil {
		return err
	}
	say.say("      ENXIO: the device cgroup ALLOWED the open and the kernel looked for a driver for")
	say.say("      226:%d. This machine has none, so ENXIO is the success signal here; on a node with", gpu.Render)
	say.say("      a real GPU the same open succeeds.")

	say.say("")
	say.say("[4/6] The real workload: a media-server image starts as root, joins the render node's")
	say.say("      group and drops to uid 1000 with su, as pms-docker's init does")
	if err := node.DeletePod(ctx, fix.Name); err != nil {
		return err
	}
	if err := showDrop(ctx, say, node, render); err != nil {
		return err
	}

	say.say("")
	say.say("[5/6] What the media server does with its GPU: dri-cdi top, per pod and container")
	return showUsage(ctx, say, suite, node, gpu)
}

// cgroupV2FromEnv reads DRI_CDI_DEMO_CGROUP (make demo DEMO_CGROUP=v2):
// "v2" runs the demo on the cgroup v2 rig, "" or "v1" on the host's
// hierarchy.
func cgroupV2FromEnv() (bool, error) {
	switch v := os.Getenv("DRI_CDI_DEMO_CGROUP"); v {
	case "", "v1":
		return false, nil
	case "v2":
		return true, nil
	default:
		return false, fmt.Errorf("DRI_CDI_DEMO_CGROUP=%q: want v1 or v2", v)
	}
}

// showFilter prints, on cgroup v2 (the rig, or a unified host), the eBPF
// device program that enforces the pod's container: bpftool must list
// one.
func showFilter(ctx context.Context, say narrator, node *harness.Node, pod string) error {
	if !node.CgroupV2() && !harness.HostCgroupUnified() {
		return nil
	}
	c, err := node.PodContainer(ctx, pod)
	if err != nil {
		return err
	}
	f, err := node.ContainerDeviceFilter(ctx, c.ID)
	if err != nil {
		return err
	}
	if len(f.Programs) == 0 {
		return fmt.Errorf("pod %s: bpftool lists no %s program on %s", pod, harness.AttachCgroupDevice, f.Cgroup)
	}
	var drm []string
	for _, mm := range f.AllowedChar {
		if strings.HasPrefix(mm, "226:") {
			drm = append(drm, "c "+mm)
		}
	}
	allows := "allows no DRM device (c 226:N)"
	if len(drm) > 0 {
		allows = "allows " + strings.Join(drm, ", ")
	}
	say.say("      bpftool cgroup show %s:", f.Cgroup)
	for _, p := range f.Programs {
		say.say("        program %d, %s: the cgroup v2 device filter runc built from this spec", p.ID, p.AttachType)
	}
	say.say("        (bpftool prog dump xlated: it %s)", allows)
	return nil
}

// showDrop runs the root-start-then-drop pod and prints what it saw: the
// node's owner as root, the user's groups after su, and the open as uid
// 1000. The host's group, no gid 0 and ENXIO are required.
func showDrop(ctx context.Context, say narrator, node *harness.Node, render string) error {
	p := harness.PodSpec{Name: "media-server", Resources: map[string]int64{resource: 1}, Script: harness.RootStartThenDrop(render)}
	out, err := runShown(ctx, say, node, p, harness.ProbeDone)
	if err != nil {
		return err
	}
	get := func(key string) string {
		for _, line := range strings.Split(out, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), key+" "); ok {
				return strings.TrimSpace(rest)
			}
		}
		return ""
	}
	owner, uid, groups := get("NODE"), get("UID"), strings.Fields(get("GROUPS"))
	probe, err := harness.ParseProbe(out, render)
	if err != nil {
		return err
	}
	say.say("      as root, before the drop: %s is %s (uid:gid mode), the host node's group", render, owner)
	say.say("      after su to uid %s: groups %s", uid, strings.Join(groups, " "))
	say.say("      uid %s opens %s: %s", uid, render, probe.Message)
	hostGID := strings.TrimPrefix(strings.Fields(owner + " ")[0], "0:")
	switch {
	case uid != "1000":
		return fmt.Errorf("pod %s: want uid 1000 after su, got %q", p.Name, uid)
	case slices.Contains(groups, "0"):
		return fmt.Errorf("pod %s: the user joined gid 0 (groups %v): the node was root:root inside the container", p.Name, groups)
	case hostGID == "0" || !slices.Contains(groups, hostGID):
		return fmt.Errorf("pod %s: the user is not in the host node's group (node %s, groups %v)", p.Name, owner, groups)
	case probe.Errno != harness.ENXIO:
		return fmt.Errorf("pod %s: want ENXIO as uid 1000, the open gave %q", p.Name, probe.Message)
	}
	say.say("      => ENXIO as uid 1000, through the host's group; gid 0 was never handed out")
	return nil
}

// runShown prints the pod's manifest, runs it and returns its output once
// the output holds marker.
func runShown(ctx context.Context, say narrator, node *harness.Node, p harness.PodSpec, marker string) (string, error) {
	y, err := node.ManifestYAML(p)
	if err != nil {
		return "", err
	}
	say.say("      static pod manifest:")
	say.block(y)
	if err := node.CreatePod(ctx, p); err != nil {
		return "", err
	}
	return node.WaitOutput(ctx, p.Name, marker, 120*time.Second)
}

// showPod prints the pod's manifest, runs it and prints what the open of
// path gave inside it; anything but want is an error.
func showPod(ctx context.Context, say narrator, node *harness.Node, p harness.PodSpec, path, want string) error {
	out, err := runShown(ctx, say, node, p, path)
	if err != nil {
		return err
	}
	out = strings.TrimSpace(out)
	errno := harness.Errno(out)
	say.say("      pod output: %s", out)
	if errno != want {
		return fmt.Errorf("pod %s: want %s, the open gave %q", p.Name, want, out)
	}
	say.say("      => %s", errno)
	return nil
}
