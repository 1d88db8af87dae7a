package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	nriapi "github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// node describes a fake host for one test.
type node struct {
	config                                 string // fixture under testdata/containerd copied to /etc/containerd/config.toml; "k3s" lays out k3s's tree
	version                                string // containerd version
	delivery                               string
	noKubelet, noPodResources, noNRISocket bool
	cgroup                                 string // v2, v1, hybrid, or "" for none
	gpus                                   []drmtest.GPU
	// specs are extra spec files written into the CDI dir, by file name.
	specs map[string]string
	// matchingSpecs writes a correct spec for every GPU.
	matchingSpecs bool
	// With config "k3s": leftover is a fixture copied to
	// /etc/containerd/config.toml too (another containerd install);
	// k3sRunning serves K3sContainerdSocket; k3sDropIns makes the
	// generated config import config-v3.toml.d/*.toml, as newer k3s does.
	leftover               string
	k3sRunning, k3sDropIns bool
}

// build lays the node out under a fresh short temp dir (unix socket
// paths must stay short) and returns the options to check it with.
func (n node) build(t *testing.T) Options {
	t.Helper()
	root, err := os.MkdirTemp("", "dc")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	opts := DefaultOptions()
	opts.Root = root
	opts.ContainerdVersion = n.version
	if n.delivery != "" {
		opts.Delivery = n.delivery
	}
	if len(n.gpus) > 0 {
		drmtest.SkipUnlessRoot(t)
	}
	_, err = drmtest.NewTree(root, n.gpus...)
	require.NoError(t, err)

	switch n.config {
	case "":
	case "k3s":
		copyTree(t, "testdata/containerd/var", filepath.Join(root, "var"))
		if n.leftover != "" {
			copyTree(t, filepath.Join("testdata/containerd", n.leftover), filepath.Join(root, "etc/containerd/config.toml"))
		}
		if n.k3sDropIns {
			dir := filepath.Join(root, "var/lib/rancher/k3s/agent/etc/containerd")
			gen := filepath.Join(dir, "config.toml")
			raw, err := os.ReadFile(gen)
			require.NoError(t, err)
			head, rest, _ := strings.Cut(string(raw), "\n")
			writeFile(t, gen, head+"\nimports = [\"/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.d/*.toml\"]\n"+rest)
			require.NoError(t, os.Remove(filepath.Join(dir, K3sTemplateV3)))
			writeFile(t, filepath.Join(dir, "config-v3.toml.d/50-nri.toml"), "[plugins.'io.containerd.nri.v1.nri']\n  disable = false\n")
		}
	default:
		copyTree(t, filepath.Join("testdata/containerd", n.config), filepath.Join(root, "etc/containerd/config.toml"))
		copyTree(t, "testdata/containerd/conf.d", filepath.Join(root, "etc/containerd/conf.d"))
	}
	listen := func(p string) {
		p = filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		l, err := net.Listen("unix", p)
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, opts.KubeletDir), 0o755))
	if !n.noKubelet {
		listen(filepath.Join(opts.KubeletDir, "kubelet.sock"))
	}
	if !n.noPodResources {
		listen(opts.PodResourcesSocket)
	}
	if !n.noNRISocket {
		listen(opts.NRISocket)
	}
	if n.k3sRunning {
		listen(K3sContainerdSocket)
	}
	cg := filepath.Join(root, "sys/fs/cgroup")
	switch n.cgroup {
	case "v2":
		writeFile(t, filepath.Join(cg, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	case "hybrid":
		writeFile(t, filepath.Join(cg, "unified/cgroup.controllers"), "\n")
		require.NoError(t, os.MkdirAll(filepath.Join(cg, "devices"), 0o755))
	case "v1":
		require.NoError(t, os.MkdirAll(filepath.Join(cg, "devices"), 0o755))
	}
	cdiDir := filepath.Join(root, opts.CDIDir)
	require.NoError(t, os.MkdirAll(cdiDir, 0o755))
	if n.matchingSpecs {
		for _, g := range n.gpus {
			name, err := cdi.FileName(opts.CDIKind, g.ID())
			require.NoError(t, err)
			body := spec(g.ID(), g.Card, g.Render)
			if g.Class == drm.ClassAccel {
				body = accelSpec(g.ID(), g.Card)
			}
			writeFile(t, filepath.Join(cdiDir, name), body)
		}
	}
	for name, body := range n.specs {
		writeFile(t, filepath.Join(cdiDir, name), body)
	}
	return opts
}

// spec is a CDI spec of our kind with one device with a card and a
// render node.
func spec(id string, card, render int) string {
	return specOf(id, fmt.Sprintf("/dev/dri/card%d=226:%d", card, card), fmt.Sprintf("/dev/dri/renderD%d=226:%d", render, render))
}

// accelSpec is a CDI spec of our kind with one device with an accel
// node.
func accelSpec(id string, minor int) string {
	return specOf(id, fmt.Sprintf("/dev/accel/accel%d=261:%d", minor, minor))
}

// specOf is a CDI spec of our kind with one device with nodes, each
// "path=major:minor".
func specOf(id string, nodes ...string) string {
	s := fmt.Sprintf("cdiVersion: 0.6.0\nkind: dri-cdi.dev/gpu\ndevices:\n- name: %q\n  containerEdits:\n    deviceNodes:\n", id)
	for _, n := range nodes {
		path, num, _ := strings.Cut(n, "=")
		major, minor, _ := strings.Cut(num, ":")
		s += fmt.Sprintf("    - {path: %s, type: c, major: %s, minor: %s, permissions: rw}\n", path, major, minor)
	}
	return s
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, raw, 0o644)
	}))
}

