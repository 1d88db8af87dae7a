package cli

import "context"

// cdiCommands is the dispatcher table of "dri-cdi cdi".
func cdiCommands() []*Command {
	return []*Command{
		cdiGenerateCommand(),
		cdiListCommand(),
		cdiValidateCommand(),
	}
}

func cdiCommand() *Command {
	return &Command{Name: "cdi", Summary: "Generate, list and validate CDI specs", Run: runCDI}
}

const cdiHelp = `Works with Container Device Interface (CDI) spec files: the ones
dri-cdi-agent writes for this node's cards, and every vendor's specs in the
directories a container runtime reads.`

func runCDI(ctx context.Context, env *Env, args []string) error {
	f := newFlags("dri-cdi cdi", "<command> [flags]", cdiHelp)
	f.footer = commandList(cdiCommands()) + "\nRun \"dri-cdi help cdi <command>\" for the flags of a command.\n"
	if err := f.parse(env, args, true); err != nil {
		return err
	}
	return dispatch(ctx, env, "dri-cdi cdi", f.usage(), cdiCommands(), f.Args())
}
