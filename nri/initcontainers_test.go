package nri_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

// cpEntry is one allocation in a kubelet device manager checkpoint.
type cpEntry struct {
	podUID, container, resource string
	ids                         []string
}

// writeCheckpoint writes a checkpoint in the kubelet's layout (json.Marshal
// of devicemanager checkpoint.Data), replacing the file by rename as the
// kubelet does.
func writeCheckpoint(t *testing.T, path string, entries ...cpEntry) {
	t.Helper()
	type entry struct {
		PodUID, ContainerName, ResourceName string
		DeviceIDs                           map[string][]string
		AllocResp                           []byte
	}
	var data struct {
		Data struct {
			PodDeviceEntries  []entry
			RegisteredDevices map[string][]string
		}
		Checksum uint64
	}
	data.Data.RegisteredDevices = map[string][]string{resI915: {cardA, cardB}}
	data.Data.PodDeviceEntries = []entry{}
	for _, e := range entries {
		data.Data.PodDeviceEntries = append(data.Data.PodDeviceEntries, entry{
			PodUID: e.podUID, ContainerName: e.container, ResourceName: e.resource,
			DeviceIDs: map[string][]string{"-1": e.ids}, AllocResp: []byte{0x0a, 0x00},
		})
	}
	data.Checksum = 42
	b, err := json.Marshal(data)
	require.NoError(t, err)
	tmp := filepath.Join(filepath.Dir(path), ".checkpoint.tmp")
	require.NoError(t, os.WriteFile(tmp, b, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// TestInitContainerFromCheckpoint: PodResources does not report regular
// init containers, so the plugin confirms their allocation from the
// kubelet's device manager checkpoint, keyed by the pod UID the kubelet
// set on the sandbox. A copied annotation gets nothing.
func TestInitContainerFromCheckpoint(t *testing.T) {
	r := newRig(t, withCheckpoint())
	r.start()
	// The kubelet's view: PodResources knows the app container only; the
	// checkpoint also has the init container, which shares the device.
	r.kubelet.SetPod("default", "withinit", map[string]podresourcestest.Container{"app": {resI915: {cardA}}})
	r.kubelet.SetPod("default", "copycat", map[string]podresourcestest.Container{"app": {}})
	writeCheckpoint(t, r.checkpointPath(),
		cpEntry{"uid-withinit", "init", resI915, []string{cardA}},
		cpEntry{"uid-withinit", "app", resI915, []string{cardA}},
		cpEntry{"uid-notinpodresources", "init", resI915, []string{cardB}},
	)
	cardANodes := []node{{"/dev/dri/card1", 226, 1, 0, videoGID}, {"/dev/dri/renderD128", 226, 128, 0, renderGID}}
	cardBNodes := []node{{"/dev/dri/card2", 226, 2, 0, videoGID}, {"/dev/dri/renderD129", 226, 129, 0, renderGID}}

	tests := map[string]struct {
		pod     *api.PodSandbox
		ctr     *api.Container
		want    []node
		wantErr []string
		wantLog string
	}{
		"init container, nri delivery: nodes injected": {
			pod: pod("withinit"), ctr: container("init", asks(resI915, cardA)), want: cardANodes,
		},
		"init container, cdi-cri delivery: CDI nodes verified": {
			pod: pod("withinit"), ctr: container("init", asks(resI915, cardA), cdiNames(cardA), cdiInjected(cardA)),
			want: []node{{"/dev/dri/card1", 226, 1, 0, 0}, {"/dev/dri/renderD128", 226, 128, 0, 0}},
		},
		"pod PodResources does not know: from the checkpoint": {
			pod: pod("notinpodresources"), ctr: container("init", asks(resI915, cardB)), want: cardBNodes,
		},
		"init container asks for a card the checkpoint gives it not": {
			pod: pod("withinit"), ctr: container("init", asks(resI915, cardB)), wantLog: resI915 + "=" + cardB,
		},
		"annotation copied from another pod: nothing": {
			pod: pod("copycat"), ctr: container("init", asks(resI915, cardA)), wantLog: resI915 + "=" + cardA,
		},
		"annotation copied from the pod's earlier incarnation (same name, new UID): nothing": {
			pod:     &api.PodSandbox{Id: "sandbox-withinit-2", Name: "withinit", Namespace: "default", Uid: "uid-withinit-2"},
			ctr:     container("init", asks(resI915, cardA)),
			wantLog: resI915 + "=" + cardA,
		},
		"CDI nodes of a card the checkpoint does not give this pod: container fails": {
			pod:     pod("copycat"),
			ctr:     container("init", asks(resI915, cardA), cdiNames(cardA), cdiInjected(cardA)),
			wantErr: []string{"default/copycat", `"init"`, cardA, "not allocated"},
		},
		"no pod UID from the runtime: container fails": {
			pod:     &api.PodSandbox{Id: "sandbox-x", Name: "withinit", Namespace: "default"},
			ctr:     container("init", asks(resI915, cardA)),
			wantErr: []string{"default/withinit", "no pod UID"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r.logs.Reset()
			spec, err := r.create(tc.pod, tc.ctr)
			if !requireCreated(t, spec, err, tc.wantErr, tc.want) {
				return
			}
			if tc.wantLog != "" {
				require.True(t, logged(r, logrus.WarnLevel, tc.wantLog), "no warning containing %q", tc.wantLog)
			}
		})
	}

	t.Run("unreadable checkpoint: the asking container fails, others do not", func(t *testing.T) {
		require.NoError(t, os.Remove(r.checkpointPath()))
		_, err := r.create(pod("withinit"), container("init", asks(resI915, cardA)))
		require.Error(t, err)
		require.ErrorContains(t, err, "cannot confirm")
		require.ErrorContains(t, err, r.checkpointPath())
		require.ErrorContains(t, err, "device-plugins")

		spec, err := r.create(pod("withinit"), container("app", asks(resI915, cardA)))
		require.NoError(t, err, "PodResources still answers for app containers")
		require.Equal(t, cardANodes, nodesOf(spec))
		_, err = r.create(pod("withinit"), container("plain"))
		require.NoError(t, err)
	})
}