var intel = drmtest.IntelIGPU.WithNodes(1, 128)

func TestCheck(t *testing.T) {
	cases := map[string]struct {
		node        node
		want        map[string]Status // checks that must be there with this status
		wantIn      map[string]string // text that a check's message or fix must contain
		failed      bool
		recommended string
		allOK       bool
	}{
		"containerd 2 v3 config, healthy node": {
			node:        node{config: "v3-containerd2.toml", cgroup: "v2", gpus: []drmtest.GPU{intel}, matchingSpecs: true},
			allOK:       true,
			recommended: DeliveryCDICRI,
		},
		"k3s generated config found without a flag": {
			node: node{config: "k3s", cgroup: "v2"},
			want: map[string]Status{"containerd.config": OK, "containerd.template": OK, "containerd.cdi": OK,
				"containerd.cdi_spec_dirs": OK, "containerd.nri": OK, "containerd.nri.socket": OK},
			wantIn: map[string]string{
				"containerd.config":   "/var/lib/rancher/k3s/agent/etc/containerd/config.toml (version 3",
				"containerd.template": "config-v3.toml.tmpl",
			},
			recommended: DeliveryCDICRI,
		},
		"k3s running next to a leftover containerd config: k3s's config is read": {
			node: node{config: "k3s", cgroup: "v2", leftover: "nri-disabled.toml", k3sRunning: true},
			want: map[string]Status{"containerd.config": OK, "containerd.nri": OK, "k3s": OK},
			wantIn: map[string]string{
				"containerd.config": "/var/lib/rancher/k3s/agent/etc/containerd/config.toml (version 3); read because k3s's containerd answers on /run/k3s/containerd/containerd.sock; not read: /etc/containerd/config.toml",
			},
			recommended: DeliveryCDICRI,
		},
		"k3s not running next to a leftover containerd config: the first is read and the other named": {
			node: node{config: "k3s", cgroup: "v2", leftover: "nri-disabled.toml", noNRISocket: true},
			want: map[string]Status{"containerd.config": OK, "containerd.nri": Fail},
			wantIn: map[string]string{
				"containerd.config": "/etc/containerd/config.toml (version 3); read because it comes first and /run/k3s/containerd/containerd.sock does not answer; not read: /var/lib/rancher/k3s/agent/etc/containerd/config.toml (pass --containerd-config to choose)",
			},
			failed:      true,
			recommended: DeliveryDeviceSpecs,
		},
		"k3s with a drop-in directory": {
			node: node{config: "k3s", cgroup: "v2", k3sRunning: true, k3sDropIns: true},
			want: map[string]Status{"containerd.config": OK, "containerd.template": OK, "containerd.nri": OK},
			wantIn: map[string]string{
				"containerd.config":   "imports /var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.d/50-nri.toml",
				"containerd.template": "imports /var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.d/*.toml: put additions there",
				"containerd.nri":      "disable = false",
			},
			recommended: DeliveryCDICRI,
		},
		"NRI disabled": {
			node:        node{config: "nri-disabled.toml", cgroup: "v2", noNRISocket: true},
			want:        map[string]Status{"containerd.nri": Fail, "containerd.cdi": OK, "delivery": Warn},
			wantIn:      map[string]string{"containerd.nri": "disable = false", "delivery": "device-specs"},
			failed:      true,
			recommended: DeliveryDeviceSpecs,
		},
		"CDI dir missing from cdi_spec_dirs": {
			node:        node{config: "cdi-dir-not-listed.toml", cgroup: "v2"},
			want:        map[string]Status{"containerd.cdi_spec_dirs": Fail, "containerd.nri": OK, "delivery": Warn},
			wantIn:      map[string]string{"containerd.cdi_spec_dirs": "unresolvable CDI devices", "delivery": "--delivery nri"},
			failed:      true,
			recommended: DeliveryNRI,
		},
		"CDI dir missing from cdi_spec_dirs, nri mode": {
			node:        node{config: "cdi-dir-not-listed.toml", cgroup: "v2", delivery: DeliveryNRI},
			want:        map[string]Status{"containerd.cdi_spec_dirs": Warn, "delivery": OK},
			recommended: DeliveryNRI,
		},
		"containerd 1.7 v2 config with CDI and NRI off": {
			node: node{config: "containerd17-v2-cdi-off.toml", version: "1.7.27", cgroup: "v1", noNRISocket: true},
			want: map[string]Status{"containerd.config": OK, "containerd.cdi": Fail, "containerd.nri": Fail, "cgroup": Warn},
			wantIn: map[string]string{
				"containerd.cdi": `enable_cdi = true under [plugins."io.containerd.grpc.v1.cri"]`,
				"cgroup":         "failCgroupV1",
			},
			failed:      true,
			recommended: DeliveryDeviceSpecs,
		},
		"containerd 1.7 v2 config with CDI and NRI off, device-specs mode": {
			node:        node{config: "containerd17-v2-cdi-off.toml", version: "1.7.27", cgroup: "v2", noNRISocket: true, delivery: DeliveryDeviceSpecs},
			want:        map[string]Status{"containerd.cdi": Warn, "containerd.nri": Warn, "delivery": OK},
			recommended: DeliveryDeviceSpecs,
		},
		"containerd 1.7 v2 config with CDI and NRI on": {
			node:        node{config: "containerd17-v2-cdi-on.toml", version: "v1.7.27", cgroup: "v2"},
			want:        map[string]Status{"containerd.cdi": OK, "containerd.cdi_spec_dirs": OK, "containerd.nri": OK},
			recommended: DeliveryCDICRI,
		},
		"containerd 1.7 with NRI enabled: nri mode": {
			node:        node{config: "containerd17-v2-nri-on.toml", version: "containerd github.com/containerd/containerd v1.7.35 abc", cgroup: "v2", delivery: DeliveryNRI},
			want:        map[string]Status{"containerd.version": OK, "containerd.cdi": Warn, "containerd.nri": OK, "delivery": OK},
			wantIn:      map[string]string{"containerd.version": "supplementalGroups", "containerd.cdi": "off by default in containerd 1.7"},
			recommended: DeliveryNRI,
		},
		"containerd 1.7 with NRI enabled, cdi-cri mode: nri recommended": {
			node:        node{config: "containerd17-v2-nri-on.toml", version: "1.7.35", cgroup: "v2"},
			want:        map[string]Status{"containerd.version": OK, "containerd.cdi": Fail, "delivery": Warn},
			wantIn:      map[string]string{"delivery": "--delivery nri"},
			failed:      true,
			recommended: DeliveryNRI,
		},
		"containerd 1.6 has no NRI": {
			node:        node{config: "containerd16-v2.toml", version: "v1.6.38", cgroup: "v2", delivery: DeliveryNRI},
			want:        map[string]Status{"containerd.version": Fail, "delivery": Warn},
			wantIn:      map[string]string{"containerd.version": "no NRI", "delivery": "device-specs"},
			failed:      true,
			recommended: DeliveryDeviceSpecs,
		},
		"containerd 2.2 (k3s 1.33-1.35): cdi-cri": {
			node:        node{config: "v3-containerd2.toml", version: "containerd github.com/containerd/containerd/v2 v2.2.9 abc", cgroup: "v2"},
			want:        map[string]Status{"containerd.version": OK, "containerd.cdi": OK, "containerd.nri": OK, "delivery": OK},
			wantIn:      map[string]string{"containerd.version": "Container.CDIDevices came with 2.3"},
			recommended: DeliveryCDICRI,
		},
		"containerd 2.2 whose cdi_spec_dirs lack ours: nri": {
			node:        node{config: "cdi-dir-not-listed.toml", version: "2.2.9", cgroup: "v2", delivery: DeliveryNRI},
			want:        map[string]Status{"containerd.version": OK, "containerd.cdi_spec_dirs": Warn, "delivery": OK},
			recommended: DeliveryNRI,
		},
		"containerd 2.4": {
			node:        node{config: "v3-containerd2.toml", version: "2.4.2", cgroup: "v2"},
			want:        map[string]Status{"containerd.version": OK, "delivery": OK},
			wantIn:      map[string]string{"containerd.version": "passes the resolved CDI names"},
			recommended: DeliveryCDICRI,
		},
		"containerd 2.4 ignores enable_cdi": {
			node:        node{config: "v3-enable-cdi-false.toml", version: "containerd github.com/containerd/containerd/v2 v2.4.2 abc", cgroup: "v2"},
			want:        map[string]Status{"containerd.cdi": Warn, "delivery": OK},
			wantIn:      map[string]string{"containerd.cdi": "ignored"},
			recommended: DeliveryCDICRI,
		},
		"containerd 2.3 with enable_cdi = false": {
			node:        node{config: "v3-enable-cdi-false.toml", version: "2.3.1", cgroup: "v2"},
			want:        map[string]Status{"containerd.cdi": Warn, "delivery": Warn},
			wantIn:      map[string]string{"containerd.cdi": "containerd config dump"},
			recommended: DeliveryNRI,
		},
		"enable_cdi = false, version unknown": {
			node:        node{config: "v3-enable-cdi-false.toml", cgroup: "v2"},
			want:        map[string]Status{"containerd.cdi": Fail},
			wantIn:      map[string]string{"containerd.cdi": "2.4 and later ignore it"},
			failed:      true,
			recommended: DeliveryNRI,
		},
		"an import turns external NRI plugins away": {
			node:        node{config: "v3-imports.toml", cgroup: "v2"},
			want:        map[string]Status{"containerd.config": OK, "containerd.nri": OK, "containerd.nri.connections": Fail},
			wantIn:      map[string]string{"containerd.config": "imports /etc/containerd/conf.d/50-nri.toml"},
			failed:      true,
			recommended: DeliveryDeviceSpecs,
		},
		"NRI on another socket": {
			node:   node{config: "nri-other-socket.toml", cgroup: "v2"},
			want:   map[string]Status{"containerd.nri.socket": Fail},
			wantIn: map[string]string{"containerd.nri.socket": "--nri-socket /run/containerd/nri.sock"},
			failed: true, recommended: DeliveryDeviceSpecs,
		},
		"no containerd config": {
			node:        node{cgroup: "hybrid"},
			want:        map[string]Status{"containerd.config": Warn, "containerd.cdi": Warn, "containerd.nri": Warn, "containerd.nri.socket": OK, "cgroup": Warn},
			wantIn:      map[string]string{"containerd.cdi": "no config file"},
			recommended: DeliveryNRI,
		},
		"kubelet not running": {
			node:        node{config: "v3-containerd2.toml", cgroup: "v2", noKubelet: true, noPodResources: true},
			want:        map[string]Status{"kubelet.device-plugins": Fail, "kubelet.pod-resources": Fail},
			failed:      true,
			recommended: DeliveryCDICRI,
		},
		"invalid TOML": {
			node:   node{config: "invalid-syntax.toml", cgroup: "v2"},
			want:   map[string]Status{"containerd.config": Fail},
			wantIn: map[string]string{"containerd.config": "/etc/containerd/config.toml:2:"},
			failed: true, recommended: DeliveryNRI,
		},
		"enable_cdi is not a boolean": {
			node:   node{config: "invalid-type.toml", cgroup: "v2"},
			want:   map[string]Status{"containerd.config": Fail},
			wantIn: map[string]string{"containerd.config": "enable_cdi = yes is not a boolean"},
			failed: true, recommended: DeliveryNRI,
		},
		"unknown config version": {
			node:   node{config: "invalid-version.toml", cgroup: "v2"},
			want:   map[string]Status{"containerd.config": Fail},
			wantIn: map[string]string{"containerd.config": "version = 7"},
			failed: true, recommended: DeliveryNRI,
		},
		"bad containerd version": {
			node:   node{config: "v3-containerd2.toml", version: "latest", cgroup: "v2"},
			want:   map[string]Status{"containerd.version": Fail},
			failed: true, recommended: DeliveryCDICRI,
		},
		"NPU next to the GPU, specs for both": {
			node:        node{config: "v3-containerd2.toml", cgroup: "v2", gpus: []drmtest.GPU{intel, drmtest.IntelNPU}, matchingSpecs: true},
			want:        map[string]Status{"devices": OK, "cdi.cards": OK, "cdi.nodes": OK},
			wantIn:      map[string]string{"devices": "2 device(s): 0000:00:02.0 (i915: card1, renderD128); 0000:00:0b.0 (intel_vpu: accel0)"},
			recommended: DeliveryCDICRI,
		},
		"no card": {
			node:        node{config: "v3-containerd2.toml", cgroup: "v2"},
			want:        map[string]Status{"devices": Warn, "cdi.specs": Warn},
			recommended: DeliveryCDICRI,
		},
		"stale and broken specs": {
			node: node{config: "v3-containerd2.toml", cgroup: "v2", gpus: []drmtest.GPU{intel}, specs: map[string]string{
				"dri-cdi.dev-gpu_0000-00-02.0.yaml": spec("0000:00:02.0", 1, 129), // wrong render minor
				"dri-cdi.dev-gpu_0000-03-00.0.yaml": spec("0000:03:00.0", 2, 130), // card not on the node
				"dri-cdi.dev-gpu_broken.yaml":       "cdiVersion: 0.6.0\nkind: dri-cdi.dev/gpu\ndevices: [{name: '!', containerEdits: {}}]\n",
				"vendor.com-gpu.yaml":               "not ours: ignored",
			}},
			want: map[string]Status{"cdi.spec": Fail, "cdi.cards": Fail, "cdi.nodes": Fail},
			wantIn: map[string]string{
				"cdi.cards": "0000:03:00.0",
				"cdi.nodes": "/dev/dri/renderD129",
				"cdi.spec":  "dri-cdi.dev-gpu_broken.yaml",
			},
			failed: true, recommended: DeliveryCDICRI,
		},
		"spec numbers differ from the host node": {
			node: node{config: "v3-containerd2.toml", cgroup: "v2", gpus: []drmtest.GPU{intel}, specs: map[string]string{
				"dri-cdi.dev-gpu_0000-00-02.0.yaml": strings.Replace(spec("0000:00:02.0", 1, 128), "minor: 128", "minor: 130", 1),
			}},
			want:   map[string]Status{"cdi.specs": OK, "cdi.cards": OK, "cdi.nodes": Fail},
			wantIn: map[string]string{"cdi.nodes": "/dev/dri/renderD128 (device 0000:00:02.0) is 226:128 on the host, 226:130"},
			failed: true, recommended: DeliveryCDICRI,
		},
		"card without a spec": {
			node:        node{config: "v3-containerd2.toml", cgroup: "v2", gpus: []drmtest.GPU{intel, drmtest.IntelXe.WithNodes(2, 129)}, specs: map[string]string{"dri-cdi.dev-gpu_0000-00-02.0.yaml": spec("0000:00:02.0", 1, 128)}},
			want:        map[string]Status{"cdi.specs": OK, "cdi.cards": Warn, "cdi.nodes": OK},
			wantIn:      map[string]string{"cdi.cards": "0000:03:00.0"},
			recommended: DeliveryCDICRI,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts := tc.node.build(t)
			rep := check(t, opts)
			got := map[string]Status{}
			text := map[string]string{}
			for _, r := range rep.Results {
				// A check that reports more than once keeps its worst status.
				if rank(r.Status) >= rank(got[r.Name]) {
					got[r.Name] = r.Status
				}
				text[r.Name] += r.Message + " | " + r.Fix + "\n"
				if r.Status != OK {
					require.NotEmpty(t, r.Fix, "%s %s has no fix", r.Name, r.Status)
				}
			}
			for n, s := range tc.want {
				require.Equal(t, s, got[n], "check %s: %s", n, text[n])
			}
			for n, s := range tc.wantIn {
				require.Contains(t, text[n], s, "check %s", n)
			}
			if tc.allOK {
				for n, s := range got {
					require.Equal(t, OK, s, "check %s: %s", n, text[n])
				}
			}
			require.Equal(t, tc.failed, rep.Failed)
			require.Equal(t, tc.recommended, rep.Recommended)
		})
	}
}

