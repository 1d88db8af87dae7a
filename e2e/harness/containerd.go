package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// containerd releases the workload scenarios run on besides the default
// one in $DRI_CDI_E2E_CACHE/bin. e2e/tools/install.sh builds each into
// $DRI_CDI_E2E_CACHE/containerd-<version>/.
const (
	// Containerd22 is what k3s 1.33-1.35 ship: CDI on, NRI on, and no
	// Container.CDIDevices in NRI (that came with 2.3).
	Containerd22 = "v2.2.9"
	// Containerd17 is what older k3s and many distributions ship: NRI and
	// CDI off by default, config version 2.
	Containerd17 = "v1.7.35"
)

// ContainerdBins are the containerd binaries of one node.
type ContainerdBins struct {
	// Version is the release, "" for the default build in bin/.
	Version    string
	Containerd string
	Shim       string
	Ctr        string
}

// containerdBins returns the binaries of version ("" is the suite's
// default) and checks they are there.
func (s *Suite) containerdBins(version string) (ContainerdBins, error) {
	if version == "" {
		return ContainerdBins{Containerd: s.Tools.Containerd, Shim: s.Tools.Shim, Ctr: s.Tools.Ctr}, nil
	}
	if !strings.HasPrefix(version, "v1.") && !strings.HasPrefix(version, "v2.") {
		return ContainerdBins{}, fmt.Errorf("containerd version %q: want v1.x.y or v2.x.y", version)
	}
	dir := filepath.Join(envOr(EnvCache, DefaultCache), "containerd-"+version)
	b := ContainerdBins{
		Version:    version,
		Containerd: filepath.Join(dir, "containerd"),
		Shim:       filepath.Join(dir, "containerd-shim-runc-v2"),
		Ctr:        filepath.Join(dir, "ctr"),
	}
	for _, p := range []string{b.Containerd, b.Shim, b.Ctr} {
		if err := executable(p); err != nil {
			return b, fmt.Errorf("containerd %s: %w (run `make e2e-tools` as root)", version, err)
		}
	}
	return b, nil
}

// bins returns the node's containerd binaries; StartNode has checked
// them.
func (n *Node) bins() ContainerdBins {
	b, err := n.suite.containerdBins(n.opts.Containerd)
	if err != nil {
		// Unreachable after StartNode; fall back to names that fail
		// loudly when run.
		return ContainerdBins{Version: n.opts.Containerd, Containerd: b.Containerd, Shim: b.Shim, Ctr: b.Ctr}
	}
	return b
}

// runtimeConfig is the node's containerd config, in the version its
// containerd reads.
func (n *Node) runtimeConfig() string {
	if strings.HasPrefix(n.opts.Containerd, "v1.") {
		return n.containerdConfigV2()
	}
	return n.containerdConfig()
}

// containerdConfigV2 is containerdConfig for containerd 1.7: config
// version 2, the CRI plugin as "io.containerd.grpc.v1.cri", the sandbox
// image as sandbox_image, CNI's bin_dir, and NRI switched on (1.7 has it
// off). CDI stays off, as 1.7 ships it: dri-cdi runs there in nri mode.
// The NRI socket and plugin dirs, the runc wrapper, runc root and
// cgroupfs settings are those of the version 3 config.
func (n *Node) containerdConfigV2() string {
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	const cri = `plugins."io.containerd.grpc.v1.cri"`
	return n.containerdConfigHead(2) + n.containerdNRI() + `
[` + cri + `]
  sandbox_image = ` + q(PauseImage) + `
  enable_cdi = false
  cdi_spec_dirs = [` + q(n.RuntimeCDIDir) + `]
  [` + cri + `.containerd]
    snapshotter = "overlayfs"
` + n.containerdRunc(cri) + `  [` + cri + `.cni]
    bin_dir = ` + q(filepath.Join(n.Dir, "cni", "bin")) + `
    conf_dir = ` + q(filepath.Join(n.Dir, "cni", "net.d")) + `
`
}

// runcBinary is the runc that containerd's runtime runs: the suite's
// runc, or on a host that needs an adaptation (runcRig) the runc-rig
// wrapper StartContainerd puts before it.
func (n *Node) runcBinary() string {
	if n.runcRig().needed() {
		return filepath.Join(n.runDir, "bin", "runc")
	}
	return n.suite.Tools.Runc
}

// runcRig is what runc-rig must adapt on this node: the oom_score_adj
// clamp where the host refuses negative values, and on a cgroup v2 rig
// the limits of the controllers its root does not offer (cgroupv2.go).
func (n *Node) runcRig() runcRigConfig {
	cfg := runcRigConfig{ClampOOMScoreAdj: n.suite.OOMClamp}
	if n.rig != nil {
		cfg.DropControllers = n.rig.missing
	}
	return cfg
}

// runcRigConfig is e2e/cmd/runc-rig's runc-rig.json.
type runcRigConfig struct {
	ClampOOMScoreAdj bool     `json:"clampOOMScoreAdj"`
	DropControllers  []string `json:"dropControllers,omitempty"`
}

func (c runcRigConfig) needed() bool { return c.ClampOOMScoreAdj || len(c.DropControllers) > 0 }

