package cli

import (
	"context"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/doctor"
)

func doctorCommand() *Command {
	return &Command{Name: "doctor", Summary: "Check this node's runtime, kubelet and GPUs for dri-cdi", Run: runDoctor}
}

const doctorHelp = `Checks this node the way an operator would, reading only: the containerd
config (CDI on, the CDI spec dir in cdi_spec_dirs, NRI on and reachable),
the kubelet's device plugin and PodResources sockets, the cgroup version,
the DRM cards and their device nodes, and dri-cdi's CDI specs (valid, and
matching the cards). Each check prints OK, WARN or FAIL, with the fix for
every WARN and FAIL, and the delivery mode this node supports.

Exits 1 when a check fails. Run it on the host as root, or in a debug pod
with the host's filesystem mounted and -host-root pointing at it; every
path, and every symlink on it, is then resolved inside that directory as
the host's kernel would (/var/run -> /run stays in the host root):

  kubectl debug node/<node> -it --profile=sysadmin \
    --image=ghcr.io/dri-cdi/dri-cdi:<tag> -- /usr/bin/dri-cdi doctor --host-root /host`

func runDoctor(ctx context.Context, env *Env, args []string) error {
	f := newFlags("dri-cdi doctor", "[flags]", doctorHelp)
	opts := doctor.DefaultOptions()
	doctor.RegisterFlags(f.FlagSet, &opts)
	cfgPath := f.String("config", "", "dri-cdi config file on the host (inside -host-root); its cdiKind replaces -cdi-kind")
	output := f.output("text", "json")
	f.finish()
	if err := f.parse(env, args, false); err != nil {
		return err
	}
	if err := oneOf(f, "delivery", opts.Delivery, doctor.DeliveryCDICRI, doctor.DeliveryNRI, doctor.DeliveryDeviceSpecs); err != nil {
		return err
	}
	if *cfgPath != "" {
		path, err := doctor.HostPath(opts.Root, *cfgPath)
		if err != nil {
			return err
		}
		cfg, err := config.Load(path)
		if err != nil {
			return err
		}
		opts.CDIKind = cfg.Kind()
	}
	rep, err := doctor.Check(ctx, opts)
	if err != nil {
		return err
	}
	if err := rep.Write(env.Stdout, *output); err != nil {
		return err
	}
	if rep.Failed {
		return doctor.ErrChecksFailed
	}
	return nil
}
