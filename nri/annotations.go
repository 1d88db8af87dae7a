package nri

import (
	"sort"
	"strings"

	"github.com/containerd/nri/pkg/api"
	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"
)

// requestedCDINames returns every CDI device name the runtime resolves
// for container c: Container.CDIDevices (containerd passes it to NRI
// only since 2.3) and the names in cdi.k8s.io/* container annotations,
// which containerd also injects (internal/cri/server/
// container_create_linux.go: WithCDI(config.Annotations,
// config.CDIDevices)). On an older runtime the annotations may be the
// only place such a name shows. Names of every kind are returned; the
// caller keeps those of its kind. Annotation values are comma-separated
// qualified names, as the CDI library's ParseAnnotations reads them.
func requestedCDINames(c *api.Container) []string {
	var names []string
	for _, d := range c.GetCDIDevices() {
		names = append(names, d.GetName())
	}
	var keys []string
	for k := range c.GetAnnotations() {
		if strings.HasPrefix(k, cdilib.AnnotationPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys) // a stable order for error messages
	for _, k := range keys {
		for _, n := range strings.Split(c.GetAnnotations()[k], ",") {
			names = append(names, strings.TrimSpace(n))
		}
	}
	return names
}
