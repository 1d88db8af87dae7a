package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

const bundleDir = "/run/containerd/io.containerd.runtime.v2.task/k8s.io"

// usageRenders are the renderings with usage, the ServiceMonitor, the
// dashboard and the alerts on: the kustomize components and the chart's
// values, which must agree.
func usageRenders(t *testing.T) map[string]rendered {
	t.Helper()
	return map[string]rendered{
		"kustomize": mustRender(t, "kustomize usage", func() ([]byte, error) { return RenderKustomize("testdata/kustomize/usage") }),
		"helm":      mustRender(t, "helm usage", chart("usage.yaml")),
	}
}

func named[T interface {
	runtime.Object
	GetName() string
}](t *testing.T, objs []runtime.Object, name string) T {
	t.Helper()
	for _, o := range objs {
		if o, ok := o.(T); ok && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no object named %q", name)
	var zero T
	return zero
}

// TestUsageAddsOnlyWhatItNeeds checks that with usage on, the scanning
// containers (the agent, and the DRA plugin) get --usage, the host's
// /proc and the bundle dir read-only and exactly CAP_SYS_PTRACE (and the
// DRA plugin the kubelet's PodResources read-only, for the claims), and that
// nothing else changes: the NRI plugin keeps no capability, no host
// namespace is shared.
func TestUsageAddsOnlyWhatItNeeds(t *testing.T) {
	renders := usageRenders(t)
	// The component on the DRA overlay patches both DaemonSets, as the
	// chart does.
	renders["kustomize-dra"] = mustRender(t, "kustomize usage with DRA", func() ([]byte, error) {
		return RenderKustomize("testdata/kustomize/usage-dra")
	})
	for name, r := range renders {
		t.Run(name, func(t *testing.T) {
			dss := []*appsv1.DaemonSet{named[*appsv1.DaemonSet](t, r.objs, "dri-cdi")}
			scanners := []string{"agent"}
			if name != "kustomize" {
				// Both DaemonSets when the DRA one is there.
				dss = append(dss, named[*appsv1.DaemonSet](t, r.objs, "dri-cdi-dra"))
				scanners = append(scanners, "dra")
			}
			for i, ds := range dss {
				spec := ds.Spec.Template.Spec
				require.False(t, spec.HostPID, "a hostPath of /proc, not the host's PID namespace")
				c := container(t, spec, scanners[i])
				f := flags(t, c.Args[1:])
				require.Equal(t, "/host/proc", f["proc-root"])
				require.Equal(t, bundleDir, f["usage-bundle-dir"])
				require.Equal(t, "15s", f["usage-interval"])
				require.Equal(t, "15m", f["usage-idle-after"])
				require.Equal(t, "true", f["usage"])
				sc := c.SecurityContext
				require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
				require.Equal(t, []corev1.Capability{"SYS_PTRACE"}, sc.Capabilities.Add)
				require.Equal(t, corev1.AppArmorProfileTypeUnconfined, sc.AppArmorProfile.Type)
				require.False(t, *sc.Privileged)
				require.False(t, *sc.AllowPrivilegeEscalation)
				require.True(t, *sc.ReadOnlyRootFilesystem)
				mounts := map[string]corev1.VolumeMount{}
				for _, m := range c.VolumeMounts {
					mounts[m.Name] = m
				}
				require.Equal(t, corev1.VolumeMount{Name: "host-proc", MountPath: "/host/proc", ReadOnly: true}, mounts["host-proc"])
				require.Equal(t, corev1.VolumeMount{Name: "runtime-bundles", MountPath: bundleDir, ReadOnly: true}, mounts["runtime-bundles"])
				vols := map[string]corev1.Volume{}
				for _, v := range spec.Volumes {
					vols[v.Name] = v
				}
				require.Equal(t, "/proc", vols["host-proc"].HostPath.Path)
				require.Equal(t, bundleDir, vols["runtime-bundles"].HostPath.Path)
				if scanners[i] == "dra" {
					// Which claims each container holds its cards through:
					// the kubelet's PodResources, read-only.
					require.Equal(t, "/var/lib/kubelet/pod-resources/kubelet.sock", f["pod-resources-socket"])
					require.Equal(t, corev1.VolumeMount{Name: "pod-resources", MountPath: "/var/lib/kubelet/pod-resources", ReadOnly: true}, mounts["pod-resources"])
					require.Equal(t, "/var/lib/kubelet/pod-resources", vols["pod-resources"].HostPath.Path)
				} else {
					require.NotContains(t, mounts, "pod-resources", "the device plugin's agent names no claims")
				}
				for _, other := range spec.Containers {
					if other.Name == scanners[i] {
						continue
					}
					require.Empty(t, other.SecurityContext.Capabilities.Add, other.Name)
					for _, m := range other.VolumeMounts {
						require.NotContains(t, []string{"host-proc", "runtime-bundles"}, m.Name, other.Name)
					}
				}
			}
			sm := only[*monitoringv1.ServiceMonitor](t, r.objs, "ServiceMonitor")
			require.Equal(t, "agent-metrics", sm.Spec.Endpoints[0].Port)
			require.True(t, sm.Spec.Endpoints[0].HonorLabels, "the usage labels name workloads, not the agent pod")
			dra := sm.Spec.Endpoints[len(sm.Spec.Endpoints)-1]
			require.Equal(t, "dra-metrics", dra.Port, "the DRA plugin's usage metrics are scraped too")
			require.True(t, dra.HonorLabels, "the usage labels name workloads, not the DRA pod")
		})
	}
}

// TestUsageOffChangesNothing checks that no rendering without usage
// carries any of it.
func TestUsageOffChangesNothing(t *testing.T) {
	for name, r := range renderAll(t) {
		t.Run(name, func(t *testing.T) {
			for _, s := range []string{"--usage=", "host-proc", "SYS_PTRACE", "appArmorProfile", "honorLabels", "PrometheusRule", "grafana_dashboard"} {
				require.NotContains(t, string(r.raw), s)
			}
		})
	}
}

// documentedMetrics are the metric names in the tables of the metrics
// pages.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	cell := regexp.MustCompile("(?m)^\\| `(dri_cdi_[a-z_]+)` \\| (counter|gauge|histogram) \\|")
	out := map[string]bool{}
	for _, page := range []string{"metrics.md", "metrics-nri.md", "dra-plugin.md"} {
		raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", page))
		require.NoError(t, err)
		for _, m := range cell.FindAllStringSubmatch(string(raw), -1) {
			out[m[1]] = true
			if m[2] == "histogram" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					out[m[1]+s] = true
				}
			}
		}
	}
	require.Contains(t, out, "dri_cdi_usage_engine_busy_seconds_total")
	return out
}

