package cdi

import (
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// An unbound card X whose numbers a re-probed card Y took: X's name must
// still resolve (the kubelet reuses its checkpointed Allocate response),
// to no device node at all, only the marker; Y's spec and "all" hold Y's
// numbers alone.
func TestGenerateUnavailableCardHoldsNoNumbers(t *testing.T) {
	x := Unavailable(i915("0000:01:00.0", 0, 128))
	y := i915("0000:02:00.0", 0, 128) // Y now owns card0 and renderD128
	require.True(t, IsUnavailable(&x))
	require.False(t, IsUnavailable(&y))

	cache, dir, _ := runtimeCache(t, DefaultKind, []drm.Card{x, y})
	require.Equal(t, []string{"dri-cdi.dev/gpu=0000:01:00.0", "dri-cdi.dev/gpu=0000:02:00.0", "dri-cdi.dev/gpu=all"}, cache.ListDevices())

	ociSpec := &oci.Spec{Process: &oci.Process{}}
	unresolved, err := cache.InjectDevices(ociSpec, "dri-cdi.dev/gpu=0000:01:00.0")
	require.NoError(t, err)
	require.Empty(t, unresolved)
	if ociSpec.Linux != nil {
		require.Empty(t, ociSpec.Linux.Devices, "an unavailable card must hand over no device node")
		if ociSpec.Linux.Resources != nil {
			require.Empty(t, ociSpec.Linux.Resources.Devices, "an unavailable card must grant no cgroup rule")
		}
	}
	id, ok := UnavailableCard(ociSpec.Process.Env)
	require.True(t, ok, "env %v", ociSpec.Process.Env)
	require.Equal(t, x.ID, id)

	all := &oci.Spec{Process: &oci.Process{}}
	_, err = cache.InjectDevices(all, "dri-cdi.dev/gpu=all")
	require.NoError(t, err)
	for _, d := range all.Linux.Devices {
		require.NotContains(t, d.Path, x.ID, "all must hold nothing of X")
	}
	require.Len(t, all.Linux.Devices, len(y.Nodes()), "all holds Y's nodes once")

	loaded, err := LoadDevices(dir, DefaultKind)
	require.NoError(t, err)
	require.Contains(t, loaded, x.ID)
	require.Empty(t, loaded[x.ID], "LoadDevices: an unavailable card is defined, without nodes")
	require.Len(t, loaded[y.ID], len(y.Nodes()))
}

// An unbound accel device holds no number either: its accel minor may
// be the next accel device's.
func TestGenerateUnavailableAccelHoldsNoNumbers(t *testing.T) {
	x := Unavailable(accelCard("0000:00:0b.0", "intel_vpu", "pci", 0))
	require.True(t, IsUnavailable(&x))
	require.Nil(t, x.AccelNode)
	files, err := Generate(DefaultKind, []drm.Card{x})
	require.NoError(t, err)
	require.Len(t, files, 1)
	require.Empty(t, files[0].Spec.Devices[0].ContainerEdits.DeviceNodes)
}

func TestGenerateOnlyUnavailableCardsHasNoAllDevice(t *testing.T) {
	files, err := Generate(DefaultKind, []drm.Card{Unavailable(i915("0000:01:00.0", 0, 128))})
	require.NoError(t, err)
	require.Len(t, files, 1)
	require.Equal(t, "0000:01:00.0", files[0].Device)
	require.Empty(t, files[0].Spec.Devices[0].ContainerEdits.DeviceNodes)
	require.Equal(t, []string{UnavailableEnv + "=0000:01:00.0"}, files[0].Spec.Devices[0].ContainerEdits.Env)
}

func TestValidateSpecRejectsEmptyAndForeignMarkers(t *testing.T) {
	for name, env := range map[string][]string{
		"no edits":           nil,
		"marker of another":  {UnavailableEnv + "=0000:09:00.0"},
		"marker plus more":   {UnavailableEnv + "=0000:01:00.0", "FOO=bar"},
		"unrelated env only": {"FOO=bar"},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := unavailableFile(DefaultKind, "x.yaml", "0000:01:00.0")
			require.NoError(t, err)
			f.Spec.Devices[0].ContainerEdits.Env = env
			require.ErrorContains(t, validateSpec(f.Spec), "has no device nodes")
		})
	}
}
