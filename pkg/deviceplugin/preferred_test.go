package deviceplugin

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

func TestPreferred(t *testing.T) {
	// Cards A, B on NUMA 0; C, D on NUMA 1; E unknown NUMA.
	a, b := testCard("0000:01:00.0", 0, 0), testCard("0000:02:00.0", 1, 0)
	c, d := testCard("0000:81:00.0", 2, 1), testCard("0000:82:00.0", 3, 1)
	e := testCard("0000:00:02.0", 4, -1)
	res := "dri-cdi.dev/i915"
	rep := func(card drm.Card, n string) string { return card.ID + "::" + n }
	all3 := func(cards ...drm.Card) []string {
		var out []string
		for _, c := range cards {
			out = append(out, rep(c, "0"), rep(c, "1"), rep(c, "2"))
		}
		return out
	}

	tests := map[string]struct {
		pool      config.Pool
		unhealthy map[string]bool
		available []string
		must      []string
		size      int
		want      []string
	}{
		"distinct cards before a second replica": {
			pool:      config.Pool{Resource: res, Replicas: 3, Cards: []drm.Card{a, b}},
			available: all3(a, b), size: 3,
			want: []string{rep(a, "0"), rep(b, "0"), rep(a, "1")},
		},
		"one NUMA node when it has enough cards": {
			pool:      config.Pool{Resource: res, Replicas: 1, Cards: []drm.Card{a, c, d}},
			available: []string{a.ID, c.ID, d.ID}, size: 2,
			want: []string{c.ID, d.ID},
		},
		"distinct cards win over one NUMA node": {
			pool:      config.Pool{Resource: res, Replicas: 3, Cards: []drm.Card{a, c}},
			available: all3(a, c), size: 2,
			want: []string{rep(a, "0"), rep(c, "0")},
		},
		"must-include first and its NUMA node preferred": {
			pool:      config.Pool{Resource: res, Replicas: 1, Cards: []drm.Card{a, b, c, d}},
			available: []string{a.ID, b.ID, c.ID, d.ID}, must: []string{c.ID}, size: 2,
			want: []string{c.ID, d.ID},
		},
		"must-include card is not picked again": {
			pool:      config.Pool{Resource: res, Replicas: 3, Cards: []drm.Card{a, b}},
			available: all3(a, b), must: []string{rep(a, "2")}, size: 2,
			want: []string{rep(a, "2"), rep(b, "0")},
		},
		"least loaded card first": {
			pool:      config.Pool{Resource: res, Replicas: 3, Cards: []drm.Card{a, b}},
			available: []string{rep(a, "2"), rep(b, "0"), rep(b, "1"), rep(b, "2")}, size: 1,
			want: []string{rep(b, "0")},
		},
		"unhealthy and unknown last": {
			pool:      config.Pool{Resource: res, Replicas: 1, Cards: []drm.Card{a, b, e}},
			unhealthy: map[string]bool{a.ID: true},
			available: []string{"0000:99:00.0", a.ID, e.ID, b.ID}, size: 3,
			want: []string{b.ID, e.ID, a.ID},
		},
		"fewer available than asked": {
			pool:      config.Pool{Resource: res, Replicas: 1, Cards: []drm.Card{a, b}},
			available: []string{a.ID}, size: 2,
			want: []string{a.ID},
		},
		"duplicates ignored": {
			pool:      config.Pool{Resource: res, Replicas: 1, Cards: []drm.Card{a, b}},
			available: []string{a.ID, a.ID, b.ID}, must: []string{b.ID, b.ID}, size: 2,
			want: []string{b.ID, a.ID},
		},
		"must-include alone fills the request": {
			pool:      config.Pool{Resource: res, Replicas: 1, Cards: []drm.Card{a, b}},
			available: []string{a.ID, b.ID}, must: []string{b.ID}, size: 1,
			want: []string{b.ID},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := buildState(tc.pool, tc.unhealthy, DeliveryNRI, testName)
			require.Equal(t, tc.want, st.preferred(tc.available, tc.must, tc.size))
		})
	}
}
