package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// resource is the default pool of the fake i915 card.
const resource = "dri-cdi.dev/i915"

type narrator struct {
	w       io.Writer
	verbose bool
}

func (n narrator) Logf(format string, args ...any) {
	if n.verbose {
		fmt.Fprintf(n.w, "    · %s\n", fmt.Sprintf(format, args...))
	}
}

func (n narrator) say(format string, args ...any) { fmt.Fprintf(n.w, format+"\n", args...) }

func (n narrator) block(text string) {
	for _, l := range strings.Split(text, "\n") {
		fmt.Fprintf(n.w, "      %s\n", l)
	}
}

func run(ctx context.Context, w io.Writer) (err error) {
	say := narrator{w: w, verbose: os.Getenv("DEMO_VERBOSE") != ""}
	start := time.Now()
	card := harness.IntelGPU(0)
	render := harness.RenderPath(card)

	say.say("dri-cdi demo: a real kubelet, containerd and runc on this machine, with a fake GPU.")
	say.say("")
	say.say("[1/4] Setting up a node on private paths (takes ~20s)")
	suite, err := harness.NewSuite(ctx, say)
	if err != nil {
		return err
	}
	stopSignals := suite.InstallSignalHandler()
	defer stopSignals()
	defer func() {
		say.say("")
		say.say("[4/4] Cleaning up: pods, kubelet, containerd, dri-cdi, mounts, cgroups")
		if cerr := suite.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if err == nil {
			say.say("      done in %s; nothing is left running.", time.Since(start).Round(time.Second))
		}
	}()
	node, err := suite.StartNode(ctx, say, harness.NodeOptions{
		Name:     "demo",
		GPUs:     []drmtest.GPU{card},
		Delivery: harness.DeliveryCDICRI,
		NRI:      true,
	})
	if err != nil {
		return err
	}
	say.say("      fake GPU: PCI %s, driver %s, nodes %s (226:%d) and %s (226:%d)",
		card.ID(), card.Driver, harness.CardPath(card), card.Card, render, int64(card.Render))
	say.say("      they are real mknod'ed character devices; no GPU driver serves those numbers here.")

	say.say("")
	say.say("[2/4] The bug: a pod mounts /dev/dri as a hostPath and opens %s", render)
	bug := harness.PodSpec{Name: "hostpath-gpu", HostPathDRI: true, Script: harness.ProbeAndWait(render)}
	if err := showPod(ctx, say, node, bug, render); err != nil {
		return err
	}
	say.say("      EPERM = \"Operation not permitted\": the container's device cgroup denies every")
	say.say("      device the runtime was not asked for. A hostPath is only a mount; it grants nothing.")

	say.say("")
	say.say("[3/4] The fix: dri-cdi advertises the GPU as %s and the pod requests it", resource)
	if _, err := node.WaitAllocatable(ctx, resource, 1, 90*time.Second); err != nil {
		return err
	}
	names, err := harness.CDINames(node.CDIDir)
	if err != nil {
		return err
	}
	say.say("      CDI devices written by dri-cdi-agent: %s", strings.Join(names, ", "))
	fix := harness.PodSpec{Name: "dri-cdi-gpu", Resources: map[string]int64{resource: 1}, Script: harness.ProbeAndWait(render)}
	if err := showPod(ctx, say, node, fix, render); err != nil {
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
	say.say("      the kubelet asked containerd for CDI devices: %s", strings.Join(spec.CDIDevices, ", "))
	for _, d := range spec.DevicesAt(render) {
		say.say("      container spec: linux.devices %s c %d:%d", d.Path, d.Major, d.Minor)
	}
	for _, r := range spec.AllowRules(226, int64(card.Render)) {
		say.say("      container spec: device cgroup allow c %d:%d %s", *r.Major, *r.Minor, r.Access)
	}
	say.say("      ENXIO = \"No such device or address\": the device cgroup ALLOWED the open and the")
	say.say("      kernel looked for a driver for 226:%d. This machine has none, so ENXIO is the success", int64(card.Render))
	say.say("      signal here; on a node with a real GPU the same open succeeds.")
	return nil
}

// showPod prints the pod's manifest, runs it and prints what opening path
// gave inside it.
func showPod(ctx context.Context, say narrator, node *harness.Node, p harness.PodSpec, path string) error {
	y, err := node.ManifestYAML(p)
	if err != nil {
		return err
	}
	say.say("      pod spec:")
	say.block("  " + strings.ReplaceAll(y, "\n", "\n  "))
	if err := node.CreatePod(ctx, p); err != nil {
		return err
	}
	out, err := node.WaitOutput(ctx, p.Name, harness.ProbeDone, 120*time.Second)
	if err != nil {
		return err
	}
	r, err := harness.ParseProbe(out, path)
	if err != nil {
		return err
	}
	say.say("      inside the pod: exec 3<>%s  ->  %s (%s)", path, r.Errno, r.Message)
	return nil
}
