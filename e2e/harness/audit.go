package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The multi-node cluster's audit log (auditPolicy in multinode.go): one
// JSON event per line, for the requests of the kubelets and of dri-cdi's
// own service accounts only.

// AuditLogPath is the API server's audit log ("" unless the cluster
// writes one: a multi-node cluster does).
func (c *Cluster) AuditLogPath() string {
	if c.nodeView == "" {
		return ""
	}
	return filepath.Join(c.Dir, "audit.log")
}

// AuditRequest is one request of the audit log.
type AuditRequest struct {
	User string
	// Verb is the API verb (get, list, watch, create, update, patch,
	// delete).
	Verb string
	// Resource is the resource, with "/subresource" when there is one
	// ("nodes/status"); "" for a non-resource URL.
	Resource string
	// Received is when the API server received the request.
	Received time.Time
}

// AuditRequests reads the audit log and returns each request received in
// [from, to) once (a watch logs ResponseStarted and ResponseComplete).
func (c *Cluster) AuditRequests(from, to time.Time) ([]AuditRequest, error) {
	path := c.AuditLogPath()
	if path == "" {
		return nil, fmt.Errorf("cluster %s writes no audit log", c.Dir)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []AuditRequest
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for line := 1; sc.Scan(); line++ {
		var ev struct {
			AuditID string `json:"auditID"`
			Verb    string `json:"verb"`
			User    struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			Received time.Time `json:"requestReceivedTimestamp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log %s line %d: %w", path, line, err)
		}
		if seen[ev.AuditID] || ev.Received.Before(from) || !ev.Received.Before(to) {
			continue
		}
		seen[ev.AuditID] = true
		r := AuditRequest{User: ev.User.Username, Verb: ev.Verb, Received: ev.Received}
		if ev.ObjectRef != nil {
			r.Resource = strings.TrimSuffix(ev.ObjectRef.Resource+"/"+ev.ObjectRef.Subresource, "/")
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit log %s: %w", path, err)
	}
	return out, nil
}
