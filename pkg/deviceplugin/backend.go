package deviceplugin

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/agent"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/kubeletcheckpoint"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
)

// BackendOptions configure the device plugin as the loop's backend.
type BackendOptions struct {
	// KubeletDir is the kubelet's device-plugins dir.
	KubeletDir string
	// Delivery is cdi-cri, nri or device-specs.
	Delivery string
	// Log receives the backend's logs.
	Log *logrus.Entry

	// instance overrides the random socket name suffix (export_test.go).
	instance string
}

// Backend is the device plugin manager as the discovery and spec loop's
// backend (agent.Backend): one device plugin per pool, registered with
// the kubelet. It cleans up the sockets a crashed agent left before the
// first pass, warns while the kubelet's directory is missing, and reads
// the cards in use from the kubelet's device manager checkpoint.
type Backend struct {
	*Manager
	kubeletDir string
	served     func(resource string) bool
	log        *logrus.Entry
}

var (
	_ agent.Backend             = (*Backend)(nil)
	_ agent.DevicePluginBackend = (*Backend)(nil)
	_ agent.Starter             = (*Backend)(nil)
	_ agent.InUseReporter       = (*Backend)(nil)
)

// NewBackend checks o and builds the backend for cfg; its metrics go
// into met's registry. Nothing is written or served yet.
func NewBackend(cfg *config.Config, met *metrics.Agent, o BackendOptions) (*Backend, error) {
	if o.Log == nil {
		return nil, errors.New("no logger")
	}
	delivery, err := ParseDelivery(o.Delivery)
	if err != nil {
		return nil, err
	}
	kind := cfg.Kind()
	mgr, err := NewManager(Options{
		KubeletDir: o.KubeletDir,
		Delivery:   delivery,
		Name:       func(id string) string { return cdi.QualifiedName(kind, id) },
		Instance:   o.instance,
		Log:        o.Log,
		Metrics:    NewMetrics(met),
	})
	if err != nil {
		return nil, err
	}
	return &Backend{Manager: mgr, kubeletDir: o.KubeletDir, served: cfg.ServesResource, log: o.Log}, nil
}

// HostDirs is the kubelet's device plugin directory (agent.Backend).
func (b *Backend) HostDirs() []agent.HostDir {
	return []agent.HostDir{{Path: b.kubeletDir,
		Missing: "the kubelet's device plugin directory (--kubelet-dir) is missing, so no resource can be registered; the kubelet creates it when it starts"}}
}

// DevicePluginDir is the kubelet's device plugin directory
// (agent.DevicePluginBackend).
func (b *Backend) DevicePluginDir() string { return b.kubeletDir }

// BeforeFirstPass removes the sockets a crashed agent left: the kubelet
// would keep dialing them (agent.Starter).
func (b *Backend) BeforeFirstPass() {
	if _, err := b.RemoveStaleSockets(); err != nil {
		b.log.WithError(err).Warn("cannot remove stale device plugin sockets")
	}
}

// Run registers and serves every resource until ctx ends.
func (b *Backend) Run(ctx context.Context) error {
	b.log.WithField("resources", b.Resources()).Info("serving device plugins")
	return b.Manager.Run(ctx)
}

// CardsInUse returns the cards the kubelet's device manager checkpoint
// records as allocated under a resource the config serves, each with
// that resource (agent.InUseReporter). A missing checkpoint holds
// nothing.
func (b *Backend) CardsInUse() (map[string]string, error) {
	return allocatedCards(b.kubeletDir, b.served)
}

func allocatedCards(dir string, served func(string) bool) (map[string]string, error) {
	cp, err := kubeletcheckpoint.ReadFile(filepath.Join(dir, kubeletcheckpoint.FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range cp.Entries {
		if !served(e.ResourceName) {
			continue
		}
		for _, id := range e.DeviceIDs {
			if card := alloc.CardID(id); card != "" && alloc.ValidCardID(card) == nil {
				out[card] = e.ResourceName
			}
		}
	}
	return out, nil
}
