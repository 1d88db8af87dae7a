package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// tri is a yes/no that can also be unknown.
type tri int

const (
	unknown tri = iota
	yes
	no
)

// runtimeState is what the containerd checks found out.
type runtimeState struct {
	// cdi: can the runtime resolve our CDI names (CDI on and our dir listed)?
	cdi tri
	// nri: is NRI on and reachable by external plugins on our socket?
	nri tri
}

func (d *doctor) checkContainerd() runtimeState {
	var st runtimeState
	ver, err := parseVersion(d.opts.ContainerdVersion)
	if err != nil {
		d.add("containerd.version", Fail, err.Error(), "pass the version as `containerd --version`, `k3s ctr version` or `kubectl get nodes -o wide` (CONTAINER-RUNTIME) print it, e.g. --containerd-version 2.4.2")
	}
	path, why := d.findContainerdConfig()
	var cfg *containerdConfig
	switch {
	case path == "":
		d.add("containerd.config", Warn,
			"no containerd config found ("+strings.Join(DefaultContainerdConfigs, ", ")+"): containerd runs with its built-in defaults",
			"pass --containerd-config if containerd reads another file (see its --config flag)")
		cfg = &containerdConfig{}
	default:
		cfg, err = loadContainerdConfig(path, d.host)
		if errors.Is(err, fs.ErrNotExist) && d.opts.ContainerdConfig != "" {
			d.add("containerd.config", Warn, fmt.Sprintf("%s does not exist: containerd runs with its built-in defaults", path),
				"pass --containerd-config with the file containerd reads (see its --config flag)")
			cfg = &containerdConfig{}
			break
		}
		if err != nil {
			d.add("containerd.config", Fail, err.Error(), "fix the file; containerd refuses to start with an invalid config")
			return st
		}
		msg := fmt.Sprintf("%s (version %d", path, cfg.Version)
		if len(cfg.Imports) > 0 {
			msg += ", imports " + strings.Join(cfg.Imports, ", ")
		}
		msg += ")" + why
		d.add("containerd.config", OK, msg, "")
		d.checkK3sTemplate(path, cfg)
	}
	hasNRI := d.checkVersion(ver)
	st.cdi = d.checkCDI(cfg, ver)
	st.nri = d.checkNRI(cfg, ver)
	if !hasNRI {
		st.nri = no
	}
	return st
}

// checkCDI decides whether containerd resolves our CDI names.
func (d *doctor) checkCDI(cfg *containerdConfig, ver semver) tri {
	need := d.opts.Delivery == DeliveryCDICRI
	bad := Warn
	if need {
		bad = Fail
	}
	modernConfig := cfg.Version == 3 // only containerd >= 2.0 reads version 3
	on := unknown
	switch {
	case ver.known() && ver.atLeast(2, 4):
		on = yes
		if cfg.EnableCDI != nil {
			d.add("containerd.cdi", Warn, fmt.Sprintf("enable_cdi = %t is ignored: containerd %d.%d always has CDI on and logs the key as unknown", *cfg.EnableCDI, ver.major, ver.minor),
				"remove enable_cdi from the config")
		} else {
			d.add("containerd.cdi", OK, fmt.Sprintf("CDI is always on in containerd %d.%d", ver.major, ver.minor), "")
		}
	case ver.known() && ver.atLeast(2, 3) && cfg.EnableCDI != nil && !*cfg.EnableCDI:
		d.add("containerd.cdi", Warn, fmt.Sprintf("enable_cdi = false: containerd 2.2 deprecated the key and 2.4 ignores it; whether %d.%d still honours it is not known here", ver.major, ver.minor),
			"remove enable_cdi = false; if `containerd config dump` still lists enable_cdi = false, CDI is off: deploy with --delivery nri")
	case cfg.EnableCDI != nil && *cfg.EnableCDI:
		on = yes
		msg := "enable_cdi = true"
		if modernConfig || ver.atLeast(2, 0) {
			msg += " (containerd 2.4 and later ignore the key and keep CDI on)"
		}
		d.add("containerd.cdi", OK, msg, "")
	case cfg.EnableCDI != nil:
		on = no
		msg := "enable_cdi = false: the runtime does not inject CDI devices"
		if !ver.known() && modernConfig {
			msg += " (containerd 2.0-2.3 honour it; 2.4 and later ignore it and keep CDI on: pass --containerd-version to know)"
			on = unknown
		}
		d.add("containerd.cdi", bad, msg,
			"set enable_cdi = true under [plugins."+criSection(cfg.Version)+"], or deploy with --delivery nri (kustomize overlay nri-mode)")
	case modernConfig || (ver.known() && ver.atLeast(2, 0)):
		on = yes
		d.add("containerd.cdi", OK, "enable_cdi unset: CDI is on by default in containerd 2.x", "")
	case ver.known():
		on = no
		d.add("containerd.cdi", bad, fmt.Sprintf("enable_cdi unset: CDI is off by default in containerd %d.%d", ver.major, ver.minor),
			"set enable_cdi = true under [plugins."+criSection(cfg.Version)+"], or deploy with --delivery nri (kustomize overlay nri-mode)")
	default:
		d.add("containerd.cdi", Warn, "enable_cdi unset"+cfg.describe()+": containerd 1.7 then has CDI off, containerd 2.x has it on",
			"set enable_cdi = true under [plugins."+criSection(cfg.Version)+"], or pass --containerd-version to know")
	}

	dirs, source := cfg.CDISpecDirs, "cdi_spec_dirs"
	if dirs == nil {
		dirs, source = defaultCDISpecDirs, "default cdi_spec_dirs"
	}
	listed := slices.ContainsFunc(dirs, func(dir string) bool { return samePath(dir, d.opts.CDIDir) })
	if listed {
		d.add("containerd.cdi_spec_dirs", OK, fmt.Sprintf("%s %v include %s", source, dirs, d.opts.CDIDir), "")
	} else {
		d.add("containerd.cdi_spec_dirs", bad,
			fmt.Sprintf("%s %v do not include %s: the runtime cannot resolve our CDI names, and a container given one fails with \"unresolvable CDI devices\"", source, dirs, d.opts.CDIDir),
			fmt.Sprintf("add %q to cdi_spec_dirs under [plugins.%s] and restart containerd, or deploy with --delivery nri (kustomize overlay nri-mode)", d.opts.CDIDir, criSection(cfg.Version)))
		return no
	}
	return on
}

