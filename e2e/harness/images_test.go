package harness

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = data
	}
}

func TestWriteOCIArchive(t *testing.T) {
	dir := t.TempDir()
	layer, err := buildLayer([]layerEntry{{name: "pause", mode: 0o755, typ: tar.TypeReg, data: []byte("bin")}})
	require.NoError(t, err)
	out := filepath.Join(dir, "img.tar")
	require.NoError(t, writeOCIArchive(out, "localhost/x/pause:1", layer, []string{"/pause"}, nil))

	files := readTar(t, out)
	require.JSONEq(t, `{"imageLayoutVersion":"1.0.0"}`, string(files["oci-layout"]))
	var index struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	require.NoError(t, json.Unmarshal(files["index.json"], &index))
	require.Len(t, index.Manifests, 1)
	require.Equal(t, "localhost/x/pause:1", index.Manifests[0].Annotations["io.containerd.image.name"])
	blob := func(d string) []byte {
		b, ok := files["blobs/sha256/"+d[len("sha256:"):]]
		require.True(t, ok, "blob %s missing", d)
		require.Equal(t, d, digestOf(b), "blob content must match its digest")
		return b
	}
	var manifest struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	require.NoError(t, json.Unmarshal(blob(index.Manifests[0].Digest), &manifest))
	var cfg struct {
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	require.NoError(t, json.Unmarshal(blob(manifest.Config.Digest), &cfg))
	require.Len(t, manifest.Layers, 1)
	require.Equal(t, []string{manifest.Layers[0].Digest}, cfg.RootFS.DiffIDs)
	require.Equal(t, layer, blob(manifest.Layers[0].Digest))

	// Same input, same bytes: the image digest is stable across runs.
	again := filepath.Join(dir, "again.tar")
	require.NoError(t, writeOCIArchive(again, "localhost/x/pause:1", layer, []string{"/pause"}, nil))
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	require.Equal(t, a, b)
}

func TestBuildBusybox(t *testing.T) {
	if _, err := os.Stat(busyboxBinary); err != nil {
		t.Skip("busybox-static is not installed")
	}
	out := filepath.Join(t.TempDir(), "busybox.tar")
	require.NoError(t, buildBusybox(out))
	files := readTar(t, out)
	var index struct {
		Manifests []struct{ Digest string } `json:"manifests"`
	}
	require.NoError(t, json.Unmarshal(files["index.json"], &index))
	var manifest struct {
		Layers []struct{ Digest string } `json:"layers"`
	}
	require.NoError(t, json.Unmarshal(files["blobs/sha256/"+index.Manifests[0].Digest[7:]], &manifest))
	layerPath := filepath.Join(t.TempDir(), "layer.tar")
	require.NoError(t, os.WriteFile(layerPath, files["blobs/sha256/"+manifest.Layers[0].Digest[7:]], 0o644))
	f, err := os.Open(layerPath)
	require.NoError(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	entries := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		entries[h.Name] = h
	}
	require.Equal(t, byte(tar.TypeReg), entries["bin/busybox"].Typeflag, "the binary must stay a file")
	require.Positive(t, entries["bin/busybox"].Size)
	require.Equal(t, byte(tar.TypeSymlink), entries["bin/sh"].Typeflag)
	require.Equal(t, "/bin/busybox", entries["bin/sh"].Linkname)
}
