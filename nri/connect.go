package nri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/pkg/backoff"
)

// Connection defaults.
const (
	DefaultSocket     = api.DefaultSocketPath
	DefaultName       = "dri-cdi"
	DefaultIndex      = "10"
	defaultMinBackoff = 250 * time.Millisecond
	defaultMaxBackoff = 10 * time.Second
	// defaultRegistration bounds connect, register, configure and
	// synchronize together; a runtime that restarts mid-way would
	// otherwise leave the stub waiting forever.
	defaultRegistration = 30 * time.Second
)

// ConnectConfig says how Run reaches the runtime.
type ConnectConfig struct {
	// Socket is the runtime's NRI socket (default DefaultSocket). It is
	// not used when the runtime launched the plugin and passed a
	// connection in NRI_PLUGIN_SOCKET.
	Socket string
	// Name and Index register the plugin (defaults DefaultName and
	// DefaultIndex); a pre-registered plugin uses the ones the runtime
	// passes in NRI_PLUGIN_NAME and NRI_PLUGIN_IDX instead.
	Name, Index string
	// MinBackoff and MaxBackoff bound the wait between connection
	// attempts; it doubles after each failed attempt.
	MinBackoff, MaxBackoff time.Duration
	// RegistrationTimeout bounds one attempt from dialing to
	// synchronized.
	RegistrationTimeout time.Duration
}

func (c *ConnectConfig) setDefaults() {
	if c.Socket == "" {
		c.Socket = DefaultSocket
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Index == "" {
		c.Index = DefaultIndex
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = defaultMinBackoff
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(defaultMaxBackoff, c.MinBackoff)
	}
	if c.RegistrationTimeout <= 0 {
		c.RegistrationTimeout = defaultRegistration
	}
}

// Run connects the plugin to the runtime and serves it until ctx is done.
// When the connection fails or closes, for example because the runtime
// restarted, it connects again after a backoff that starts at MinBackoff,
// doubles up to MaxBackoff and starts over after a registration that
// lasted longer than MaxBackoff. A plugin the runtime launched itself (NRI_PLUGIN_SOCKET
// set) cannot reconnect: Run returns when its connection closes, and the
// runtime launches it again when it restarts. Run returns nil when ctx
// ends, and an error only for an invalid configuration or a closed
// pre-registered connection.
func (p *Plugin) Run(ctx context.Context, cfg ConnectConfig) error {
	cfg.setDefaults()
	preRegistered := os.Getenv(api.PluginSocketEnvVar) != ""
	name, index := cfg.Name, cfg.Index
	if v := os.Getenv(api.PluginNameEnvVar); v != "" {
		name = v
	}
	if v := os.Getenv(api.PluginIdxEnvVar); v != "" {
		index = v
	}
	if err := api.CheckPluginName(name); err != nil {
		return fmt.Errorf("invalid NRI plugin name %q: %w", name, err)
	}
	if err := api.CheckPluginIndex(index); err != nil {
		return fmt.Errorf("invalid NRI plugin index %q: %w", index, err)
	}
	log := p.log.WithField("plugin", index+"-"+name)
	if preRegistered {
		log = log.WithField("connection", "pre-registered")
	} else {
		log = log.WithField("socket", cfg.Socket)
	}

	wait := backoff.New(cfg.MinBackoff, cfg.MaxBackoff)
	for {
		start := time.Now()
		registered, err := p.runOnce(ctx, cfg, log, preRegistered)
		p.setDisconnected()
		if ctx.Err() != nil {
			return nil
		}
		if preRegistered {
			log.WithError(err).Info("connection from the runtime closed; exiting, the runtime launches the plugin again when it restarts")
			if err == nil {
				err = errors.New("connection closed")
			}
			return fmt.Errorf("pre-registered NRI connection: %w", err)
		}
		// A connection that lasted starts the backoff over; one the runtime
		// keeps dropping right after registration does not.
		if registered && time.Since(start) > cfg.MaxBackoff {
			wait.Reset()
		}
		p.metrics.reconnects.Inc()
		delay := wait.Next()
		log.WithError(err).WithField("retryIn", delay.String()).Warn("not connected to the runtime's NRI socket")
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// runOnce makes one connection with a new stub and serves it until it
// closes. registered says whether it got as far as synchronized.
func (p *Plugin) runOnce(ctx context.Context, cfg ConnectConfig, log *logrus.Entry, preRegistered bool) (registered bool, err error) {
	var (
		mu   sync.Mutex
		conn net.Conn
	)
	closeConn := func() {
		mu.Lock()
		defer mu.Unlock()
		if conn != nil {
			_ = conn.Close()
		}
	}
	opts := []stub.Option{
		stub.WithLogger(stubLogger{log}),
		stub.WithOnClose(func() {
			p.setDisconnected()
			log.Info("connection to the runtime closed")
		}),
	}
	if !preRegistered {
		opts = append(opts,
			stub.WithSocketPath(cfg.Socket),
			stub.WithDialer(func(path string) (net.Conn, error) {
				d := net.Dialer{Timeout: 5 * time.Second}
				c, err := d.DialContext(ctx, "unix", path)
				if err != nil {
					return nil, err
				}
				mu.Lock()
				conn = c
				mu.Unlock()
				return c, nil
			}))
	}
	if os.Getenv(api.PluginNameEnvVar) == "" {
		opts = append(opts, stub.WithPluginName(cfg.Name))
	}
	if os.Getenv(api.PluginIdxEnvVar) == "" {
		opts = append(opts, stub.WithPluginIdx(cfg.Index))
	}

	syncCh := make(chan struct{})
	p.synced.Store(&syncCh)
	defer p.synced.Store(nil)
	synced := syncCh // set to nil once seen

	s, err := stub.New(p, opts...)
	if err != nil {
		return false, fmt.Errorf("failed to create NRI stub: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	watchdog := time.NewTimer(cfg.RegistrationTimeout)
	defer watchdog.Stop()
	for {
		select {
		case err := <-done:
			return registered, err
		case <-synced:
			synced = nil
			registered = true
			watchdog.Stop()
			log.Info("registered with the runtime")
		case <-watchdog.C:
			// The stub waits for Configure without a timeout; closing the
			// connection is the only way to give up on it.
			closeConn()
			return false, fmt.Errorf("runtime did not complete the registration within %s", cfg.RegistrationTimeout)
		case <-ctx.Done():
			closeConn()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
			}
			return registered, ctx.Err()
		}
	}
}

// stubLogger sends the NRI stub's log lines to our logger; its routine
// progress messages go to debug level.
type stubLogger struct{ e *logrus.Entry }

func (l stubLogger) Debugf(_ context.Context, format string, args ...any) {
	l.e.Debugf(format, args...)
}

func (l stubLogger) Infof(_ context.Context, format string, args ...any) {
	l.e.Debugf(format, args...)
}

func (l stubLogger) Warnf(_ context.Context, format string, args ...any) {
	l.e.Warnf(format, args...)
}

func (l stubLogger) Errorf(_ context.Context, format string, args ...any) {
	l.e.Errorf(format, args...)
}
