package test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// draVariants are the DRA-mode renderings. They hold two DaemonSets (the
// device plugin's and the DRA plugin's), so they have their own tests and
// golden files (testdata/golden-dra) next to the one-DaemonSet variants.
var draVariants = map[string]func() ([]byte, error){
	"kustomize-dra":  kustomize("overlays/dra"),
	"helm-dra":       chart("dra.yaml"),
	"helm-dra-pools": chart("dra-pools.yaml"),
}

// draRendering is one DRA rendering's objects, by role.
type draRendering struct {
	rendered
	devicePlugin, dra  *appsv1.DaemonSet
	serviceAccount     *corev1.ServiceAccount
	clusterRole        *rbacv1.ClusterRole
	clusterRoleBinding *rbacv1.ClusterRoleBinding
	policy             *admissionregistrationv1.ValidatingAdmissionPolicy
	policyBinding      *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	deviceClasses      map[string]*resourcev1.DeviceClass
}

func renderDRA(t *testing.T) map[string]draRendering {
	t.Helper()
	out := map[string]draRendering{}
	for name, render := range draVariants {
		rendering := mustRender(t, name, render)
		objs := rendering.objs
		r := draRendering{
			rendered:           rendering,
			serviceAccount:     only[*corev1.ServiceAccount](t, objs, name+" ServiceAccount"),
			clusterRole:        only[*rbacv1.ClusterRole](t, objs, name+" ClusterRole"),
			clusterRoleBinding: only[*rbacv1.ClusterRoleBinding](t, objs, name+" ClusterRoleBinding"),
			policy:             only[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, name+" ValidatingAdmissionPolicy"),
			policyBinding:      only[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, objs, name+" ValidatingAdmissionPolicyBinding"),
			deviceClasses:      map[string]*resourcev1.DeviceClass{},
		}
		for _, o := range objs {
			switch o := o.(type) {
			case *appsv1.DaemonSet:
				if o.Spec.Template.Labels["app.kubernetes.io/component"] == "dra-node" {
					require.Nil(t, r.dra, "%s: two DRA DaemonSets", name)
					r.dra = o
				} else {
					require.Nil(t, r.devicePlugin, "%s: two device-plugin DaemonSets", name)
					r.devicePlugin = o
				}
			case *resourcev1.DeviceClass:
				r.deviceClasses[o.Name] = o
			}
		}
		require.NotNil(t, r.devicePlugin, "%s: no device-plugin DaemonSet", name)
		require.NotNil(t, r.dra, "%s: no DRA DaemonSet", name)
		out[name] = r
	}
	return out
}

func TestDRAGolden(t *testing.T) {
	for name, r := range renderDRA(t) {
		t.Run(name, func(t *testing.T) {
			golden := filepath.Join("testdata/golden-dra", name+".yaml")
			_, err := Decode(compareGolden(t, golden, r.raw))
			require.NoError(t, err, golden)
		})
	}
}

// TestDRAOneModePerNode: every node runs exactly one of the two
// DaemonSets, chosen by the dri-cdi.dev/mode label.
func TestDRAOneModePerNode(t *testing.T) {
	nodes := map[string]map[string]string{
		"unlabelled":             {"kubernetes.io/os": "linux"},
		"mode=dra":               {"kubernetes.io/os": "linux", "dri-cdi.dev/mode": "dra"},
		"mode=device-plugin":     {"kubernetes.io/os": "linux", "dri-cdi.dev/mode": "device-plugin"},
		"mode=dra, other labels": {"kubernetes.io/os": "linux", "dri-cdi.dev/mode": "dra", "dri-cdi.dev/delivery": "nri"},
	}
	want := map[string]string{"unlabelled": "device-plugin", "mode=dra": "dra", "mode=device-plugin": "device-plugin", "mode=dra, other labels": "dra"}
	for name, r := range renderDRA(t) {
		t.Run(name, func(t *testing.T) {
			for node, lbls := range nodes {
				var runs []string
				if schedules(t, r.devicePlugin.Spec.Template.Spec, lbls) {
					runs = append(runs, "device-plugin")
				}
				if schedules(t, r.dra.Spec.Template.Spec, lbls) {
					runs = append(runs, "dra")
				}
				require.Equal(t, []string{want[node]}, runs, "node %s", node)
			}
			// Neither DaemonSet selects the other's pods.
			for _, pair := range [][2]*appsv1.DaemonSet{{r.devicePlugin, r.dra}, {r.dra, r.devicePlugin}} {
				sel, err := metaSelector(pair[0])
				require.NoError(t, err)
				require.False(t, sel.Matches(labels.Set(pair[1].Spec.Template.Labels)), "%s selects the pods of %s", pair[0].Name, pair[1].Name)
			}
		})
	}
}