// installRuncRig puts runc-rig, its runc-rig.json and a runc.real link to
// the suite's runc where runcBinary says.
func (n *Node) installRuncRig() error {
	cfg := n.runcRig()
	if !cfg.needed() {
		return nil
	}
	bin, err := n.suite.rigWrapper()
	if err != nil {
		return err
	}
	runc := n.runcBinary()
	if err := os.MkdirAll(filepath.Dir(runc), 0o755); err != nil {
		return err
	}
	if err := copyFile(bin, runc, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(n.suite.Tools.Runc, runc+".real"); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(filepath.Dir(runc), "runc-rig.json"), data, 0o644)
}

// containerdConfigHead is the part of containerd's config that every
// config version spells the same: its private root, state, sockets, log
// level and opt dir, under "version = <version>".
func (n *Node) containerdConfigHead(version int) string {
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	return fmt.Sprintf("version = %d\n", version) + `root = ` + q(filepath.Join(n.Dir, "containerd", "root")) + `
state = ` + q(filepath.Join(n.Dir, "containerd", "state")) + `

[grpc]
  address = ` + q(n.ContainerdSocket) + `

[ttrpc]
  address = ` + q(n.ContainerdSocket+".ttrpc") + `

[debug]
  level = "info"

[plugins."io.containerd.internal.v1.opt"]
  path = ` + q(filepath.Join(n.Dir, "containerd", "opt")) + `
`
}

// containerdNRI is the NRI plugin's section, switched on with the node's
// socket and plugin dirs, as both config versions spell it.
func (n *Node) containerdNRI() string {
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	return `
[plugins."io.containerd.nri.v1.nri"]
  disable = false
  socket_path = ` + q(n.NRISocket) + `
  plugin_path = ` + q(filepath.Join(n.Dir, "nri", "plugins")) + `
  plugin_config_path = ` + q(filepath.Join(n.Dir, "nri", "conf.d")) + `
`
}

// containerdRunc is the default runtime's part of the CRI plugin's
// containerd table, under cri (the plugin's name in the config version):
// the node's shim and runc binary, runc's private root and cgroupfs.
func (n *Node) containerdRunc(cri string) string {
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	return `    default_runtime_name = "runc"
    [` + cri + `.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = ` + q(n.bins().Shim) + `
      [` + cri + `.containerd.runtimes.runc.options]
        BinaryName = ` + q(n.runcBinary()) + `
        Root = ` + q(filepath.Join(n.runDir, "runc")) + `
        SystemdCgroup = false
`
}

func (n *Node) containerdConfig() string {
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	const runtime = `plugins."io.containerd.cri.v1.runtime"`
	return n.containerdConfigHead(3) + n.containerdNRI() + `  plugin_registration_timeout = "5s"
  plugin_request_timeout = "2s"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = ` + q(PauseImage) + `

[` + runtime + `]
  cdi_spec_dirs = [` + q(n.RuntimeCDIDir) + `]
  # Pod network namespaces under the node's state dir, not /var/run/netns.
  netns_mounts_under_state_dir = true
  [` + runtime + `.containerd]
` + n.containerdRunc(runtime) + `  [` + runtime + `.cni]
    bin_dirs = [` + q(filepath.Join(n.Dir, "cni", "bin")) + `]
    conf_dir = ` + q(filepath.Join(n.Dir, "cni", "net.d")) + `
`
}

// StartContainerd starts containerd with the node's config and waits
// until it answers.
func (n *Node) StartContainerd(ctx context.Context) error {
	if err := n.installRuncRig(); err != nil {
		return err
	}
	cfg := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(n.runtimeConfig()), 0o644); err != nil {
		return err
	}
	bins := n.bins()
	path := "PATH=" + filepath.Dir(bins.Containerd) + ":" + os.Getenv("PATH")
	p, err := startProc("containerd", n.logPath("containerd"), n.pidDir(), []string{path}, n.inNamespaces(bins.Containerd, "--config", cfg)...)
	if err != nil {
		return err
	}
	n.containerd = p
	n.log.Logf("containerd %s started (pid %d)", n.containerdVersion(ctx), p.Pid())
	return p.waitReady(ctx, "containerd", 60*time.Second, func() bool {
		_, err := n.Ctr(ctx, "version")
		return err == nil
	})
}

// StopContainerd stops containerd; shims and containers keep running.
func (n *Node) StopContainerd() {
	n.containerd.Stop(syscall.SIGTERM, 20*time.Second)
}

// RestartContainerd stops and starts containerd.
func (n *Node) RestartContainerd(ctx context.Context) error {
	n.StopContainerd()
	return n.StartContainerd(ctx)
}

func (n *Node) importImages(ctx context.Context) error {
	for _, img := range n.suite.images {
		if out, err := n.Ctr(ctx, "-n", "k8s.io", "images", "import", img.Path); err != nil {
			return fmt.Errorf("import %s: %w\n%s", img.Ref, err, out)
		}
	}
	out, err := n.Crictl(ctx, "images", "-q")
	if err != nil {
		return fmt.Errorf("list images: %w", err)
	}
	if strings.Count(strings.TrimSpace(out), "\n")+1 < len(n.suite.images) {
		return fmt.Errorf("CRI sees %q after importing %d images", out, len(n.suite.images))
	}
	return nil
}

// ContainerdVersion is `containerd --version` of the node's containerd.
func (n *Node) ContainerdVersion(ctx context.Context) string { return n.containerdVersion(ctx) }