var metricName = regexp.MustCompile(`\b[a-z_]+_[a-z_]+\b`)

// labelList matches a PromQL label list: by, without, on, ignoring,
// group_left or group_right and its parenthesized label names.
var labelList = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([a-zA-Z0-9_,\s]*\)`)

// queryMetrics returns the metric names of a PromQL expression: every
// dri_cdi_ name; any other name that is not a PromQL keyword is an error
// of the caller's to report.
func queryMetrics(expr string) (metrics, others []string) {
	// Drop label matchers and strings, which hold names that are values,
	// and the label lists of aggregations and vector matching, which
	// hold label names.
	expr = regexp.MustCompile(`\{[^}]*\}|"[^"]*"`).ReplaceAllString(expr, "")
	expr = labelList.ReplaceAllString(expr, "")
	for _, n := range metricName.FindAllString(expr, -1) {
		switch {
		case strings.HasPrefix(n, "dri_cdi_"):
			metrics = append(metrics, n)
		case n == "histogram_quantile", n == "__rate_interval", n == "label_values":
		default:
			others = append(others, n)
		}
	}
	return metrics, others
}

func requireQueryDocumented(t *testing.T, docs map[string]bool, where, expr string) {
	t.Helper()
	require.Equal(t, strings.Count(expr, "("), strings.Count(expr, ")"), "%s: unbalanced parentheses in %s", where, expr)
	metrics, others := queryMetrics(expr)
	require.NotEmpty(t, metrics, "%s: no dri-cdi metric in %s", where, expr)
	require.Empty(t, others, "%s: names that are no dri-cdi metric in %s", where, expr)
	for _, m := range metrics {
		require.True(t, docs[m], "%s: %s is in no table of docs/metrics*.md or docs/dra-plugin.md", where, m)
	}
}

