package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/usage/usagetest"
)

// showUsage runs `dri-cdi top --once` against the running media-server
// pod. This machine has no GPU driver, so nothing writes DRM fdinfo: the
// proc tree top reads holds the pod's real PID with its real cgroup and
// comm, and a synthetic render-node fd whose fdinfo says the video engine
// works. The numbers are simulated; the attribution is real.
func showUsage(ctx context.Context, say narrator, suite *harness.Suite, node *harness.Node, gpu drmtest.GPU) error {
	c, err := node.PodContainer(ctx, "media-server")
	if err != nil {
		return err
	}
	bundles := filepath.Join(node.Dir, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io")
	raw, err := os.ReadFile(filepath.Join(bundles, c.ID, "init.pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return err
	}
	proc, err := usagetest.New(filepath.Join(node.Dir, "usage-proc"))
	if err != nil {
		return err
	}
	defer os.RemoveAll(proc.Root)
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return err
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return err
	}
	if err := proc.AddProcess(pid, strings.TrimSpace(string(comm)), string(cg)); err != nil {
		return err
	}
	render := filepath.Join(node.DevRoot, "dri", fmt.Sprintf("renderD%d", gpu.Render))
	info := func(videoNS uint64) string {
		return usagetest.FDInfo{Driver: gpu.Driver, PDev: gpu.ID(), ClientID: 1,
			Engines: map[string]uint64{"render": 2e8, "video": videoNS, "video-enhance": 1e8, "copy": 0},
			Memory:  map[string]uint64{"resident-system0": 96 << 10, "total-system0": 128 << 10}}.String()
	}
	if err := proc.SetFD(pid, 42, render, info(10e9)); err != nil {
		return err
	}
	// top reads twice, 2s apart; 1.2s more video time in between is 60%.
	go func() {
		time.Sleep(time.Second)
		_ = proc.SetFD(pid, 42, render, info(11_200_000_000))
	}()
	cmd := exec.CommandContext(ctx, suite.Product.CLI, "top", "--once", "--interval", "2s",
		"--proc-root", proc.Root, "--bundle-dir", bundles, "--sysfs-root", node.SysfsRoot, "--dev-root", node.DevRoot)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("dri-cdi top: %w\n%s", err, out)
	}
	say.say("      $ dri-cdi top --once   (SIMULATED usage: no driver writes fdinfo here; the pod, its")
	say.say("        PID and cgroup are real, the render-node fd and its engine figures are not)")
	say.block(strings.TrimRight(string(out), "\n"))
	if !strings.Contains(string(out), "media-server") {
		return fmt.Errorf("dri-cdi top shows no media-server row:\n%s", out)
	}
	say.say("      => the VIDEO column of the media server's row: it transcodes on the GPU")
	return nil
}
