package dratest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type registrar struct {
	registerapi.UnimplementedRegistrationServer
	endpoint string
}

func (r registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: "test.example.com", Endpoint: r.endpoint,
		SupportedVersions: []string{drapb.DRAPluginService}}, nil
}

func (registrar) NotifyRegistrationStatus(context.Context, *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	return &registerapi.RegistrationStatusResponse{}, nil
}

// A plugin's registration socket exists from bind(2) on, and connecting
// to it is refused until listen(2): WaitSocket can return it in that
// window (a flake of the driver tests under load). Register keeps
// trying, as the kubelet's plugin manager does, instead of failing on
// the first refused connection.
func TestRegisterWaitsForABoundSocketToListen(t *testing.T) {
	dir, err := os.MkdirTemp("", "dratest")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "test.example.com-reg.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}))

	found, err := WaitSocket(context.Background(), dir)
	require.NoError(t, err)
	require.Equal(t, sock, found, "WaitSocket returns a socket that does not listen yet")

	// Not listening: Register is still trying when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = Register(ctx, sock, "")
	require.Error(t, err)
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded, "Register gave up before its context ended: %v", err)
	cancel()

	require.NoError(t, syscall.Listen(fd, 8))
	f := os.NewFile(uintptr(fd), sock)
	ln, err := net.FileListener(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, registrar{endpoint: filepath.Join(dir, "dra.sock")})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Register(ctx, sock, "")
	require.NoError(t, err)
	defer p.Close()
	require.Equal(t, filepath.Join(dir, "dra.sock"), p.Info.Endpoint)
}
