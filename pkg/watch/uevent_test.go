package watch

import (
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

func TestParseUevent(t *testing.T) {
	tests := map[string]struct {
		in       string
		want     Uevent
		relevant bool
		wantErr  string
	}{
		"drm add": {
			in: "add@/devices/pci0000:00/0000:00:02.0/drm/card1\x00ACTION=add\x00DEVPATH=/devices/pci0000:00/0000:00:02.0/drm/card1\x00SUBSYSTEM=drm\x00MAJOR=226\x00MINOR=1\x00DEVNAME=dri/card1\x00SEQNUM=4242\x00",
			want: Uevent{Action: "add", DevPath: "/devices/pci0000:00/0000:00:02.0/drm/card1", Subsystem: "drm", Env: map[string]string{
				"ACTION": "add", "DEVPATH": "/devices/pci0000:00/0000:00:02.0/drm/card1", "SUBSYSTEM": "drm",
				"MAJOR": "226", "MINOR": "1", "DEVNAME": "dri/card1", "SEQNUM": "4242",
			}},
			relevant: true,
		},
		"accel add": {
			in: "add@/devices/pci0000:00/0000:00:0b.0/accel/accel0\x00ACTION=add\x00SUBSYSTEM=accel\x00MAJOR=261\x00MINOR=0\x00DEVNAME=accel/accel0\x00",
			want: Uevent{Action: "add", DevPath: "/devices/pci0000:00/0000:00:0b.0/accel/accel0", Subsystem: "accel", Env: map[string]string{
				"ACTION": "add", "SUBSYSTEM": "accel", "MAJOR": "261", "MINOR": "0", "DEVNAME": "accel/accel0",
			}},
			relevant: true,
		},
		"companion add": {
			in:       "add@/devices/platform/soc/soc:bcm2835-codec/video4linux/video10\x00ACTION=add\x00SUBSYSTEM=video4linux\x00",
			want:     Uevent{Action: "add", DevPath: "/devices/platform/soc/soc:bcm2835-codec/video4linux/video10", Subsystem: "video4linux", Env: map[string]string{"ACTION": "add", "SUBSYSTEM": "video4linux"}},
			relevant: true,
		},
		"pci unbind": {
			in:       "unbind@/devices/pci0000:00/0000:00:02.0\x00ACTION=unbind\x00SUBSYSTEM=pci\x00",
			want:     Uevent{Action: "unbind", DevPath: "/devices/pci0000:00/0000:00:02.0", Subsystem: "pci", Env: map[string]string{"ACTION": "unbind", "SUBSYSTEM": "pci"}},
			relevant: true,
		},
		"irrelevant subsystem": {
			in:   "change@/devices/virtual/net/lo\x00ACTION=change\x00SUBSYSTEM=net\x00",
			want: Uevent{Action: "change", DevPath: "/devices/virtual/net/lo", Subsystem: "net", Env: map[string]string{"ACTION": "change", "SUBSYSTEM": "net"}},
		},
		"value with =": {
			in:   "change@/x\x00A=b=c\x00",
			want: Uevent{Action: "change", DevPath: "/x", Env: map[string]string{"A": "b=c"}},
		},
		"empty":              {in: "", wantErr: "empty"},
		"no @":               {in: "add\x00SUBSYSTEM=drm\x00", wantErr: "not action@devpath"},
		"empty action":       {in: "@/devices/x\x00", wantErr: "not action@devpath"},
		"bad variable":       {in: "add@/x\x00NOEQUALS\x00", wantErr: `variable "NOEQUALS"`},
		"empty key":          {in: "add@/x\x00=v\x00", wantErr: "not KEY=VALUE"},
		"action mismatch":    {in: "add@/x\x00ACTION=remove\x00", wantErr: "ACTION"},
		"udev message":       {in: "libudev\x00\xfe\xed\xca\xfe", wantErr: "udev message"},
		"long header is cut": {in: strings.Repeat("x", 500), wantErr: "..."},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseUevent([]byte(tc.in))
			if tc.wantErr != "" {
				require.ErrorIs(t, err, ErrBadUevent)
				require.ErrorContains(t, err, tc.wantErr)
				require.Less(t, len(err.Error()), 200)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.relevant, got.Relevant())
		})
	}
}

func FuzzParseUevent(f *testing.F) {
	f.Add([]byte("add@/devices/pci0000:00/0000:00:02.0/drm/card1\x00ACTION=add\x00SUBSYSTEM=drm\x00"))
	f.Add([]byte("libudev\x00"))
	f.Add([]byte("\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := ParseUevent(b)
		if err != nil {
			require.ErrorIs(t, err, ErrBadUevent)
			return
		}
		require.NotEmpty(t, ev.Action)
		require.NotEmpty(t, ev.DevPath)
		require.Equal(t, ev.Env["SUBSYSTEM"], ev.Subsystem)
	})
}

// TestListenUevents opens and closes the real socket. It does not make
// the kernel send anything: that would touch the host's devices.
func TestListenUevents(t *testing.T) {
	l, err := ListenUevents(logrus.NewEntry(logrus.New()))
	if err != nil {
		t.Skipf("no uevent netlink socket here: %v", err)
	}
	require.NoError(t, l.Close())
	_, open := <-l.Events()
	require.False(t, open, "Events must be closed after Close")
}
