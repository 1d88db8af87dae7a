package harness

// NRIPid returns the process ID of the running dri-cdi-nri, or 0 when it
// is not running; benchmarks read its memory use from /proc.
func (n *Node) NRIPid() int {
	if n.nri == nil || !n.nri.Running() {
		return 0
	}
	return n.nri.Pid()
}
