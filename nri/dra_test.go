package nri_test

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

// draDevice is a device of ResourceClaim claim as the kubelet reports it
// after our driver's NodePrepareResources returned the card's CDI name.
func draDevice(claim, card string) podresources.ClaimDevice {
	return podresources.ClaimDevice{
		Claim: claim, Namespace: "default", Driver: config.DRADriver, Pool: "node-a",
		Device: "dev-" + card, CDIDevices: []string{kind + "=" + card},
	}
}

// cdiAnnotation names CDI devices the way a pod author can: a cdi.k8s.io/*
// container annotation, which containerd's CDI also injects.
func cdiAnnotation(names ...string) ctrOpt {
	return func(c *api.Container) {
		v := ""
		for i, n := range names {
			if i > 0 {
				v += ","
			}
			v += n
		}
		c.Annotations["cdi.k8s.io/forged"] = v
	}
}

func TestCreateContainerDRA(t *testing.T) {
	r := newRig(t)
	r.start()

	cardANodes := []node{{"/dev/dri/card1", 226, 1, 0, 0}, {"/dev/dri/renderD128", 226, 128, 0, 0}}
	tests := map[string]struct {
		ctr     *api.Container
		devices map[string]podresourcestest.Container // device-plugin allocations
		claims  map[string][]podresources.ClaimDevice // DRA claim devices
		want    []node                                // devices in the adjusted spec
		wantErr []string                              // substrings of the error
	}{
		"claimed card already injected by containerd's CDI: verified, nothing duplicated": {
			ctr:     container("app", cdiNames(cardA), cdiInjected(cardA)),
			devices: map[string]podresourcestest.Container{"app": {}},
			claims:  map[string][]podresources.ClaimDevice{"app": {draDevice("gpu", cardA)}},
			want:    cardANodes,
		},
		"claimed card the runtime left out: its nodes added": {
			ctr:     container("app", cdiNames(cardA)),
			devices: map[string]podresourcestest.Container{"app": {}},
			claims:  map[string][]podresources.ClaimDevice{"app": {draDevice("gpu", cardA)}},
			want:    []node{{"/dev/dri/card1", 226, 1, 0, videoGID}, {"/dev/dri/renderD128", 226, 128, 0, renderGID}},
		},
		"one claim shared by two containers: each gets the card": {
			ctr:     container("second", cdiNames(cardA), cdiInjected(cardA)),
			devices: map[string]podresourcestest.Container{"app": {}, "second": {}},
			claims: map[string][]podresources.ClaimDevice{
				"app": {draDevice("gpu", cardA)}, "second": {draDevice("gpu", cardA)},
			},
			want: cardANodes,
		},
		"device plugin and DRA in one container: both cards": {
			ctr:     container("app", asks(resI915, cardA), cdiNames(cardA, cardB), cdiInjected(cardA, cardB)),
			devices: map[string]podresourcestest.Container{"app": {resI915: {cardA}}},
			claims:  map[string][]podresources.ClaimDevice{"app": {draDevice("gpu", cardB)}},
			want: append(append([]node(nil), cardANodes...),
				node{"/dev/dri/card2", 226, 2, 0, 0}, node{"/dev/dri/renderD129", 226, 129, 0, 0}),
		},
		"our CDI device in a cdi.k8s.io annotation without a claim: container fails": {
			ctr:     container("app", cdiAnnotation(kind+"="+cardA), cdiInjected(cardA)),
			devices: map[string]podresourcestest.Container{"app": {}},
			wantErr: []string{"default/dra", `"app"`, cardA, "not allocated"},
		},
		"claim of another container in the pod: container fails": {
			ctr:     container("app", cdiNames(cardA), cdiInjected(cardA)),
			devices: map[string]podresourcestest.Container{"app": {}, "other": {}},
			claims:  map[string][]podresources.ClaimDevice{"other": {draDevice("gpu", cardA)}},
			wantErr: []string{cardA, "not allocated"},
		},
		"claim covers one card, the container names two: container fails on the other": {
			ctr:     container("app", cdiNames(cardA), cdiAnnotation(kind+"="+cardB), cdiInjected(cardA, cardB)),
			devices: map[string]podresourcestest.Container{"app": {}},
			claims:  map[string][]podresources.ClaimDevice{"app": {draDevice("gpu", cardA)}},
			wantErr: []string{cardB, "not allocated"},
		},
		"another driver's claim naming our CDI kind authorizes nothing": {
			ctr:     container("app", cdiNames(cardA), cdiInjected(cardA)),
			devices: map[string]podresourcestest.Container{"app": {}},
			claims: map[string][]podresources.ClaimDevice{"app": {func() podresources.ClaimDevice {
				d := draDevice("gpu", cardA)
				d.Driver = "gpu.example.com"
				return d
			}()}},
			wantErr: []string{cardA, "not allocated"},
		},
		"a claim never grants the reserved all": {
			ctr:     container("app", cdiAnnotation(kind+"=all")),
			devices: map[string]podresourcestest.Container{"app": {}},
			claims: map[string][]podresources.ClaimDevice{"app": {{
				Claim: "gpu", Namespace: "default", Driver: config.DRADriver, CDIDevices: []string{kind + "=all"},
			}}},
			wantErr: []string{"all", "not allocated"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r.kubelet.SetPod("default", "dra", tc.devices)
			r.kubelet.SetClaims("default", "dra", tc.claims)
			spec, err := r.create(pod("dra"), tc.ctr)
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					require.ErrorContains(t, err, s)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, nodesOf(spec))
			for _, n := range tc.want {
				require.Equal(t, 1, allowRules(spec, n.major, n.minor), "allow rules for c %d:%d", n.major, n.minor)
			}
		})
	}
}

// A container that asks for nothing never reaches the kubelet, DRA or
// not: an unrelated container cannot fail on PodResources.
func TestDRAUnrelatedContainerNotAsked(t *testing.T) {
	r := newRig(t)
	r.start()
	r.kubelet.SetPod("default", "dra", map[string]podresourcestest.Container{"app": {}})
	r.kubelet.SetClaims("default", "dra", map[string][]podresources.ClaimDevice{"app": {draDevice("gpu", cardA)}})
	r.kubelet.Stop()
	spec, err := r.create(pod("dra"), container("app", annotation("cdi.k8s.io/nic", "nic.example.com/nic=eth1")))
	require.NoError(t, err)
	require.Empty(t, spec.Linux.Devices)
}
