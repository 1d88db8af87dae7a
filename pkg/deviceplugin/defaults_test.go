package deviceplugin

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// DefaultKubeletDir must stay the kubelet's own directory.
func TestDefaultKubeletDirIsTheKubelets(t *testing.T) {
	require.Equal(t, filepath.Clean(pluginapi.DevicePluginPath), DefaultKubeletDir)
}
