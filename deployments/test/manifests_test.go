package test

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const (
	kustomizeDir = "../kustomize"
	chartDir     = "../helm/dri-cdi"
)

// paths are the host paths a variant mounts.
type paths struct {
	cdiDir, devicePluginDir, podResourcesDir, nriDir string
}

var defaultPaths = paths{
	cdiDir:          "/var/run/cdi",
	devicePluginDir: "/var/lib/kubelet/device-plugins",
	podResourcesDir: "/var/lib/kubelet/pod-resources",
	nriDir:          "/var/run/nri",
}

// variant is one rendering and what it must contain.
type variant struct {
	render   func() ([]byte, error)
	delivery string
	nri      bool
	kfd      bool
	// companionPaths are the devices.companionPaths mounted.
	companionPaths []string
	paths          paths
	// agentPort and nriPort are the metrics ports.
	agentPort, nriPort int32
	// pools are the resource names the config must list.
	pools          []string
	serviceMonitor bool
	namespace      bool
	image          string
	priorityClass  string
}

func kustomize(name string) func() ([]byte, error) {
	return func() ([]byte, error) { return RenderKustomize(filepath.Join(kustomizeDir, name)) }
}

func chart(values ...string) func() ([]byte, error) {
	return func() ([]byte, error) {
		files := make([]string, len(values))
		for i, v := range values {
			files[i] = filepath.Join("testdata/helm", v)
		}
		return RenderChart(chartDir, files...)
	}
}

func base() variant {
	return variant{delivery: "cdi-cri", nri: true, paths: defaultPaths, agentPort: 9470, nriPort: 9471,
		image: imageRepository + ":" + releaseTag, priorityClass: "system-node-critical"}
}

// releaseTag is the release version (VERSION), the image tag every
// default rendering must use; TestVersionsAgree checks VERSION itself.
var releaseTag = func() string {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		panic(err)
	}
	return strings.TrimSpace(string(raw))
}()

func with(v variant, f func(*variant)) variant { f(&v); return v }

var intelPools = []string{"gpu.intel.com/i915", "gpu.intel.com/xe"}

// variants are every rendering: kustomize-<dir> for the base and each
// overlay, helm-<values> for the chart.
var variants = map[string]variant{
	"kustomize-base":     with(base(), func(v *variant) { v.render = kustomize("base"); v.namespace = true }),
	"kustomize-k3s":      with(base(), func(v *variant) { v.render = kustomize("overlays/k3s"); v.namespace = true }),
	"kustomize-nri-mode": with(base(), func(v *variant) { v.render = kustomize("overlays/nri-mode"); v.namespace = true; v.delivery = "nri" }),
	"kustomize-intel-compat": with(base(), func(v *variant) {
		v.render = kustomize("overlays/intel-compat")
		v.namespace = true
		v.pools = intelPools
	}),
	"kustomize-device-specs": with(base(), func(v *variant) {
		v.render = kustomize("overlays/device-specs")
		v.namespace = true
		v.delivery = "device-specs"
		v.nri = false
	}),
	"kustomize-components": with(base(), func(v *variant) {
		v.render = func() ([]byte, error) { return RenderKustomize("testdata/kustomize/components") }
		v.namespace = true
		v.kfd = true
		v.serviceMonitor = true
	}),
	"helm-default":      with(base(), func(v *variant) { v.render = chart() }),
	"helm-nri-mode":     with(base(), func(v *variant) { v.render = chart("nri-mode.yaml"); v.delivery = "nri" }),
	"helm-intel-compat": with(base(), func(v *variant) { v.render = chart("intel-compat.yaml"); v.pools = intelPools }),
	"helm-device-specs": with(base(), func(v *variant) {
		v.render = chart("device-specs.yaml")
		v.delivery = "device-specs"
		v.nri = false
	}),
	"helm-components": with(base(), func(v *variant) { v.render = chart("components.yaml"); v.kfd = true; v.serviceMonitor = true }),
	"helm-companions": with(base(), func(v *variant) {
		v.render = chart("companions.yaml")
		v.companionPaths = []string{"/dev/dma_heap", "/dev/video10"}
		v.pools = []string{"dri-cdi.dev/v3d"}
	}),
	"helm-custom": with(base(), func(v *variant) {
		v.render = chart("custom.yaml")
		v.paths = paths{
			cdiDir:          "/etc/cdi",
			devicePluginDir: "/data/kubelet/device-plugins",
			podResourcesDir: "/data/kubelet/pod-resources",
			nriDir:          "/run/nri",
		}
		v.agentPort, v.nriPort = 19470, 19471
		v.serviceMonitor = true
		v.image = "registry.example.com/mirror/dri-cdi:v0.1.0-patched"
		v.priorityClass = "system-cluster-critical"
	}),
}