func rank(s Status) int {
	switch s {
	case OK:
		return 1
	case Warn:
		return 2
	case Fail:
		return 3
	}
	return 0
}

// check runs Check on opts, which must be valid.
func check(t *testing.T, opts Options) *Report {
	t.Helper()
	rep, err := Check(context.Background(), opts)
	require.NoError(t, err)
	return rep
}

func TestReportWrite(t *testing.T) {
	opts := node{config: "nri-disabled.toml", cgroup: "v2", noNRISocket: true}.build(t)
	rep := check(t, opts)
	require.True(t, rep.Failed)

	var js bytes.Buffer
	require.NoError(t, rep.Write(&js, "json"))
	var got Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &got))
	require.True(t, got.Failed)
	require.Equal(t, DeliveryDeviceSpecs, got.Recommended)
	require.NotEmpty(t, got.Results)

	var txt bytes.Buffer
	require.NoError(t, rep.Write(&txt, "text"))
	require.Regexp(t, `(?m)^FAIL  containerd\.nri +NRI is disabled`, txt.String())
	require.Regexp(t, `(?m)^ +fix: set disable = false`, txt.String())
	require.Contains(t, txt.String(), "recommended device-specs")

	require.ErrorContains(t, rep.Write(&txt, "yaml"), `invalid output format "yaml"`)
	opts.Delivery = "cdi"
	_, err := Check(context.Background(), opts)
	require.ErrorContains(t, err, `invalid delivery mode "cdi"`)
}

