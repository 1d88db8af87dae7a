package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// WorkloadContainer is one busybox container of a WorkloadPod.
type WorkloadContainer struct {
	Name string
	// Script is run by /bin/sh -c.
	Script string
	// RunAsUser and RunAsGroup set the container's user when not nil;
	// nil starts it as the image's user, root.
	RunAsUser, RunAsGroup *int64
	// Resources are extended resources requested (as limits).
	Resources map[string]int64
	// Sidecar makes an init container restartable (restartPolicy
	// Always): it keeps running next to the app containers.
	Sidecar bool
}

// WorkloadPod is a static pod with init containers (regular or sidecars)
// and app containers, for the shapes real workloads have.
type WorkloadPod struct {
	Name           string
	InitContainers []WorkloadContainer
	Containers     []WorkloadContainer
}

func workloadContainer(c WorkloadContainer) map[string]any {
	ctr := map[string]any{
		"name":            c.Name,
		"image":           BusyboxImage,
		"imagePullPolicy": "Never",
		"command":         []string{"/bin/sh", "-c", c.Script},
	}
	sc := map[string]any{}
	if c.RunAsUser != nil {
		sc["runAsUser"] = *c.RunAsUser
		// A non-root container needs no privilege escalation; a root one
		// that drops with su must keep CAP_SETUID/CAP_SETGID, which it has.
		sc["allowPrivilegeEscalation"] = false
	}
	if c.RunAsGroup != nil {
		sc["runAsGroup"] = *c.RunAsGroup
	}
	if len(sc) > 0 {
		ctr["securityContext"] = sc
	}
	if len(c.Resources) > 0 {
		ctr["resources"] = resourceLimits(c.Resources)
	}
	if c.Sidecar {
		ctr["restartPolicy"] = "Always"
	}
	return ctr
}

func workloadManifest(p WorkloadPod) ([]byte, error) {
	var inits, ctrs []any
	for _, c := range p.InitContainers {
		inits = append(inits, workloadContainer(c))
	}
	for _, c := range p.Containers {
		ctrs = append(ctrs, workloadContainer(c))
	}
	spec := map[string]any{
		"hostNetwork":                   true,
		"restartPolicy":                 "Never",
		"terminationGracePeriodSeconds": 2,
		"containers":                    ctrs,
	}
	if len(inits) > 0 {
		spec["initContainers"] = inits
	}
	return json.MarshalIndent(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": p.Name, "namespace": "default"},
		"spec":     spec,
	}, "", "  ")
}

// CreateWorkload drops the pod's manifest into the static pod directory,
// atomically, after the resources its containers request are
// allocatable (see CreatePod). The largest request of any one container
// is what the node must offer.
func (n *Node) CreateWorkload(ctx context.Context, p WorkloadPod) error {
	need := map[string]int64{}
	for _, c := range append(append([]WorkloadContainer(nil), p.InitContainers...), p.Containers...) {
		for r, q := range c.Resources {
			need[r] = max(need[r], q)
		}
	}
	data, err := workloadManifest(p)
	if err != nil {
		return err
	}
	return n.dropManifest(ctx, p.Name, need, data)
}

// NamedContainer returns the newest CRI container named container of the
// pod (PodContainer is this for the pods' main container).
func (n *Node) NamedContainer(ctx context.Context, podName, container string) (*Container, error) {
	full := podName + "-" + NodeName
	out, err := n.Crictl(ctx, "ps", "-a", "-o", "json", "--label", "io.kubernetes.pod.name="+full, "--label", "io.kubernetes.container.name="+container)
	if err != nil {
		return nil, err
	}
	var list struct {
		Containers []struct {
			ID           string `json:"id"`
			PodSandboxID string `json:"podSandboxId"`
			Metadata     struct {
				Name    string `json:"name"`
				Attempt int    `json:"attempt"`
			} `json:"metadata"`
			State     string `json:"state"`
			CreatedAt string `json:"createdAt"`
		} `json:"containers"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("parse crictl ps: %w", err)
	}
	if len(list.Containers) == 0 {
		return nil, fmt.Errorf("pod %s, container %s: %w", podName, container, ErrNoContainer)
	}
	var cs []Container
	for _, c := range list.Containers {
		var created int64
		fmt.Sscan(c.CreatedAt, &created)
		cs = append(cs, Container{ID: c.ID, Attempt: c.Metadata.Attempt, State: c.State, Created: created, PodID: c.PodSandboxID, Name: c.Metadata.Name, PodName: full})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Created > cs[j].Created })
	return &cs[0], nil
}

// WaitContainerOutput waits until the pod's container printed a line
// containing marker, and returns its whole output.
func (n *Node) WaitContainerOutput(ctx context.Context, podName, container, marker string, timeout time.Duration) (string, error) {
	var out string
	err := poll(ctx, timeout, func() (bool, error) {
		c, err := n.NamedContainer(ctx, podName, container)
		if err != nil {
			return false, nil
		}
		o, err := n.Logs(ctx, c.ID)
		if err != nil {
			return false, nil
		}
		out = o
		return strings.Contains(o, marker), nil
	})
	if err != nil {
		status := ""
		if pods, perr := n.Pods(ctx); perr == nil {
			status = pods[podName+"-"+NodeName].Describe()
		}
		return out, fmt.Errorf("pod %s, container %s: no %q in output: %w (output %q; status %s)", podName, container, marker, err, out, status)
	}
	return out, nil
}

// RootStartThenDrop is what s6-overlay media-server images do at init, in
// busybox: stat the node's gid, make sure a group with it exists, put the
// service user (uid 1000) in it, then drop to that user with su (which
// reads the group list from /etc/group) and open the node. It prints
// "NODE <uid>:<gid> <mode>" of the node as the root process sees it,
// "UID <uid>" and "GROUPS <gids>" after the drop, then ProbeScript's
// lines, and keeps running.
func RootStartThenDrop(node string) string {
	return fmt.Sprintf(`node=%[1]q
echo "NODE $(stat -c '%%u:%%g %%a' "$node")"
gid=$(stat -c %%g "$node")
grep -q "^[^:]*:[^:]*:$gid:" /etc/group || echo "render$gid:x:$gid:" >> /etc/group
grp=$(grep "^[^:]*:[^:]*:$gid:" /etc/group | head -n 1 | cut -d: -f1)
echo "plex:x:1000:1000:plex:/tmp:/bin/sh" >> /etc/passwd
sed -i -e "s/^\($grp:[^:]*:$gid:.*\)$/\1,plex/" -e "s/^\($grp:[^:]*:$gid:\),plex$/\1plex/" /etc/group
cat > /etc/as-plex.sh <<'EOS'
echo "UID $(id -u)"
echo "GROUPS $(id -G)"
%[2]s
EOS
su plex -s /bin/sh -c 'sh /etc/as-plex.sh'
exec sleep 3600
`, node, ProbeScript(node))
}