// equivalent pairs a kustomize rendering with the chart rendering that
// must produce the same pod.
var equivalent = map[string]string{
	"kustomize-base":         "helm-default",
	"kustomize-nri-mode":     "helm-nri-mode",
	"kustomize-intel-compat": "helm-intel-compat",
	"kustomize-device-specs": "helm-device-specs",
	"kustomize-components":   "helm-components",
}

// rendered holds the decoded objects of one rendering.
type rendered struct {
	raw  []byte
	objs []runtime.Object
}

// mustRender renders one variant with render and decodes the stream.
func mustRender(t *testing.T, name string, render func() ([]byte, error)) rendered {
	t.Helper()
	raw, err := render()
	require.NoError(t, err, name)
	objs, err := Decode(raw)
	require.NoError(t, err, name)
	require.NotEmpty(t, objs, name)
	return rendered{raw: raw, objs: objs}
}

// only returns the one object of type T in objs, and fails the test
// unless there is exactly one; kind names T in the failure.
func only[T runtime.Object](t *testing.T, objs []runtime.Object, kind string) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if o, ok := o.(T); ok {
			found = append(found, o)
		}
	}
	require.Len(t, found, 1, "exactly one %s", kind)
	return found[0]
}

func (r rendered) daemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	return only[*appsv1.DaemonSet](t, r.objs, "DaemonSet")
}

func (r rendered) configMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	return only[*corev1.ConfigMap](t, r.objs, "ConfigMap")
}

func renderAll(t *testing.T) map[string]rendered {
	t.Helper()
	out := map[string]rendered{}
	for name, v := range variants {
		out[name] = mustRender(t, name, v.render)
	}
	return out
}

func TestGolden(t *testing.T) {
	for name, r := range renderAll(t) {
		t.Run(name, func(t *testing.T) {
			compareGolden(t, filepath.Join("testdata/golden", name+".yaml"), r.raw)
		})
	}
}

// compareGolden requires raw to equal the golden file, or with -update
// writes it there, and returns the golden file's content.
func compareGolden(t *testing.T, golden string, raw []byte) []byte {
	t.Helper()
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
		require.NoError(t, os.WriteFile(golden, raw, 0o644))
		return raw
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run go test ./... -update to create it")
	require.Equal(t, string(want), string(raw), "rendering changed; rerun with -update if intended")
	return want
}