func TestDefaultNRISocket(t *testing.T) {
	require.Equal(t, nriapi.DefaultSocketPath, DefaultNRISocket)
}

func TestSamePath(t *testing.T) {
	cases := map[string]struct {
		a, b string
		same bool
	}{
		"equal":            {"/var/run/cdi", "/var/run/cdi", true},
		"var/run is run":   {"/var/run/cdi", "/run/cdi", true},
		"trailing slash":   {"/etc/cdi/", "/etc/cdi", true},
		"different":        {"/etc/cdi", "/var/run/cdi", false},
		"prefix is not it": {"/var/run/cdi2", "/run/cdi", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.same, samePath(tc.a, tc.b))
		})
	}
}

func TestParseVersion(t *testing.T) {
	cases := map[string]struct {
		in   string
		want semver
		err  bool
	}{
		"empty":          {"", semver{}, false},
		"plain":          {"2.4.2", semver{2, 4}, false},
		"v prefix":       {"v1.7.27", semver{1, 7}, false},
		"--version line": {"containerd github.com/containerd/containerd/v2 v2.3.1 1a2b3c", semver{2, 3}, false},
		"ctr version":    {"  Version:  v2.0.5-k3s1", semver{2, 0}, false},
		"node runtime":   {"containerd://2.3.2-k3s2", semver{2, 3}, false},
		"garbage":        {"latest", semver{}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseVersion(tc.in)
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzContainerdConfig(f *testing.F) {
	entries, err := os.ReadDir("testdata/containerd")
	require.NoError(f, err)
	for _, e := range entries {
		if !e.IsDir() {
			raw, err := os.ReadFile(filepath.Join("testdata/containerd", e.Name()))
			require.NoError(f, err)
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		doc, err := parseContainerdConfig("fuzz.toml", raw)
		if err != nil {
			require.ErrorIs(t, err, ErrBadConfig)
			return
		}
		cfg := &containerdConfig{Path: "fuzz.toml", Version: 3}
		plugins, _ := doc["plugins"].(map[string]any)
		if err := cfg.extract(plugins); err != nil {
			require.ErrorIs(t, err, ErrBadConfig)
		}
	})
}
