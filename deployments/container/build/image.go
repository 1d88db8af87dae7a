package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations on the index's entry in index.json: containerd's import
// names the image after the first, OCI tools after the second.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

// defaultPath is what buildkit gives an image built FROM scratch.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

type platformDir struct {
	os, arch, dir string
}

type options struct {
	dockerfile, ref, version, out string
	platforms                     []platformDir
}

func run(o options) error {
	if o.ref == "" {
		return errors.New("-ref is required")
	}
	ref, err := name.NewTag(o.ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("-ref %q: want registry/repository:tag: %w", o.ref, err)
	}
	if len(o.platforms) == 0 {
		return errors.New("at least one -platform is required")
	}
	f, err := os.Open(o.dockerfile)
	if err != nil {
		return err
	}
	st, err := parseDockerfile(f, o.version)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", o.dockerfile, err)
	}
	created := buildTime()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.platforms {
		img, err := platformImage(st, p, created)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", p.os, p.arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.os, Architecture: p.arch}},
		})
	}
	tmp, err := os.MkdirTemp(filepath.Dir(o.out), ".image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	lp, err := layout.Write(filepath.Join(tmp, "layout"), empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		annotationContainerdName: ref.Name(),
		annotationRefName:        ref.TagStr(),
	})); err != nil {
		return err
	}
	part := filepath.Join(tmp, "image.tar")
	if err := tarDir(filepath.Join(tmp, "layout"), part, created); err != nil {
		return err
	}
	if err := os.Rename(part, o.out); err != nil {
		return err
	}
	d, _ := idx.Digest()
	fmt.Printf("wrote %s: %s (index %s, %d platforms)\n", o.out, ref.Name(), d, len(o.platforms))
	return nil
}

// platformImage is the final stage's files from one platform's binaries
// directory, in one layer, with the stage's metadata.
func platformImage(st *finalStage, p platformDir, created time.Time) (v1.Image, error) {
	layer, err := filesLayer(st, p.dir, created)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.os, p.arch
	cf.Created = v1.Time{Time: created}
	cf.Config.Labels = st.Labels
	cf.Config.User = st.User
	cf.Config.Entrypoint = st.Entrypoint
	cf.Config.Env = []string{defaultPath}
	return mutate.ConfigFile(img, cf)
}

// filesLayer is an uncompressed tar of the stage's files (root-owned,
// 0755) below its destination directory; go-containerregistry compresses
// it and computes digests.
func filesLayer(st *finalStage, dir string, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dest := strings.Trim(st.Dest, "/")
	var parent string
	for _, d := range strings.Split(dest, "/") {
		parent = path.Join(parent, d)
		if err := tw.WriteHeader(&tar.Header{Name: parent + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, f := range st.Files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, fmt.Errorf("binary for %s%s: %w (run make build-cross)", st.Dest, f, err)
		}
		h := &tar.Header{Name: path.Join(dest, f), Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// tarDir archives the OCI layout directory with fixed owners and times,
// so the same inputs give the same archive.
func tarDir(dir, out string, mtime time.Time) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		if d.IsDir() {
			h.Typeflag, h.Mode, h.Name = tar.TypeDir, 0o755, h.Name+"/"
			return tw.WriteHeader(h)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// buildTime honours SOURCE_DATE_EPOCH for reproducible archives; without
// it the image is dated 1970 like the e2e images, not "now".
func buildTime() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		var sec int64
		if _, err := fmt.Sscan(s, &sec); err == nil {
			return time.Unix(sec, 0).UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}