// TestDRADaemonSet checks what the DRA pod runs with: the binary and its
// flags, the rolling update, the ServiceAccount, the privileges and
// exactly the host paths it needs.
func TestDRADaemonSet(t *testing.T) {
	for name, r := range renderDRA(t) {
		t.Run(name, func(t *testing.T) {
			ds := r.dra
			ru := ds.Spec.UpdateStrategy.RollingUpdate
			require.Equal(t, appsv1.RollingUpdateDaemonSetStrategyType, ds.Spec.UpdateStrategy.Type)
			require.NotNil(t, ru)
			require.Equal(t, "0", ru.MaxSurge.String(), "maxSurge 0: one plugin instance per node")
			require.Equal(t, "1", ru.MaxUnavailable.String())

			spec := ds.Spec.Template.Spec
			require.Equal(t, r.serviceAccount.Name, spec.ServiceAccountName)
			require.Equal(t, ds.Namespace, r.serviceAccount.Namespace)
			require.NotNil(t, spec.AutomountServiceAccountToken)
			require.True(t, *spec.AutomountServiceAccountToken, "the DRA plugin talks to the API server")
			require.False(t, spec.HostNetwork || spec.HostPID || spec.HostIPC, "host namespaces")
			require.Equal(t, "system-node-critical", spec.PriorityClassName)
			psc := spec.SecurityContext
			require.NotNil(t, psc.RunAsUser)
			require.Zero(t, *psc.RunAsUser)
			require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type)

			var names []string
			for _, c := range spec.Containers {
				names = append(names, c.Name)
				requireContainerUnprivileged(t, c)
			}
			require.Equal(t, []string{"dra", "nri"}, names)

			dra := container(t, spec, "dra")
			require.Equal(t, []string{"/usr/bin/dri-cdi-dra"}, dra.Command)
			require.Equal(t, imageRepository+":"+releaseTag, dra.Image)
			args := flags(t, dra.Args)
			require.Equal(t, map[string]string{
				"config":          "/etc/dri-cdi/config.yaml",
				"cdi-dir":         "/var/run/cdi",
				"sysfs-root":      "/sys",
				"dev-root":        "/dev",
				"registrar-dir":   "/var/lib/kubelet/plugins_registry",
				"plugin-data-dir": "/var/lib/kubelet/plugins/dri-cdi.dev",
				"metrics-addr":    ":9472",
				"resync-interval": "5m",
				"log-format":      "json",
				"log-level":       "info",
			}, args)
			require.Len(t, dra.Env, 1)
			require.Equal(t, "DRI_CDI_NODE_NAME", dra.Env[0].Name)
			require.Equal(t, "spec.nodeName", dra.Env[0].ValueFrom.FieldRef.FieldPath)
			checkHealth(t, dra, "dra-metrics", 9472)

			nri := container(t, spec, "nri")
			require.Empty(t, flags(t, nri.Args)["kubelet-checkpoint"], "no device manager checkpoint on a DRA node")
			checkHealth(t, nri, "nri-metrics", 9471)

			// Exactly these host paths, each at the same path inside.
			want := map[string]map[string]hostMount{
				"dra": {
					"/dev/dri":                             {true, corev1.HostPathDirectoryOrCreate},
					"/dev/accel":                           {true, corev1.HostPathDirectoryOrCreate},
					"/var/run/cdi":                         {false, corev1.HostPathDirectoryOrCreate},
					"/var/lib/kubelet/plugins_registry":    {false, corev1.HostPathDirectory},
					"/var/lib/kubelet/plugins/dri-cdi.dev": {false, corev1.HostPathDirectoryOrCreate},
					"/sys/fs/cgroup":                       {true, corev1.HostPathDirectory},
				},
				"nri": {
					"/var/run/nri":                   {true, corev1.HostPathDirectoryOrCreate},
					"/var/lib/kubelet/pod-resources": {true, corev1.HostPathDirectory},
					"/var/run/cdi":                   {true, corev1.HostPathDirectoryOrCreate},
					"/dev/dri":                       {true, corev1.HostPathDirectoryOrCreate},
					"/dev/accel":                     {true, corev1.HostPathDirectoryOrCreate},
					// The DRA checkpoint (share memory) and the cgroups
					// (dmem), read only.
					"/var/lib/kubelet/plugins/dri-cdi.dev": {true, corev1.HostPathDirectoryOrCreate},
					"/sys/fs/cgroup":                       {true, corev1.HostPathDirectory},
				},
			}
			mounts := hostMounts(t, spec)
			for _, c := range spec.Containers {
				require.Equal(t, want[c.Name], mounts[c.Name], "%s host paths", c.Name)
			}
		})
	}
}

