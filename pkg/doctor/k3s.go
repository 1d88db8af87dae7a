package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
func (d *doctor) checkK3sTemplate(path string, version int) {
	if !strings.Contains(path, "/rancher/") {
		return
	}
	dir := filepath.Dir(path)
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
	if !strings.Contains(path, "/rancher/k3s/") {
		return
	}
	if version == 3 {
		d.add("k3s", OK, fmt.Sprintf("version 3 config: this k3s embeds containerd 2.x (k3s %s and later), with NRI and CDI on by default", k3sFloor()), "")
		return
	}
	d.add("k3s", Warn, fmt.Sprintf("version %d config: k3s older than %s embeds containerd 1.7, with NRI and CDI off by default (a k3s with containerd 2.x writes version 2 only from a legacy %s)", version, k3sFloor(), K3sTemplateV2),
		fmt.Sprintf("upgrade k3s to %s or later; or enable CDI and NRI in %s (docs/k3s.md); or deploy the nri-mode or device-specs overlay that doctor recommends", k3sFloor(), want))
}
