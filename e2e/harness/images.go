package harness

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Image references of the locally built images. Pods must use
// imagePullPolicy: Never; there is no registry.
const (
	PauseImage   = "localhost/dri-cdi-e2e/pause:1"
	BusyboxImage = "localhost/dri-cdi-e2e/busybox:1"
	// busyboxBinary is Debian busybox-static's binary.
	busyboxBinary = "/bin/busybox"
)

// image is one OCI image-layout tarball to import.
type image struct {
	Ref  string
	Path string
}

// layerEntry is one file, directory or symlink of an image layer.
type layerEntry struct {
	name     string // relative path, no leading slash
	mode     int64
	typ      byte
	linkname string
	data     []byte
}

var epoch = time.Unix(0, 0).UTC()

func buildLayer(entries []layerEntry) ([]byte, error) {
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: e.typ, Linkname: e.linkname, ModTime: epoch, Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if e.typ == tar.TypeDir {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeOCIArchive writes an OCI image-layout tar with one single-layer
// image named ref.
func writeOCIArchive(out, ref string, layer []byte, entrypoint, cmd []string) error {
	layerDigest := digestOf(layer)
	cfg := map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": entrypoint,
			"Cmd":        cmd,
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digestOf(cfgJSON), "size": len(cfgJSON)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layerDigest, "size": len(layer)}},
	}
	manJSON, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	tag := ref[strings.LastIndexByte(ref, ':')+1:]
	index := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json",
			"digest":    digestOf(manJSON),
			"size":      len(manJSON),
			"platform":  map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			"annotations": map[string]string{
				"io.containerd.image.name":          ref,
				"org.opencontainers.image.ref.name": tag,
			},
		}},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	blob := func(b []byte) layerEntry {
		return layerEntry{name: "blobs/sha256/" + strings.TrimPrefix(digestOf(b), "sha256:"), mode: 0o644, typ: tar.TypeReg, data: b}
	}
	archive, err := buildLayer([]layerEntry{
		{name: "blobs", mode: 0o755, typ: tar.TypeDir},
		{name: "blobs/sha256", mode: 0o755, typ: tar.TypeDir},
		blob(layer), blob(cfgJSON), blob(manJSON),
		{name: "oci-layout", mode: 0o644, typ: tar.TypeReg, data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{name: "index.json", mode: 0o644, typ: tar.TypeReg, data: indexJSON},
	})
	if err != nil {
		return err
	}
	return os.WriteFile(out, archive, 0o644)
}

func baseDirs() []layerEntry {
	var es []layerEntry
	for _, d := range []string{"bin", "dev", "etc", "proc", "sys", "sbin", "usr", "usr/bin", "usr/sbin", "var", "root"} {
		es = append(es, layerEntry{name: d, mode: 0o755, typ: tar.TypeDir})
	}
	es = append(es,
		layerEntry{name: "tmp", mode: 0o1777, typ: tar.TypeDir},
		layerEntry{name: "etc/passwd", mode: 0o644, typ: tar.TypeReg, data: []byte("root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/tmp:/bin/sh\n")},
		layerEntry{name: "etc/group", mode: 0o644, typ: tar.TypeReg, data: []byte("root:x:0:\nuser:x:1000:\n")},
	)
	return es
}

// buildBusybox makes the busybox image from the host's static busybox:
// the binary plus one symlink per applet, never replacing the binary.
func buildBusybox(out string) error {
	bin, err := os.ReadFile(busyboxBinary)
	if err != nil {
		return fmt.Errorf("busybox image: %w (install busybox-static)", err)
	}
	list, err := exec.Command(busyboxBinary, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("busybox image: %s --list-full: %w", busyboxBinary, err)
	}
	entries := baseDirs()
	entries = append(entries, layerEntry{name: "bin/busybox", mode: 0o755, typ: tar.TypeReg, data: bin})
	have := map[string]bool{"bin/busybox": true}
	for _, e := range entries {
		have[e.name] = true
	}
	for _, applet := range strings.Fields(string(list)) {
		applet = strings.TrimPrefix(path.Clean("/"+applet), "/")
		if have[applet] || !strings.Contains(applet, "/") {
			continue
		}
		if dir := path.Dir(applet); !have[dir] {
			entries = append(entries, layerEntry{name: dir, mode: 0o755, typ: tar.TypeDir})
			have[dir] = true
		}
		entries = append(entries, layerEntry{name: applet, mode: 0o777, typ: tar.TypeSymlink, linkname: "/bin/busybox"})
		have[applet] = true
	}
	if !have["bin/sh"] {
		return errors.New("busybox image: busybox has no sh applet")
	}
	layer, err := buildLayer(entries)
	if err != nil {
		return fmt.Errorf("busybox image: %w", err)
	}
	return writeOCIArchive(out, BusyboxImage, layer, nil, []string{"/bin/sh"})
}

// buildPause makes the sandbox image from the static program in
// e2e/images/pause.
func buildPause(out, pauseBinary string) error {
	bin, err := os.ReadFile(pauseBinary)
	if err != nil {
		return fmt.Errorf("pause image: %w", err)
	}
	entries := append(baseDirs(), layerEntry{name: "pause", mode: 0o755, typ: tar.TypeReg, data: bin})
	layer, err := buildLayer(entries)
	if err != nil {
		return fmt.Errorf("pause image: %w", err)
	}
	return writeOCIArchive(out, PauseImage, layer, []string{"/pause"}, nil)
}

// goBuild builds a main package of the e2e module into out.
func goBuild(e2eRoot, pkg, out string, cgo bool) error {
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = e2eRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if cgo {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// buildImages writes the pause and busybox archives into dir.
func buildImages(e2eRoot, dir string) ([]image, error) {
	pauseBin := filepath.Join(dir, "pause")
	if err := goBuild(e2eRoot, "./images/pause", pauseBin, false); err != nil {
		return nil, err
	}
	pause := image{Ref: PauseImage, Path: filepath.Join(dir, "pause.tar")}
	if err := buildPause(pause.Path, pauseBin); err != nil {
		return nil, err
	}
	busybox := image{Ref: BusyboxImage, Path: filepath.Join(dir, "busybox.tar")}
	if err := buildBusybox(busybox.Path); err != nil {
		return nil, err
	}
	return []image{pause, busybox}, nil
}
