package cli

// commands is the dispatcher table of dri-cdi: one entry per top-level
// command, in the order "dri-cdi help" lists them. Each command lives in
// its own file (discover.go, cdi.go, version.go, ...); adding a command
// is one new file plus one line here.
func commands() []*Command {
	return []*Command{
		discoverCommand(),
		cdiCommand(),
		doctorCommand(),
		topCommand(),
		versionCommand(),
	}
}
