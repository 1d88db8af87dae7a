package usage

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// DefaultBundleDir is where containerd 2.x (and 1.7) keeps the OCI bundle
// of each container of the Kubernetes namespace: <dir>/<container
// ID>/config.json. k3s keeps it under /run/k3s/containerd instead.
const DefaultBundleDir = "/run/containerd/io.containerd.runtime.v2.task/k8s.io"

// The CRI plugin of containerd writes these annotations into every
// Kubernetes container's OCI spec (internal/cri/annotations in
// containerd 2.x).
const (
	annotationNamespace = "io.kubernetes.cri.sandbox-namespace"
	annotationPod       = "io.kubernetes.cri.sandbox-name"
	annotationPodUID    = "io.kubernetes.cri.sandbox-uid"
	annotationContainer = "io.kubernetes.cri.container-name"
)

// Names are the Kubernetes names of a container.
type Names struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
}

// Namer names the container an Owner stands for. Alive reports whether
// the container still exists, so that its figures are kept while it runs
// without a client and dropped once it is gone.
type Namer interface {
	Name(o Owner) (Names, bool)
	Alive(o Owner) bool
}

// maxBundleConfig bounds the read of one config.json.
const maxBundleConfig = 4 << 20

// BundleNamer names containers from the annotations in their OCI bundle's
// config.json, which containerd's CRI plugin writes and the runtime keeps
// for as long as the container exists. It works with or without the NRI
// plugin, for device plugin and DRA nodes alike, and needs only the
// bundle directory mounted read-only. Names are cached per container ID.
type BundleNamer struct {
	dir   string
	mu    sync.Mutex
	cache map[string]Names
}

// NewBundleNamer returns a namer reading bundles under dir
// (DefaultBundleDir).
func NewBundleNamer(dir string) *BundleNamer {
	return &BundleNamer{dir: dir, cache: map[string]Names{}}
}

// Name reads the container's names; false when its bundle is missing or
// names another pod than the cgroup says.
func (b *BundleNamer) Name(o Owner) (Names, bool) {
	if o.ContainerID == "" {
		return Names{}, false
	}
	b.mu.Lock()
	n, ok := b.cache[o.ContainerID]
	b.mu.Unlock()
	if ok {
		return n, true
	}
	text, err := readLimited(filepath.Join(b.dir, o.ContainerID, "config.json"), maxBundleConfig)
	if err != nil {
		return Names{}, false
	}
	var spec struct {
		Annotations map[string]string `json:"annotations"`
	}
	if json.Unmarshal(text, &spec) != nil {
		return Names{}, false
	}
	a := spec.Annotations
	if a[annotationPodUID] != o.PodUID || a[annotationPod] == "" {
		return Names{}, false
	}
	n = Names{Namespace: a[annotationNamespace], Pod: a[annotationPod], Container: a[annotationContainer]}
	b.mu.Lock()
	b.cache[o.ContainerID] = n
	b.mu.Unlock()
	return n, true
}

// Alive reports whether the container's bundle is still there; the
// runtime removes it when the container is deleted.
func (b *BundleNamer) Alive(o Owner) bool {
	_, err := os.Stat(filepath.Join(b.dir, o.ContainerID))
	alive := err == nil || !errors.Is(err, fs.ErrNotExist)
	if !alive {
		b.mu.Lock()
		delete(b.cache, o.ContainerID)
		b.mu.Unlock()
	}
	return alive
}
