// Package dratest is a fake kubelet for DRA kubelet plugins, for tests
// and benchmarks: it does what the kubelet's plugin watcher and DRA
// plugin manager do with a registration socket, in the same order
// (GetInfo, check the type and that v1.DRAPlugin is offered, dial the
// endpoint, NotifyRegistrationStatus), and then calls the plugin's
// v1.DRAPlugin service as the kubelet does at pod start and stop.
package dratest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Plugin is one registered plugin.
type Plugin struct {
	// Info is the plugin's GetInfo answer.
	Info *registerapi.PluginInfo
	// Client calls the plugin's DRA service over its endpoint.
	Client drapb.DRAPluginClient

	reg, dra *grpc.ClientConn
}

// Register registers the plugin behind the registration socket sock, as
// the kubelet does; refuse, when not empty, is sent as the kubelet's
// rejection instead of accepting it.
func Register(ctx context.Context, sock, refuse string) (*Plugin, error) {
	reg, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", sock, err)
	}
	rc := registerapi.NewRegistrationClient(reg)
	// The socket file exists from bind on, before the plugin listens; the
	// kubelet's plugin manager retries a socket it could not reach, and
	// so does this.
	var info *registerapi.PluginInfo
	for {
		info, err = rc.GetInfo(ctx, &registerapi.InfoRequest{})
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err != nil {
		reg.Close()
		return nil, fmt.Errorf("GetInfo on %s: %w", sock, err)
	}
	p := &Plugin{Info: info, reg: reg}
	switch {
	case info.Type != registerapi.DRAPlugin:
		err = fmt.Errorf("plugin type %q, want %q", info.Type, registerapi.DRAPlugin)
	case !slices.Contains(info.SupportedVersions, drapb.DRAPluginService):
		err = fmt.Errorf("plugin offers %v, not %s", info.SupportedVersions, drapb.DRAPluginService)
	case info.Endpoint == "":
		err = errors.New("plugin has no endpoint")
	}
	if err == nil && refuse == "" {
		p.dra, err = grpc.NewClient("unix://"+info.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	st := &registerapi.RegistrationStatus{PluginRegistered: err == nil && refuse == ""}
	if err != nil {
		st.Error = err.Error()
	} else if refuse != "" {
		st.Error = refuse
	}
	// A plugin answers a refusal with an error, which the kubelet ignores.
	if _, nerr := rc.NotifyRegistrationStatus(ctx, st); nerr != nil && err == nil && refuse == "" {
		err = fmt.Errorf("NotifyRegistrationStatus: %w", nerr)
	}
	if err != nil || refuse != "" {
		p.Close()
		return nil, err
	}
	p.Client = drapb.NewDRAPluginClient(p.dra)
	return p, nil
}

// Close closes both connections.
func (p *Plugin) Close() {
	if p.dra != nil {
		p.dra.Close()
	}
	if p.reg != nil {
		p.reg.Close()
	}
}

// WaitSocket waits until dir holds a registration socket (*-reg.sock)
// that is not in skip, and returns its path.
func WaitSocket(ctx context.Context, dir string, skip ...string) (string, error) {
	for {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if strings.HasSuffix(e.Name(), "-reg.sock") && e.Type()&os.ModeSocket != 0 && !slices.Contains(skip, p) {
				return p, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no registration socket in %s: %w", dir, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// Prepare calls NodePrepareResources for claims given as namespace,
// name, uid triples.
func (p *Plugin) Prepare(ctx context.Context, claims ...*drapb.Claim) (*drapb.NodePrepareResourcesResponse, error) {
	return p.Client.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: claims})
}

// Unprepare calls NodeUnprepareResources.
func (p *Plugin) Unprepare(ctx context.Context, claims ...*drapb.Claim) (*drapb.NodeUnprepareResourcesResponse, error) {
	return p.Client.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: claims})
}

// Claim is the kubelet's reference to a claim.
func Claim(namespace, name, uid string) *drapb.Claim {
	return &drapb.Claim{Namespace: namespace, Name: name, Uid: uid}
}
