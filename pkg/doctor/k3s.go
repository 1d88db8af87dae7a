package doctor

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// K3s templates: k3s rewrites its containerd config.toml on every start
// from a built-in template, or from one of these files next to it. k3s
// releases that embed containerd 2.x render config-v3.toml.tmpl (config
// version 3); when only config.toml.tmpl exists they render that, with
// the version 2 schema. k3s releases with containerd 1.7 know only
// config.toml.tmpl.
const (
	K3sTemplateV3 = "config-v3.toml.tmpl"
	K3sTemplateV2 = "config.toml.tmpl"
)

// K3sContainerd2Releases are the first k3s releases of each line that
// embed containerd 2.x (the February 2025 releases); every later line
// does too. Older k3s embeds containerd 1.7, whose defaults have NRI and
// CDI off.
var K3sContainerd2Releases = []string{"v1.31.6+k3s1", "v1.32.2+k3s1"}

// K3sContainerdSocket is where the containerd that k3s (and RKE2) runs
// serves its API while k3s runs.
const K3sContainerdSocket = "/run/k3s/containerd/containerd.sock"

// k3sDropInDirs are the drop-in directories that k3s's generated config
// imports (`imports = [".../config-v3.toml.d/*.toml"]`) in the k3s
// releases that have them, by config version.
var k3sDropInDirs = map[int]string{3: "config-v3.toml.d", 2: "config.toml.d"}

// findContainerdConfig picks the containerd config to read: the one
// --containerd-config names; else, when k3s's containerd answers on
// K3sContainerdSocket, the config k3s (or RKE2) generated for it, since a
// leftover /etc/containerd/config.toml of another containerd install is
// not what that containerd reads; else the first of
// DefaultContainerdConfigs that exists. why says, for the report, why a
// default was chosen ("" for the flag or when nothing was found).
func (d *doctor) findContainerdConfig() (path, why string) {
	if d.opts.ContainerdConfig != "" {
		return d.opts.ContainerdConfig, ""
	}
	var found []string
	for _, p := range DefaultContainerdConfigs {
		if _, err := os.Stat(d.host(p)); err == nil {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		return "", ""
	}
	others := func(chosen string) string {
		var o []string
		for _, p := range found {
			if p != chosen {
				o = append(o, p)
			}
		}
		if len(o) == 0 {
			return ""
		}
		return "; not read: " + strings.Join(o, ", ")
	}
	if d.k3sRunning() {
		for _, p := range found {
			if strings.Contains(p, "/rancher/") {
				return p, fmt.Sprintf("; read because k3s's containerd answers on %s%s", K3sContainerdSocket, others(p))
			}
		}
	}
	if len(found) > 1 {
		return found[0], fmt.Sprintf("; read because it comes first and %s does not answer%s (pass --containerd-config to choose)", K3sContainerdSocket, others(found[0]))
	}
	return found[0], ""
}

// k3sRunning reports whether a containerd answers on K3sContainerdSocket:
// a connection, not just the file, since a stopped k3s can leave it.
func (d *doctor) k3sRunning() bool {
	c, err := net.DialTimeout("unix", d.host(K3sContainerdSocket), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// k3sFloor names K3sContainerd2Releases for messages.
func k3sFloor() string { return strings.Join(K3sContainerd2Releases, " / ") }

// k3sTemplateFor is the template k3s renders a config of this version
// from.
func k3sTemplateFor(version int) string {
	if version == 3 {
		return K3sTemplateV3
	}
	return K3sTemplateV2
}

// checkK3sTemplate reports the template a k3s or RKE2 config is rendered
// from, chosen by the generated config's version: k3s rewrites
// config.toml on every start, so changes go into the template. For k3s it
// also says whether this release embeds containerd 2.x.
func (d *doctor) checkK3sTemplate(path string, cfg *containerdConfig) {
	if !strings.Contains(path, "/rancher/") {
		return
	}
	version := cfg.Version
	dir := filepath.Dir(path)
	if dropIn, ok := k3sDropIns(dir, version, cfg.ImportPatterns); ok {
		d.add("containerd.template", OK, fmt.Sprintf("%s (version %d) is generated on every start and imports %s/*.toml: put additions there (e.g. %s/50-dri-cdi.toml) rather than in a template",
			path, version, dropIn, dropIn), "")
	} else {
		d.checkK3sTemplateFile(path, dir, version)
	}
	d.checkK3sRelease(path, version)
}

// k3sDropIns returns the drop-in directory that a generated config of
// this version imports, if it does.
func k3sDropIns(dir string, version int, patterns []string) (string, bool) {
	want := filepath.Join(dir, k3sDropInDirs[version])
	if version != 2 && version != 3 {
		return "", false
	}
	for _, p := range patterns {
		if filepath.Dir(p) == want {
			return want, true
		}
	}
	return "", false
}

// checkK3sTemplateFile reports the template a generated config without
// drop-ins is rendered from.
func (d *doctor) checkK3sTemplateFile(path, dir string, version int) {
	exists := func(name string) bool {
		_, err := os.Stat(d.host(filepath.Join(dir, name)))
		return err == nil
	}
	want := filepath.Join(dir, k3sTemplateFor(version))
	other := filepath.Join(dir, K3sTemplateV3)
	if version == 3 {
		other = filepath.Join(dir, K3sTemplateV2)
	}
	switch {
	case exists(filepath.Base(want)):
		d.add("containerd.template", OK, fmt.Sprintf("%s (version %d) is rendered from %s: edit the template, not the generated file", path, version, want), "")
	case exists(filepath.Base(other)) && version == 3:
		d.add("containerd.template", Warn, fmt.Sprintf("%s exists, but %s is version 3, so k3s did not render it from that file", other, path),
			fmt.Sprintf("k3s with containerd 2.x reads %s first; move your changes there in the version 3 schema and restart k3s", want))
	case exists(filepath.Base(other)):
		d.add("containerd.template", Warn, fmt.Sprintf("%s exists, but %s is version %d: this k3s embeds containerd 1.7 (older than %s) and reads only %s", other, path, version, k3sFloor(), want),
			fmt.Sprintf("put your changes into %s in the version 2 schema, or upgrade k3s to %s or later", want, k3sFloor()))
	default:
		d.add("containerd.template", OK, fmt.Sprintf("%s (version %d) is generated on every start; to change it create %s starting with {{ template \"base\" . }}",
			path, version, want), "")
	}
}

// checkK3sRelease says from the config version whether this k3s embeds
// containerd 2.x.
func (d *doctor) checkK3sRelease(path string, version int) {
	if !strings.Contains(path, "/rancher/k3s/") {
		return
	}
	if version == 3 {
		d.add("k3s", OK, fmt.Sprintf("version 3 config: this k3s embeds containerd 2.x (k3s %s and later), with NRI and CDI on by default", k3sFloor()), "")
		return
	}
	d.add("k3s", Warn, fmt.Sprintf("version %d config: k3s older than %s embeds containerd 1.7, with NRI and CDI off by default (a k3s with containerd 2.x writes version 2 only from a legacy %s)", version, k3sFloor(), K3sTemplateV2),
		fmt.Sprintf("upgrade k3s to %s or later; or enable CDI and NRI in %s (docs/k3s.md); or deploy the nri-mode or device-specs overlay that doctor recommends", k3sFloor(), filepath.Join(filepath.Dir(path), k3sTemplateFor(version))))
}
