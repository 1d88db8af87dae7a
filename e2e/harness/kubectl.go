package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Kubectl runs kubectl as the cluster admin and returns its standard
// output; standard error goes into the error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	return c.KubectlStdin(ctx, "", args...)
}

// KubectlStdin is Kubectl with stdin, for `apply -f -`.
func (c *Cluster) KubectlStdin(ctx context.Context, stdin string, args ...string) (string, error) {
	return c.run(ctx, stdin, c.Tools.Kubectl, append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
}

// Helm runs helm as the cluster admin.
func (c *Cluster) Helm(ctx context.Context, args ...string) (string, error) {
	return c.run(ctx, "", c.Tools.Helm, append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
}

// Kustomize runs `kustomize build dir` and returns the manifests.
func (c *Cluster) Kustomize(ctx context.Context, dir string) (string, error) {
	return c.run(ctx, "", c.Tools.Kustomize, "build", dir)
}

func (c *Cluster) run(ctx context.Context, stdin, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	// helm keeps caches and config under $HOME; give it the cluster's dir.
	cmd.Env = append(os.Environ(), "HOME="+c.Dir, "KUBECONFIG="+c.Kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		name := bin[strings.LastIndexByte(bin, '/')+1:]
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// GetJSON runs `kubectl get <args> -o json` and decodes it into v.
func (c *Cluster) GetJSON(ctx context.Context, v any, args ...string) error {
	out, err := c.Kubectl(ctx, append(append([]string{"get"}, args...), "-o", "json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("kubectl get %s: decode: %w", strings.Join(args, " "), err)
	}
	return nil
}

// NodeStatus is the part of the Node object the scenarios check.
type NodeStatus struct {
	Allocatable map[string]string `json:"allocatable"`
	Capacity    map[string]string `json:"capacity"`
	Conditions  []struct {
		Type   string `json:"type"`
		Status string `json:"status"`
		Reason string `json:"reason"`
	} `json:"conditions"`
}

// NodeStatus reads the status of the single node.
func (c *Cluster) NodeStatus(ctx context.Context) (*NodeStatus, error) {
	return c.NodeStatusOf(ctx, NodeName)
}

// NodeStatusOf reads the status of node name.
func (c *Cluster) NodeStatusOf(ctx context.Context, name string) (*NodeStatus, error) {
	var n struct {
		Status NodeStatus `json:"status"`
	}
	if err := c.GetJSON(ctx, &n, "node", name); err != nil {
		return nil, err
	}
	return &n.Status, nil
}

// Ready reports the node's Ready condition.
func (s *NodeStatus) Ready() bool {
	for _, c := range s.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// WaitNodeReady waits until the single node reports Ready.
func (c *Cluster) WaitNodeReady(ctx context.Context, timeout time.Duration) error {
	return c.WaitNodeReadyNamed(ctx, NodeName, timeout)
}

// WaitNodeReadyNamed waits until node name reports Ready.
func (c *Cluster) WaitNodeReadyNamed(ctx context.Context, name string, timeout time.Duration) error {
	return c.WaitNodeReadiness(ctx, name, true, timeout)
}

// WaitNodeReadiness waits until node name's Ready condition is ready
// (true: Ready; false: anything else, NotReady or Unknown).
func (c *Cluster) WaitNodeReadiness(ctx context.Context, name string, ready bool, timeout time.Duration) error {
	var last *NodeStatus
	err := poll(ctx, timeout, func() (bool, error) {
		s, err := c.NodeStatusOf(ctx, name)
		if err != nil {
			return false, nil
		}
		last = s
		return s.Ready() == ready, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: want Ready %t (conditions %+v): %w", name, ready, last, err)
	}
	return nil
}

// Allocatable is the single node's allocatable count of resource (0 when
// the node does not list it).
func (c *Cluster) Allocatable(ctx context.Context, resource string) (int64, error) {
	return c.AllocatableOf(ctx, NodeName, resource)
}

// AllocatableOf is node name's allocatable count of resource.
func (c *Cluster) AllocatableOf(ctx context.Context, name, resource string) (int64, error) {
	s, err := c.NodeStatusOf(ctx, name)
	if err != nil {
		return 0, err
	}
	v, ok := s.Allocatable[resource]
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

// WaitAllocatable waits until the single node's allocatable resource is
// want.
func (c *Cluster) WaitAllocatable(ctx context.Context, resource string, want int64, timeout time.Duration) error {
	return c.WaitAllocatableOf(ctx, NodeName, resource, want, timeout)
}

// WaitAllocatableOf waits until node name's allocatable resource is want.
func (c *Cluster) WaitAllocatableOf(ctx context.Context, name, resource string, want int64, timeout time.Duration) error {
	var have int64 = -1
	err := poll(ctx, timeout, func() (bool, error) {
		v, err := c.AllocatableOf(ctx, name, resource)
		if err != nil {
			return false, nil
		}
		have = v
		return v == want, nil
	})
	if err != nil {
		return fmt.Errorf("node %s allocatable %s: want %d, have %d: %w", name, resource, want, have, err)
	}
	return nil
}

// DaemonSetStatus is the part of a DaemonSet the scenarios check.
type DaemonSetStatus struct {
	Generation int64 `json:"-"`
	Status     struct {
		ObservedGeneration     int64 `json:"observedGeneration"`
		DesiredNumberScheduled int   `json:"desiredNumberScheduled"`
		CurrentNumberScheduled int   `json:"currentNumberScheduled"`
		UpdatedNumberScheduled int   `json:"updatedNumberScheduled"`
		NumberReady            int   `json:"numberReady"`
		NumberAvailable        int   `json:"numberAvailable"`
	} `json:"status"`
}

// WaitDaemonSetReady waits until the DaemonSet's current generation runs
// on every node it wants, all pods Ready through their probes.
func (c *Cluster) WaitDaemonSetReady(ctx context.Context, ns, name string, timeout time.Duration) error {
	var last string
	err := poll(ctx, timeout, func() (bool, error) {
		var ds struct {
			Metadata struct {
				Generation int64 `json:"generation"`
			} `json:"metadata"`
			DaemonSetStatus
		}
		if err := c.GetJSON(ctx, &ds, "daemonset", name, "-n", ns); err != nil {
			last = err.Error()
			return false, nil
		}
		st := ds.Status
		last = fmt.Sprintf("%+v (generation %d)", st, ds.Metadata.Generation)
		return st.ObservedGeneration == ds.Metadata.Generation && st.DesiredNumberScheduled > 0 &&
			st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberReady == st.DesiredNumberScheduled &&
			st.NumberAvailable == st.DesiredNumberScheduled, nil
	})
	if err != nil {
		pods, _ := c.Kubectl(ctx, "get", "pods", "-n", ns, "-o", "wide")
		return fmt.Errorf("daemonset %s/%s not ready: %s: %w\n%s", ns, name, last, err, pods)
	}
	return nil
}

// Pod is the part of a Pod the scenarios check.
type Pod struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
	} `json:"metadata"`
	Spec struct {
		NodeName   string `json:"nodeName"`
		Containers []struct {
			Name  string `json:"name"`
			Image string `json:"image"`
		} `json:"containers"`
	} `json:"spec"`
	Status struct {
		Phase      string `json:"phase"`
		PodIP      string `json:"podIP"`
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"conditions"`
		ContainerStatuses []struct {
			Name         string `json:"name"`
			ContainerID  string `json:"containerID"`
			Ready        bool   `json:"ready"`
			RestartCount int    `json:"restartCount"`
			Image        string `json:"image"`
			State        map[string]struct {
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"state"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

// Condition returns the pod condition of type typ.
func (p *Pod) Condition(typ string) (status, reason, message string) {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status, c.Reason, c.Message
		}
	}
	return "", "", ""
}

// ContainerID is the CRI id of the pod's container name ("" when none).
func (p *Pod) ContainerID(name string) string {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name {
			_, id, _ := strings.Cut(s.ContainerID, "://")
			return id
		}
	}
	return ""
}

// Pods lists the pods matching a label selector in ns.
func (c *Cluster) Pods(ctx context.Context, ns, selector string) ([]Pod, error) {
	var list struct {
		Items []Pod `json:"items"`
	}
	args := []string{"pods", "-n", ns}
	if selector != "" {
		args = append(args, "-l", selector)
	}
	if err := c.GetJSON(ctx, &list, args...); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// WaitPods waits until exactly one pod matches selector and cond holds
// for it, and returns it.
func (c *Cluster) WaitPod(ctx context.Context, ns, selector string, timeout time.Duration, cond func(*Pod) bool) (*Pod, error) {
	var last []Pod
	var found *Pod
	err := poll(ctx, timeout, func() (bool, error) {
		pods, err := c.Pods(ctx, ns, selector)
		if err != nil {
			return false, nil
		}
		last = pods
		if len(pods) != 1 {
			return false, nil
		}
		found = &pods[0]
		return cond(found), nil
	})
	if err != nil {
		desc, _ := c.Kubectl(ctx, "describe", "pods", "-n", ns, "-l", selector)
		return nil, fmt.Errorf("pods %s in %s: %d matching, condition not met: %w\n%s", selector, ns, len(last), err, desc)
	}
	return found, nil
}

// Running is a WaitPod condition: phase Running and every container ready.
func Running(p *Pod) bool {
	if p.Status.Phase != "Running" || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if !s.Ready {
			return false
		}
	}
	return true
}

// ContainerLogs reads a container's output through CRI on the pod's
// node: with the single node on 127.0.0.1 the API server has no address
// to reach the kubelet at, so `kubectl logs` cannot work there.
func (c *Cluster) ContainerLogs(ctx context.Context, p *Pod, container string) (string, error) {
	id := p.ContainerID(container)
	if id == "" {
		return "", fmt.Errorf("pod %s/%s: container %s has no id yet", p.Metadata.Namespace, p.Metadata.Name, container)
	}
	n := c.NodeNamed(p.Spec.NodeName)
	if n == nil {
		return "", fmt.Errorf("pod %s/%s runs on %q, not a node of the cluster", p.Metadata.Namespace, p.Metadata.Name, p.Spec.NodeName)
	}
	return n.Logs(ctx, id)
}

// WaitContainerOutput waits until the container printed marker and
// returns its output.
func (c *Cluster) WaitContainerOutput(ctx context.Context, ns, selector, container, marker string, timeout time.Duration) (*Pod, string, error) {
	var out string
	var pod *Pod
	err := poll(ctx, timeout, func() (bool, error) {
		pods, err := c.Pods(ctx, ns, selector)
		if err != nil || len(pods) != 1 {
			return false, nil
		}
		pod = &pods[0]
		o, err := c.ContainerLogs(ctx, pod, container)
		if err != nil {
			return false, nil
		}
		out = o
		return strings.Contains(o, marker), nil
	})
	if err != nil {
		desc, _ := c.Kubectl(ctx, "describe", "pods", "-n", ns, "-l", selector)
		return pod, out, fmt.Errorf("%s/%s: no %q in output %q: %w\n%s", ns, selector, marker, out, err, desc)
	}
	return pod, out, nil
}