// TestDRANRIContainerIsTheBases: the NRI container of the DRA pod is the
// device plugin pod's, but for the device manager checkpoint, which a DRA
// node does not have.
func TestDRANRIContainerIsTheBases(t *testing.T) {
	for name, r := range renderDRA(t) {
		t.Run(name, func(t *testing.T) {
			base := container(t, r.devicePlugin.Spec.Template.Spec, "nri").DeepCopy()
			dra := container(t, r.dra.Spec.Template.Spec, "nri").DeepCopy()
			// On a DRA node the NRI plugin reads the DRA plugin's
			// checkpoint and the host's cgroups, read only, for the
			// device memory limits of shares.
			for _, name := range []string{"plugin-data", "host-cgroup"} {
				i := slices.IndexFunc(dra.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == name })
				require.GreaterOrEqual(t, i, 0, name)
				require.True(t, dra.VolumeMounts[i].ReadOnly, name)
			}
			require.Contains(t, dra.Args, "--dra-checkpoint=/var/lib/kubelet/plugins/dri-cdi.dev/checkpoint.json")
			for _, c := range []*corev1.Container{base, dra} {
				c.Args = slices.DeleteFunc(c.Args, func(a string) bool {
					return strings.HasPrefix(a, "--kubelet-checkpoint=") || strings.HasPrefix(a, "--dra-checkpoint=")
				})
				c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == "device-plugins" || m.Name == "plugin-data" || m.Name == "host-cgroup"
				})
			}
			require.Equal(t, base, dra)
		})
	}
}

// TestDRARBAC pins the ServiceAccount's rights to what dri-cdi-dra calls
// (pkg/draapi.Client), and the policy that narrows them to its own node.
func TestDRARBAC(t *testing.T) {
	for name, r := range renderDRA(t) {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, []rbacv1.PolicyRule{
				{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"},
					Verbs: []string{"list", "watch", "create", "update", "delete"}},
				{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims"}, Verbs: []string{"get"}},
				{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
			}, r.clusterRole.Rules)
			b := r.clusterRoleBinding
			require.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: r.clusterRole.Name}, b.RoleRef)
			require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: r.serviceAccount.Name, Namespace: r.serviceAccount.Namespace}}, b.Subjects)

			p := r.policy.Spec
			require.Equal(t, admissionregistrationv1.Fail, *p.FailurePolicy)
			require.Len(t, p.MatchConstraints.ResourceRules, 1)
			rule := p.MatchConstraints.ResourceRules[0]
			require.Equal(t, []string{"resource.k8s.io"}, rule.APIGroups)
			require.Equal(t, []string{"resourceslices"}, rule.Resources)
			require.ElementsMatch(t, []admissionregistrationv1.OperationType{"CREATE", "UPDATE", "DELETE"}, rule.Operations)
			require.Len(t, p.MatchConditions, 1)
			user := "system:serviceaccount:" + r.serviceAccount.Namespace + ":" + r.serviceAccount.Name
			require.Equal(t, `request.userInfo.username == "`+user+`"`, p.MatchConditions[0].Expression,
				"the policy must match exactly the DRA plugin's ServiceAccount")
			var vars []string
			for _, v := range p.Variables {
				vars = append(vars, v.Expression)
			}
			require.Contains(t, strings.Join(vars, "\n"), "authentication.kubernetes.io/node-name")
			require.Contains(t, strings.Join(vars, "\n"), "spec.?nodeName")
			var validations []string
			for _, v := range p.Validations {
				validations = append(validations, v.Expression)
			}
			require.Equal(t, []string{`variables.userNode != ""`, "variables.userNode == variables.sliceNode"}, validations)
			require.Equal(t, r.policy.Name, r.policyBinding.Spec.PolicyName)
			require.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, r.policyBinding.Spec.ValidationActions)
		})
	}
}

