package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func TestParseRepositoryDockerfile(t *testing.T) {
	f, err := os.Open("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := parseDockerfile(f, "v9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(st.Files, ","); got != "dri-cdi,dri-cdi-agent,dri-cdi-dra,dri-cdi-nri" || st.Dest != "/usr/bin/" {
		t.Errorf("files %s into %s", got, st.Dest)
	}
	if st.Labels["org.opencontainers.image.version"] != "v9.9.9" || st.Labels["org.opencontainers.image.title"] != "dri-cdi" {
		t.Errorf("labels %v", st.Labels)
	}
	if st.User != "0:0" || strings.Join(st.Entrypoint, " ") != "/usr/bin/dri-cdi-agent" {
		t.Errorf("user %q entrypoint %q", st.User, st.Entrypoint)
	}
}

func TestParseRefusesUnknownInstructions(t *testing.T) {
	for name, df := range map[string]string{
		"env":        "FROM scratch\nENV A=b\nCOPY --from=b /x /usr/bin/\nENTRYPOINT [\"/x\"]\n",
		"base":       "FROM debian\nCOPY --from=b /x /usr/bin/\nENTRYPOINT [\"/x\"]\n",
		"shell form": "FROM scratch\nCOPY --from=b /x /usr/bin/\nENTRYPOINT /x\n",
		"no files":   "FROM scratch\nENTRYPOINT [\"/x\"]\n",
	} {
		if _, err := parseDockerfile(strings.NewReader(df), "v1"); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestRunWritesMultiPlatformArchive(t *testing.T) {
	tmp := t.TempDir()
	var plats []platformDir
	for _, arch := range []string{"amd64", "arm64"} {
		dir := filepath.Join(tmp, arch)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, b := range []string{"dri-cdi", "dri-cdi-agent", "dri-cdi-dra", "dri-cdi-nri"} {
			if err := os.WriteFile(filepath.Join(dir, b), []byte(arch+" "+b), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		plats = append(plats, platformDir{os: "linux", arch: arch, dir: dir})
	}
	out := filepath.Join(tmp, "image.tar")
	if err := run(options{dockerfile: "../Dockerfile", ref: "ghcr.io/dri-cdi/dri-cdi:v0.1.0", version: "v0.1.0", out: out, platforms: plats}); err != nil {
		t.Fatal(err)
	}
	// Unpack the archive and read it back as an OCI layout.
	lay := filepath.Join(tmp, "layout")
	untar(t, out, lay)
	lp, err := layout.FromPath(lay)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations[annotationContainerdName] != "ghcr.io/dri-cdi/dri-cdi:v0.1.0" || im.Manifests[0].Annotations[annotationRefName] != "v0.1.0" {
		t.Fatalf("index.json %+v", im.Manifests)
	}
	idx, err := top.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(inner.Manifests) != 2 {
		t.Fatalf("want 2 platforms, have %d", len(inner.Manifests))
	}
	for _, d := range inner.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != d.Platform.Architecture || cf.OS != "linux" || cf.Config.Labels["org.opencontainers.image.version"] != "v0.1.0" ||
			strings.Join(cf.Config.Entrypoint, " ") != "/usr/bin/dri-cdi-agent" || cf.Config.User != "0:0" {
			t.Errorf("%s: config %+v", d.Platform.Architecture, cf.Config)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("layers %v %v", layers, err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]string{}
		eachTarEntry(t, rc, func(h *tar.Header, data []byte) {
			if h.Typeflag == tar.TypeReg {
				if h.Mode != 0o755 || h.Uid != 0 {
					t.Errorf("%s: mode %o uid %d", h.Name, h.Mode, h.Uid)
				}
				files[h.Name] = string(data)
			}
		})
		rc.Close()
		if files["usr/bin/dri-cdi-agent"] != d.Platform.Architecture+" dri-cdi-agent" || len(files) != 4 {
			t.Errorf("%s: files %v", d.Platform.Architecture, files)
		}
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	eachTarEntry(t, f, func(h *tar.Header, data []byte) {
		p := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

// eachTarEntry calls fn with the header and the content of every entry
// of the tar stream r, in order.
func eachTarEntry(t *testing.T, r io.Reader, fn func(h *tar.Header, data []byte)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		fn(h, data)
	}
}