// TestAlerts checks the PrometheusRule of both renderings: the same
// rules, the alerts the issue asks for, and every metric in an
// expression documented, so no alert waits on a metric that does not
// exist.
func TestAlerts(t *testing.T) {
	docs := documentedMetrics(t)
	var specs []monitoringv1.PrometheusRuleSpec
	for name, r := range usageRenders(t) {
		t.Run(name, func(t *testing.T) {
			rule := only[*monitoringv1.PrometheusRule](t, r.objs, "PrometheusRule")
			specs = append(specs, rule.Spec)
			var alerts []string
			for _, g := range rule.Spec.Groups {
				for _, a := range g.Rules {
					require.NotEmpty(t, a.Alert)
					require.NotEmpty(t, a.Annotations["summary"], a.Alert)
					require.NotEmpty(t, a.Labels["severity"], a.Alert)
					requireQueryDocumented(t, docs, a.Alert, a.Expr.String())
					alerts = append(alerts, a.Alert)
				}
			}
			sort.Strings(alerts)
			require.Subset(t, alerts, []string{"DriCdiCardUnhealthy", "DriCdiSpecStoreStale", "DriCdiNRIDisconnected",
				"DriCdiContainersDenied", "DriCdiContainersFailed", "DriCdiEngineSaturated", "DriCdiIdleAllocation", "DriCdiShareOverPromised"})
		})
	}
	require.Len(t, specs, 2)
	require.Equal(t, specs[0], specs[1], "the kustomize component's rules are the chart's")
}

// TestDashboard checks the dashboard ConfigMap of both renderings: the
// sidecar's label, valid JSON with panels, the same JSON in both, and
// every metric of every query documented.
func TestDashboard(t *testing.T) {
	docs := documentedMetrics(t)
	var bodies []string
	for name, r := range usageRenders(t) {
		t.Run(name, func(t *testing.T) {
			cm := named[*corev1.ConfigMap](t, r.objs, "dri-cdi-dashboard")
			require.Equal(t, "1", cm.Labels["grafana_dashboard"])
			body := cm.Data["dri-cdi.json"]
			bodies = append(bodies, body)
			var dash struct {
				UID    string `json:"uid"`
				Title  string `json:"title"`
				Panels []struct {
					Type    string `json:"type"`
					Title   string `json:"title"`
					Targets []struct {
						Expr string `json:"expr"`
					} `json:"targets"`
				} `json:"panels"`
				Templating struct {
					List []struct {
						Query any `json:"query"`
					} `json:"list"`
				} `json:"templating"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &dash))
			require.Equal(t, "dri-cdi", dash.UID)
			var queries int
			for _, p := range dash.Panels {
				if p.Type == "row" {
					continue
				}
				require.NotEmpty(t, p.Targets, p.Title)
				for _, q := range p.Targets {
					requireQueryDocumented(t, docs, p.Title, q.Expr)
					queries++
				}
			}
			require.GreaterOrEqual(t, queries, 10)
			for _, v := range dash.Templating.List {
				if q, ok := v.Query.(string); ok && strings.HasPrefix(q, "label_values(") {
					requireQueryDocumented(t, docs, "variable", q)
				}
			}
		})
	}
	require.Len(t, bodies, 2)
	require.JSONEq(t, bodies[0], bodies[1], "the kustomize component's dashboard is the chart's")
}

// TestMonitoringFilesAgree checks the kustomize component's copies of the
// chart's dashboard and rules byte for byte, so that editing one without
// the other fails here before it fails in a render.
func TestMonitoringFilesAgree(t *testing.T) {
	chartDash, err := os.ReadFile(filepath.Join(chartDir, "files/dashboard.json"))
	require.NoError(t, err)
	compDash, err := os.ReadFile(filepath.Join(kustomizeDir, "components/monitoring/dashboard.json"))
	require.NoError(t, err)
	require.Equal(t, string(chartDash), string(compDash))

	chartRules, err := os.ReadFile(filepath.Join(chartDir, "files/alerts.yaml"))
	require.NoError(t, err)
	compRaw, err := os.ReadFile(filepath.Join(kustomizeDir, "components/monitoring/prometheusrule.yaml"))
	require.NoError(t, err)
	var comp struct {
		Spec map[string]any `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(compRaw, &comp))
	var rules map[string]any
	require.NoError(t, yaml.UnmarshalStrict(chartRules, &rules))
	require.Equal(t, rules, comp.Spec)
}

// TestQueryMetricsSkipsLabelLists: the names in by, on and group_left
// lists are labels, not metrics, while a name outside them still counts.
func TestQueryMetricsSkipsLabelLists(t *testing.T) {
	metrics, others := queryMetrics(`max by (card, namespace) (rate(dri_cdi_usage_engine_busy_seconds_total[5m])) / on (card, namespace) group_left (claim_namespace, share_id) (dri_cdi_usage_claim_promised_ratio > 0)`)
	require.Equal(t, []string{"dri_cdi_usage_engine_busy_seconds_total", "dri_cdi_usage_claim_promised_ratio"}, metrics)
	require.Empty(t, others)
	_, others = queryMetrics(`sum by (pod) (node_gpu_busy) / dri_cdi_usage_idle`)
	require.Equal(t, []string{"node_gpu_busy"}, others)
}
