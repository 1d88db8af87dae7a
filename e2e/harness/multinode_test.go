package harness

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMultiNodeOptionsValidate(t *testing.T) {
	ok := MultiNodeOptions{Nodes: []NodeSpec{{Name: "node-a"}, {Name: "node-b"}}}
	require.NoError(t, ok.validate())
	for name, o := range map[string]MultiNodeOptions{
		"no nodes":     {},
		"ten nodes":    {Nodes: make([]NodeSpec, 10)},
		"empty name":   {Nodes: []NodeSpec{{Name: ""}}},
		"upper case":   {Nodes: []NodeSpec{{Name: "Node-A"}}},
		"twice":        {Nodes: []NodeSpec{{Name: "a"}, {Name: "a"}}},
		"trailing -":   {Nodes: []NodeSpec{{Name: "a-"}}},
		"path in name": {Nodes: []NodeSpec{{Name: "../a"}}},
	} {
		require.Error(t, o.validate(), name)
	}
}

func TestNodeNetAddresses(t *testing.T) {
	nn := &nodeNet{index: 3}
	require.Equal(t, "198.18.255.13", nn.nodeIP())
	require.Equal(t, "198.18.3.0/24", nn.podSubnet())
	require.Equal(t, "dricdi-mn3h", nn.veth())
}

func TestAuditRequests(t *testing.T) {
	dir := t.TempDir()
	c := &Cluster{Dir: dir, nodeView: filepath.Join(dir, "node")}
	// A watch logs two stages under one auditID; a request outside the
	// window and one without objectRef.
	log := `{"auditID":"w1","stage":"ResponseStarted","verb":"watch","user":{"username":"system:node:a"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-12-02T06:00:01Z"}
{"auditID":"w1","stage":"ResponseComplete","verb":"watch","user":{"username":"system:node:a"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-12-02T06:00:01Z"}
{"auditID":"p1","stage":"ResponseComplete","verb":"patch","user":{"username":"system:node:a"},"objectRef":{"resource":"nodes","subresource":"status"},"requestReceivedTimestamp":"2026-12-02T06:00:02Z"}
{"auditID":"x1","stage":"ResponseComplete","verb":"get","user":{"username":"system:node:a"},"requestReceivedTimestamp":"2026-12-02T06:00:03Z"}
{"auditID":"late","stage":"ResponseComplete","verb":"update","user":{"username":"system:node:a"},"objectRef":{"resource":"leases"},"requestReceivedTimestamp":"2026-12-02T06:01:00Z"}
`
	require.NoError(t, os.WriteFile(c.AuditLogPath(), []byte(log), 0o644))
	from := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	reqs, err := c.AuditRequests(from, from.Add(time.Minute))
	require.NoError(t, err)
	var got []string
	for _, r := range reqs {
		got = append(got, r.Verb+" "+r.Resource)
	}
	require.Equal(t, []string{"watch pods", "patch nodes/status", "get "}, got)

	require.NoError(t, os.WriteFile(c.AuditLogPath(), []byte("{not json\n"), 0o644))
	_, err = c.AuditRequests(from, from.Add(time.Minute))
	require.ErrorContains(t, err, "line 1")

	_, err = (&Cluster{Dir: dir}).AuditRequests(from, from.Add(time.Minute))
	require.ErrorContains(t, err, "writes no audit log")
}