// accelDrivers are the accel drivers with a DeviceClass of their own
// (habanalabs is left to Intel's own DRA driver).
var accelDrivers = []string{"intel_vpu", "amdxdna", "qaic", "rocket", "ethosu"}

// TestDRADeviceClasses: one class per default pool driver, carrying the
// device plugin's resource name as extendedResourceName, one per
// configured pool (selected by its resource, drivers and PCI IDs), and
// one for every card; no extended resource name twice.
func TestDRADeviceClasses(t *testing.T) {
	const attrs = `device.attributes["dri-cdi.dev"]`
	for name, r := range renderDRA(t) {
		t.Run(name, func(t *testing.T) {
			want := map[string]string{
				"i915.dri-cdi.dev":   "dri-cdi.dev/i915",
				"xe.dri-cdi.dev":     "dri-cdi.dev/xe",
				"amdgpu.dri-cdi.dev": "dri-cdi.dev/amdgpu",
				"gpu.dri-cdi.dev":    "",
				"accel.dri-cdi.dev":  "",
			}
			for _, d := range accelDrivers {
				want[strings.ReplaceAll(d, "_", "-")+".dri-cdi.dev"] = "dri-cdi.dev/" + d
			}
			if name == "helm-dra-pools" {
				want["gpu.intel.com.i915"] = "gpu.intel.com/i915"
			}
			got := map[string]string{}
			seen := map[string]bool{}
			for n, dc := range r.deviceClasses {
				require.Empty(t, dc.Namespace, "%s: DeviceClasses are cluster-scoped", n)
				require.Len(t, dc.Spec.Selectors, 1, n)
				expr := dc.Spec.Selectors[0].CEL.Expression
				require.True(t, strings.HasPrefix(expr, `device.driver == "dri-cdi.dev"`), "%s selects only our driver's devices: %s", n, expr)
				got[n] = ""
				if e := dc.Spec.ExtendedResourceName; e != nil {
					got[n] = *e
					require.False(t, seen[*e], "extendedResourceName %s twice", *e)
					seen[*e] = true
				}
			}
			require.Equal(t, want, got)
			for _, d := range append([]string{"i915", "xe", "amdgpu"}, accelDrivers...) {
				require.Equal(t, `device.driver == "dri-cdi.dev" && `+attrs+`.driver == "`+d+`"`,
					r.deviceClasses[strings.ReplaceAll(d, "_", "-")+".dri-cdi.dev"].Spec.Selectors[0].CEL.Expression)
			}
			require.Equal(t, `device.driver == "dri-cdi.dev" && `+attrs+`.class == "accel"`,
				r.deviceClasses["accel.dri-cdi.dev"].Spec.Selectors[0].CEL.Expression)
			if dc := r.deviceClasses["gpu.intel.com.i915"]; dc != nil {
				require.Equal(t, `device.driver == "dri-cdi.dev" && `+attrs+`.resource == "gpu.intel.com/i915" && `+
					attrs+`.driver in ["i915"] && ((`+attrs+`.vendorID == "8086" && `+attrs+`.deviceID == "56a0") || `+
					attrs+`.vendorID == "1af4")`, dc.Spec.Selectors[0].CEL.Expression)
			}
		})
	}
}

// TestDRAKustomizeAndHelmAgree: the overlay and the chart's dra.enabled
// render the same DRA pod, rights, policy and classes.
func TestDRAKustomizeAndHelmAgree(t *testing.T) {
	all := renderDRA(t)
	k, h := all["kustomize-dra"], all["helm-dra"]
	require.Equal(t, normalizePod(k.dra.Spec.Template.Spec), normalizePod(h.dra.Spec.Template.Spec))
	require.Equal(t, k.dra.Spec.UpdateStrategy, h.dra.Spec.UpdateStrategy)
	require.Equal(t, k.devicePlugin.Spec.Template.Spec.Affinity, h.devicePlugin.Spec.Template.Spec.Affinity)
	require.Equal(t, k.clusterRole.Rules, h.clusterRole.Rules)
	require.Equal(t, k.policy.Spec, h.policy.Spec)
	require.Equal(t, k.policyBinding.Spec, h.policyBinding.Spec)
	require.Equal(t, len(k.deviceClasses), len(h.deviceClasses))
	for n, dc := range k.deviceClasses {
		require.Contains(t, h.deviceClasses, n)
		require.Equal(t, dc.Spec, h.deviceClasses[n].Spec, n)
	}
}