// describe names the config for messages about unset keys.
func (cfg *containerdConfig) describe() string {
	if cfg.Path == "" {
		return " (no config file)"
	}
	return fmt.Sprintf(" (version %d config)", cfg.Version)
}

func criSection(version int) string {
	switch version {
	case 3:
		return "'" + pluginCRIv3 + "'"
	case 1:
		return pluginCRIv1
	}
	return "\"" + pluginCRIv2 + "\""
}

// checkNRI decides whether an external NRI plugin can connect on our socket.
func (d *doctor) checkNRI(cfg *containerdConfig, ver semver) tri {
	need := d.opts.Delivery != DeliveryDeviceSpecs
	bad := Warn
	if need {
		bad = Fail
	}
	const enableFix = "set disable = false under [plugins.\"io.containerd.nri.v1.nri\"] and restart containerd, or deploy with --delivery device-specs (kustomize overlay device-specs)"
	on := unknown
	switch {
	case cfg.NRIDisable != nil && *cfg.NRIDisable:
		d.add("containerd.nri", bad, "NRI is disabled (disable = true)", enableFix)
		return no
	case cfg.NRIDisable != nil:
		on = yes
		d.add("containerd.nri", OK, "NRI is enabled (disable = false)", "")
	case cfg.Version == 3 || (ver.known() && ver.atLeast(2, 0)):
		on = yes
		d.add("containerd.nri", OK, "NRI is on by default in containerd 2.x", "")
	case ver.known():
		d.add("containerd.nri", bad, fmt.Sprintf("NRI is off by default in containerd %d.%d", ver.major, ver.minor), enableFix)
		return no
	default:
		d.add("containerd.nri", Warn, "NRI not configured"+cfg.describe()+": containerd 1.7 then has NRI off, containerd 2.x has it on", enableFix)
	}
	if cfg.NRIDisableConnections != nil && *cfg.NRIDisableConnections {
		d.add("containerd.nri.connections", bad, "disable_connections = true: only pre-installed plugins run, dri-cdi-nri cannot connect",
			"set disable_connections = false under [plugins.\"io.containerd.nri.v1.nri\"], or install dri-cdi-nri as /opt/nri/plugins/10-dri-cdi")
		return no
	}
	if cfg.NRISocketPath != "" && !samePath(cfg.NRISocketPath, d.opts.NRISocket) {
		d.add("containerd.nri.socket", bad, fmt.Sprintf("containerd serves NRI on %s, not %s", cfg.NRISocketPath, d.opts.NRISocket),
			fmt.Sprintf("run dri-cdi-nri with --nri-socket %s (Helm: paths.nriSocket)", cfg.NRISocketPath))
		return no
	}
	switch err := isSocket(d.opts.NRISocket, d.host(d.opts.NRISocket)); {
	case err == nil:
		d.add("containerd.nri.socket", OK, d.opts.NRISocket+" is a socket", "")
		if on == unknown {
			on = yes
		}
	default:
		d.add("containerd.nri.socket", bad, err.Error(), "start containerd with NRI enabled; it creates the socket")
		return no
	}
	return on
}

// samePath compares two host paths, treating /var/run as /run.
func samePath(a, b string) bool {
	norm := func(p string) string {
		p = filepath.Clean(p)
		if p == "/var/run" || strings.HasPrefix(p, "/var/run/") {
			p = strings.TrimPrefix(p, "/var")
		}
		return p
	}
	return norm(a) == norm(b)
}

// isSocket returns nil when actual (the host path named path) is a unix
// socket, else an error that says what is there instead.
func isSocket(path, actual string) error {
	fi, err := os.Stat(actual)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s does not exist", path)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s is not a socket (%s)", path, fi.Mode().Type())
	}
	return nil
}