// TestGoldenFilesDecode decodes the committed golden files too, so a
// hand-edited golden file cannot hold an object the API would reject.
func TestGoldenFilesDecode(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/*.yaml")
	require.NoError(t, err)
	require.Len(t, files, len(variants), "one golden file per variant")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		_, err = Decode(raw)
		require.NoError(t, err, f)
	}
}

func TestObjects(t *testing.T) {
	for name, r := range renderAll(t) {
		v := variants[name]
		t.Run(name, func(t *testing.T) {
			kinds := map[string]int{}
			for _, o := range r.objs {
				kinds[o.GetObjectKind().GroupVersionKind().Kind]++
			}
			want := map[string]int{"DaemonSet": 1, "ConfigMap": 1, "Service": 1, "ResourceQuota": 1}
			if v.namespace {
				want["Namespace"] = 1
			}
			if v.serviceMonitor {
				want["ServiceMonitor"] = 1
			}
			require.Equal(t, want, kinds)

			for _, o := range r.objs {
				switch o := o.(type) {
				case *corev1.Namespace:
					require.Equal(t, "privileged", o.Labels["pod-security.kubernetes.io/enforce"])
					require.Equal(t, "baseline", o.Labels["pod-security.kubernetes.io/audit"])
					require.Equal(t, ReleaseNamespace, o.Name)
				case *corev1.ResourceQuota:
					require.Equal(t, ReleaseNamespace, o.Namespace)
					require.NotNil(t, o.Spec.ScopeSelector)
					require.Equal(t, []string{v.priorityClass}, o.Spec.ScopeSelector.MatchExpressions[0].Values)
				case *corev1.Service:
					require.Equal(t, ReleaseNamespace, o.Namespace)
					require.Equal(t, corev1.ClusterIPNone, o.Spec.ClusterIP)
					ports := map[string]int32{}
					for _, p := range o.Spec.Ports {
						ports[p.Name] = p.Port
					}
					wantPorts := map[string]int32{"agent-metrics": v.agentPort}
					if v.nri {
						wantPorts["nri-metrics"] = v.nriPort
					}
					require.Equal(t, wantPorts, ports)
				case *monitoringv1.ServiceMonitor:
					require.Equal(t, ReleaseNamespace, o.Namespace)
					var ports []string
					for _, e := range o.Spec.Endpoints {
						ports = append(ports, e.Port)
						require.Equal(t, "/metrics", e.Path)
					}
					require.Contains(t, ports, "agent-metrics")
				case *appsv1.DaemonSet:
					require.Equal(t, ReleaseNamespace, o.Namespace)
				case *corev1.ConfigMap:
					require.Equal(t, ReleaseNamespace, o.Namespace)
				}
			}
			svc := find[*corev1.Service](r.objs)
			ds := r.daemonSet(t)
			for k, val := range svc.Spec.Selector {
				require.Equal(t, val, ds.Spec.Template.Labels[k], "service selector %s must match the pods", k)
			}
			for k, val := range ds.Spec.Selector.MatchLabels {
				require.Equal(t, val, ds.Spec.Template.Labels[k], "DaemonSet selector %s must match its pods", k)
			}
			if sm := find[*monitoringv1.ServiceMonitor](r.objs); sm != nil {
				for k, val := range sm.Spec.Selector.MatchLabels {
					require.Equal(t, val, svc.Labels[k], "ServiceMonitor selector %s must match the Service", k)
				}
			}
		})
	}
}

func find[T runtime.Object](objs []runtime.Object) T {
	var zero T
	for _, o := range objs {
		if t, ok := o.(T); ok {
			return t
		}
	}
	return zero
}

// TestPodSpec checks what each container runs with: arguments, ports,
// probes, resources and the config it reads.
func TestPodSpec(t *testing.T) {
	for name, r := range renderAll(t) {
		v := variants[name]
		t.Run(name, func(t *testing.T) {
			ds := r.daemonSet(t)
			spec := ds.Spec.Template.Spec
			names := []string{}
			for _, c := range spec.Containers {
				names = append(names, c.Name)
			}
			want := []string{"agent"}
			if v.nri {
				want = append(want, "nri")
			}
			require.Equal(t, want, names)
			require.Equal(t, v.priorityClass, spec.PriorityClassName)

			agent := container(t, spec, "agent")
			require.Equal(t, v.image, agent.Image)
			require.Equal(t, []string{"/usr/bin/dri-cdi-agent"}, agent.Command)
			args := flags(t, agent.Args)
			require.Equal(t, v.delivery, args["delivery"])
			require.Equal(t, v.paths.cdiDir, args["cdi-dir"])
			require.Equal(t, v.paths.devicePluginDir, args["kubelet-dir"])
			require.Equal(t, "/sys", args["sysfs-root"])
			require.Equal(t, "/dev", args["dev-root"])
			require.Equal(t, "/etc/dri-cdi/config.yaml", args["config"])
			require.Equal(t, ":"+itoa(v.agentPort), args["metrics-addr"])
			checkHealth(t, agent, "agent-metrics", v.agentPort)

			if v.nri {
				nri := container(t, spec, "nri")
				require.Equal(t, v.image, nri.Image)
				require.Equal(t, []string{"/usr/bin/dri-cdi-nri"}, nri.Command)
				args := flags(t, nri.Args)
				require.Equal(t, v.paths.nriDir+"/nri.sock", args["nri-socket"])
				require.Equal(t, v.paths.podResourcesDir+"/kubelet.sock", args["pod-resources-socket"])
				require.Equal(t, v.paths.devicePluginDir+"/kubelet_internal_checkpoint", args["kubelet-checkpoint"])
				require.Equal(t, v.paths.cdiDir, args["cdi-dir"])
				require.Equal(t, "/etc/dri-cdi/config.yaml", args["config"])
				require.Equal(t, ":"+itoa(v.nriPort), args["metrics-addr"])
				checkHealth(t, nri, "nri-metrics", v.nriPort)
			}

			for _, c := range spec.Containers {
				req := c.Resources.Requests
				require.True(t, req.Cpu().Equal(resource.MustParse("10m")), "%s cpu request", c.Name)
				require.True(t, req.Memory().Equal(resource.MustParse("32Mi")), "%s memory request", c.Name)
				require.True(t, c.Resources.Limits.Memory().Equal(resource.MustParse("64Mi")), "%s memory limit", c.Name)
				require.True(t, c.Resources.Limits.Cpu().IsZero(), "%s: no CPU limit, the NRI hot path must not be throttled", c.Name)
			}

			cm := r.configMap(t)
			var vol *corev1.Volume
			for i := range spec.Volumes {
				if spec.Volumes[i].ConfigMap != nil {
					vol = &spec.Volumes[i]
				}
			}
			require.NotNil(t, vol, "config volume")
			require.Equal(t, cm.Name, vol.ConfigMap.Name, "the pod mounts the rendered ConfigMap")
			// The agent and the NRI plugin load the file with pkg/config:
			// it must pass the same strict parse and validation.
			cfg, err := config.Parse([]byte(cm.Data["config.yaml"]))
			require.NoError(t, err, "config.yaml")
			require.Equal(t, "dri-cdi.dev/gpu", cfg.Kind())
			require.True(t, cfg.DefaultPools)
			var pools []string
			for _, p := range cfg.Pools {
				pools = append(pools, p.Resource)
			}
			require.Equal(t, v.pools, pools)
		})
	}
}

func checkHealth(t *testing.T, c *corev1.Container, port string, number int32) {
	t.Helper()
	require.Len(t, c.Ports, 1)
	require.Equal(t, port, c.Ports[0].Name)
	require.Equal(t, number, c.Ports[0].ContainerPort)
	require.NotNil(t, c.LivenessProbe, "%s liveness probe", c.Name)
	require.NotNil(t, c.ReadinessProbe, "%s readiness probe", c.Name)
	require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	require.Equal(t, port, c.LivenessProbe.HTTPGet.Port.String())
	require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	require.Equal(t, port, c.ReadinessProbe.HTTPGet.Port.String())
}

func container(t *testing.T, spec corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

// flags parses --name=value arguments; a repeated flag is an error, so an
// overlay cannot leave two conflicting values behind.
func flags(t *testing.T, args []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, a := range args {
		name, val, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		require.True(t, ok && strings.HasPrefix(a, "--"), "argument %q is not --name=value", a)
		_, dup := m[name]
		require.False(t, dup, "flag --%s given twice", name)
		m[name] = val
	}
	return m
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// TestSecurityContext asserts the privileges of every container in every
// rendering: no privileged mode, no privilege escalation, no capability,
// a read-only root filesystem, the runtime's default seccomp profile, no
// host namespaces or ports, and exactly the expected host paths with the
// expected read-only flags.
func TestSecurityContext(t *testing.T) {
	for name, r := range renderAll(t) {
		v := variants[name]
		t.Run(name, func(t *testing.T) {
			spec := r.daemonSet(t).Spec.Template.Spec
			require.False(t, spec.HostNetwork, "hostNetwork")
			require.False(t, spec.HostPID, "hostPID")
			require.False(t, spec.HostIPC, "hostIPC")
			require.NotNil(t, spec.AutomountServiceAccountToken)
			require.False(t, *spec.AutomountServiceAccountToken, "the pods use no Kubernetes API")
			require.Nil(t, spec.HostUsers, "user namespaces would map uid 0 away from the root-owned host dirs")
			psc := spec.SecurityContext
			require.NotNil(t, psc)
			require.NotNil(t, psc.SeccompProfile)
			require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type)
			require.Empty(t, psc.SupplementalGroups)
			require.Empty(t, psc.Sysctls)

			wantMounts := map[string]map[string]hostMount{
				"agent": {
					"/dev/dri":              {true, corev1.HostPathDirectoryOrCreate},
					"/dev/accel":            {true, corev1.HostPathDirectoryOrCreate},
					v.paths.cdiDir:          {false, corev1.HostPathDirectoryOrCreate},
					v.paths.devicePluginDir: {false, corev1.HostPathDirectory},
				},
				"nri": {
					v.paths.nriDir:          {true, corev1.HostPathDirectoryOrCreate},
					v.paths.podResourcesDir: {true, corev1.HostPathDirectory},
					v.paths.cdiDir:          {true, corev1.HostPathDirectoryOrCreate},
					"/dev/dri":              {true, corev1.HostPathDirectoryOrCreate},
					"/dev/accel":            {true, corev1.HostPathDirectoryOrCreate},
					// The kubelet checkpoint, for regular init containers.
					v.paths.devicePluginDir: {true, corev1.HostPathDirectory},
				},
			}
			if v.kfd {
				wantMounts["agent"]["/dev/kfd"] = hostMount{true, corev1.HostPathCharDev}
				wantMounts["nri"]["/dev/kfd"] = hostMount{true, corev1.HostPathCharDev}
			}
			for _, p := range v.companionPaths {
				wantMounts["agent"][p] = hostMount{true, corev1.HostPathUnset}
				wantMounts["nri"][p] = hostMount{true, corev1.HostPathUnset}
			}
			mounts := hostMounts(t, spec)
			for _, c := range spec.Containers {
				requireContainerUnprivileged(t, c)
				require.Equal(t, wantMounts[c.Name], mounts[c.Name], "%s host paths", c.Name)
			}
		})
	}
}

// hostMount is how a container mounts a hostPath volume.
type hostMount struct {
	readOnly bool
	typ      corev1.HostPathType
}

// hostMounts returns each container's hostPath mounts by host path. It
// fails the test unless every volume is a hostPath or a ConfigMap, every
// hostPath volume is mounted by some container, and each container
// mounts a host path once, at the same path inside, without subPath or
// mount propagation, and every other volume read-only.
func hostMounts(t *testing.T, spec corev1.PodSpec) map[string]map[string]hostMount {
	t.Helper()
	hostPaths := map[string]corev1.HostPathVolumeSource{}
	for _, vol := range spec.Volumes {
		switch {
		case vol.HostPath != nil:
			hostPaths[vol.Name] = *vol.HostPath
		case vol.ConfigMap != nil:
		default:
			t.Fatalf("volume %q: only hostPath and configMap volumes are expected", vol.Name)
		}
	}
	used := map[string]bool{}
	mounts := map[string]map[string]hostMount{}
	for _, c := range spec.Containers {
		got := map[string]hostMount{}
		for _, m := range c.VolumeMounts {
			used[m.Name] = true
			hp, ok := hostPaths[m.Name]
			if !ok {
				require.True(t, m.ReadOnly, "%s: non-hostPath mount %s must be read-only", c.Name, m.MountPath)
				continue
			}
			require.Equal(t, hp.Path, m.MountPath, "%s: host path %s is mounted at the same path", c.Name, hp.Path)
			require.Empty(t, m.SubPath, c.Name)
			require.Empty(t, m.SubPathExpr, c.Name)
			require.True(t, m.MountPropagation == nil || *m.MountPropagation == corev1.MountPropagationNone,
				"%s: %s must not propagate mounts", c.Name, m.MountPath)
			require.NotContains(t, got, hp.Path, "%s mounts %s twice", c.Name, hp.Path)
			got[hp.Path] = hostMount{m.ReadOnly, *hp.Type}
		}
		mounts[c.Name] = got
	}
	for name := range hostPaths {
		require.True(t, used[name], "hostPath volume %q is mounted by no container", name)
	}
	return mounts
}

// requireContainerUnprivileged checks one container: not privileged, no
// privilege escalation, no capability, a read-only root filesystem, the
// runtime's default seccomp profile, no host port, no raw block device.
func requireContainerUnprivileged(t *testing.T, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	require.NotNil(t, sc, c.Name)
	require.NotNil(t, sc.Privileged, c.Name)
	require.False(t, *sc.Privileged, "%s privileged", c.Name)
	require.NotNil(t, sc.AllowPrivilegeEscalation, c.Name)
	require.False(t, *sc.AllowPrivilegeEscalation, "%s allowPrivilegeEscalation", c.Name)
	require.NotNil(t, sc.ReadOnlyRootFilesystem, c.Name)
	require.True(t, *sc.ReadOnlyRootFilesystem, "%s readOnlyRootFilesystem", c.Name)
	require.NotNil(t, sc.Capabilities, c.Name)
	require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, "%s drops every capability", c.Name)
	require.Empty(t, sc.Capabilities.Add, "%s adds no capability", c.Name)
	require.NotNil(t, sc.SeccompProfile, c.Name)
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type, c.Name)
	require.Nil(t, sc.ProcMount, c.Name)
	require.Nil(t, sc.SELinuxOptions, c.Name)
	require.Nil(t, sc.RunAsNonRoot, "%s: runAsNonRoot comes from the pod", c.Name)
	for _, p := range c.Ports {
		require.Zero(t, p.HostPort, "%s hostPort", c.Name)
	}
	require.Empty(t, c.VolumeDevices, c.Name)
}

// TestRunsAsRootWithoutCapabilities pins the one exception to "restricted":
// uid 0 is needed for the root-owned host dirs and sockets, and nothing
// else is granted for it.
func TestRunsAsRootWithoutCapabilities(t *testing.T) {
	for name, r := range renderAll(t) {
		t.Run(name, func(t *testing.T) {
			psc := r.daemonSet(t).Spec.Template.Spec.SecurityContext
			require.NotNil(t, psc.RunAsUser)
			require.Zero(t, *psc.RunAsUser)
			require.NotNil(t, psc.RunAsNonRoot)
			require.False(t, *psc.RunAsNonRoot)
		})
	}
}

// TestKustomizeAndHelmAgree compares each kustomize rendering with the
// chart rendering that stands for it: the same containers, volumes,
// scheduling and configuration, apart from names and labels.
func TestKustomizeAndHelmAgree(t *testing.T) {
	all := renderAll(t)
	for k, h := range equivalent {
		t.Run(k, func(t *testing.T) {
			kds, hds := all[k].daemonSet(t), all[h].daemonSet(t)
			kspec, hspec := normalizePod(kds.Spec.Template.Spec), normalizePod(hds.Spec.Template.Spec)
			require.Equal(t, kspec, hspec)
			require.Equal(t, kds.Spec.UpdateStrategy, hds.Spec.UpdateStrategy)

			var kcfg, hcfg any
			require.NoError(t, yaml.Unmarshal([]byte(all[k].configMap(t).Data["config.yaml"]), &kcfg))
			require.NoError(t, yaml.Unmarshal([]byte(all[h].configMap(t).Data["config.yaml"]), &hcfg))
			require.Equal(t, kcfg, hcfg, "config.yaml")

			ksvc, hsvc := find[*corev1.Service](all[k].objs), find[*corev1.Service](all[h].objs)
			require.Equal(t, ksvc.Spec.Ports, hsvc.Spec.Ports)
			kq, hq := find[*corev1.ResourceQuota](all[k].objs), find[*corev1.ResourceQuota](all[h].objs)
			require.Equal(t, kq.Spec, hq.Spec)
			ksm, hsm := find[*monitoringv1.ServiceMonitor](all[k].objs), find[*monitoringv1.ServiceMonitor](all[h].objs)
			if ksm != nil || hsm != nil {
				require.NotNil(t, ksm)
				require.NotNil(t, hsm)
				require.Equal(t, ksm.Spec.Endpoints, hsm.Spec.Endpoints)
			}
		})
	}
}

func normalizePod(spec corev1.PodSpec) corev1.PodSpec {
	spec = *spec.DeepCopy()
	for i := range spec.Volumes {
		if spec.Volumes[i].ConfigMap != nil {
			spec.Volumes[i].ConfigMap.Name = "config"
		}
	}
	sort.Slice(spec.Volumes, func(i, j int) bool { return spec.Volumes[i].Name < spec.Volumes[j].Name })
	for i := range spec.Containers {
		m := spec.Containers[i].VolumeMounts
		sort.Slice(m, func(a, b int) bool { return m[a].Name < m[b].Name })
	}
	return spec
}

// TestChartRejectsBadValues renders the chart with values that must fail.
func TestChartRejectsBadValues(t *testing.T) {
	cases := map[string]string{
		"unknown-key":                    "delivrey",
		"bad-delivery":                   "delivery",
		"nri-off-cdi-cri":                "delivery=device-specs",
		"servicemonitor-without-service": "metrics.service.enabled",
		"unknown-pool-field":             "driver",
		"relative-path":                  "cdiDir",
	}
	files, err := filepath.Glob("testdata/helm/invalid/*.yaml")
	require.NoError(t, err)
	require.Len(t, files, len(cases), "one case per file in testdata/helm/invalid")
	for name, wantInErr := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := RenderChart(chartDir, filepath.Join("testdata/helm/invalid", name+".yaml"))
			require.Error(t, err)
			require.Contains(t, err.Error(), wantInErr)
		})
	}
}

// TestDecodeIsStrict makes sure the decoder used above would catch the
// mistakes it is there to catch.
func TestDecodeIsStrict(t *testing.T) {
	cases := map[string]string{
		"unknown field": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\ndatta: {}\n",
		"duplicate key": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\ndata: {c: d}\n",
		"unknown kind":  "apiVersion: v1\nkind: ConfigMapp\nmetadata: {name: x}\n",
		"wrong type":    "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec: {minReadySeconds: soon}\n",
		"no kind":       "metadata: {name: x}\n",
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte(doc))
			require.Error(t, err)
		})
	}
	objs, err := Decode([]byte("# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"))
	require.NoError(t, err)
	require.Len(t, objs, 1)
}
