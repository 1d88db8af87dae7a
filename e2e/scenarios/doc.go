// Package scenarios holds the real-node end-to-end scenarios of dri-cdi.
// Each test starts its own node through the harness and proves one
// behaviour of the runtime path kubelet -> CRI -> containerd (CDI, NRI) ->
// runc -> device cgroup. The tests need root and the tools that
// `make e2e-tools` builds; without them they fail rather than skip, so a
// run can never report a scenario as passed that did not run.
package scenarios
