package dra

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/dri-cdi/dri-cdi/pkg/atomicfile"
	"golang.org/x/sys/unix"
)

// claimStore owns the prepared claims: it loads and saves the checkpoint
// and answers which cards the claims hold, under its own lock (and a
// file lock across the instances of a rolling update), so that
// prepare, unprepare and the agent's CardsInUse never interleave a
// read-modify-write of the file, whoever calls them and however often.
//
// Every call reads the file under the lock: with a rolling update
// (--pod-uid) two instances of the plugin share the file, and the
// kubelet may prepare through one and unprepare through the other, so a
// copy of the claims alone would go stale. What the store keeps is the
// file's bytes with their decoded claims: when the file holds the same
// bytes again, the claims are not decoded and checked again (the
// checksums are over all claims), which keeps a repeated prepare of an
// unchanged claim a read of a small file and a map lookup.
//
// # Failed saves
//
// A save that fails fails the call: the kubelet gets an error for every
// claim of it and retries, and the caller counts and logs nothing of it
// as done. Only a failed directory sync (atomicfile.ErrDirSync) leaves
// the new file in place, readable but maybe not surviving a crash: the
// store then syncs the directory before it reads the file again, and
// fails every call until that sync succeeds, so a retry that finds the
// claim in the file answers only once the record is durable.
type claimStore struct {
	path string
	mu   sync.Mutex
	// unsynced is set when a save renamed the file into place but could
	// not sync its directory.
	unsynced bool
	// raw is the file's content the last load decoded into parsed.
	raw    []byte
	parsed map[string]PreparedClaim
	// save and syncDir are saveCheckpoint and atomicfile.SyncDir; tests
	// make them fail.
	save    func(path string, claims map[string]PreparedClaim) error
	syncDir func(dir string) error
}

func newClaimStore(path string) *claimStore {
	return &claimStore{path: path, save: saveCheckpoint, syncDir: atomicfile.SyncDir}
}

// load reads the file, after making the last failed save's rename
// durable. Callers hold mu.
func (s *claimStore) load() (map[string]PreparedClaim, error) {
	if s.unsynced {
		if err := s.syncDir(filepath.Dir(s.path)); err != nil {
			return nil, fmt.Errorf("checkpoint %q of a failed save: %w", s.path, err)
		}
		s.unsynced = false
	}
	b, err := readCheckpoint(s.path)
	if err != nil || b == nil {
		s.raw, s.parsed = nil, nil
		return map[string]PreparedClaim{}, err
	}
	if s.parsed == nil || !bytes.Equal(b, s.raw) {
		claims, err := parseCheckpoint(s.path, b)
		if err != nil {
			s.raw, s.parsed = nil, nil
			return nil, err
		}
		s.raw, s.parsed = b, claims
	}
	// The callers change the map they get (claimSet), never the claims
	// in it.
	return maps.Clone(s.parsed), nil
}

// update runs fn on the prepared claims under the store's lock, saves
// them if fn changed them, and returns how many claims are prepared
// then. An error reading or saving the checkpoint is returned: fn is not
// run when the file cannot be read, and what fn did is not done when it
// cannot be saved.
func (s *claimStore) update(fn func(*claimSet)) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := lockFile(s.path + ".lock")
	if err != nil {
		return 0, err
	}
	defer unlock()
	claims, err := s.load()
	if err != nil {
		return 0, err
	}
	set := &claimSet{claims: claims}
	fn(set)
	if !set.changed {
		return len(set.claims), nil
	}
	err = s.save(s.path, set.claims)
	if errors.Is(err, atomicfile.ErrDirSync) {
		s.unsynced = true
	}
	if err == nil {
		// Under the lock the file holds what was just saved: keep its
		// bytes with the claims they encode, so that the next call does
		// not decode them again. A file that cannot be read back is
		// simply decoded by the next call.
		if b, rerr := readCheckpoint(s.path); rerr == nil && b != nil {
			s.raw, s.parsed = b, set.claims
		}
	}
	return len(set.claims), err
}

// lockFile takes an exclusive flock on path (created 0600): the lock
// of every read-modify-write of the checkpoint across processes. Within
// one process mu serializes; with a rolling update (--pod-uid) two
// instances share the file, and this lock keeps the prepares,
// unprepares and orphan collections (gc.go) of both from interleaving.
// Reads need no lock: a save renames a complete file into place.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("checkpoint lock: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("checkpoint lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil // closing releases the lock
}

// claims returns the prepared claims.
func (s *claimStore) claims() (map[string]PreparedClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load()
}

// cardsInUse returns every card a prepared claim holds, with the
// resource it was published under (see claimSet.cardsInUse).
func (s *claimStore) cardsInUse() (map[string]string, error) {
	claims, err := s.claims()
	if err != nil {
		return nil, err
	}
	return (&claimSet{claims: claims}).cardsInUse(), nil
}

// claimSet is the prepared claims, by claim UID, as one call of the store
// sees them. A claim is one record with an entry per device, so a card can
// be in the entries of several claims, and removing one claim leaves the
// others' entries of the same card.
type claimSet struct {
	claims  map[string]PreparedClaim
	changed bool
}

// get returns the claim recorded under uid.
func (s *claimSet) get(uid string) (PreparedClaim, bool) {
	pc, ok := s.claims[uid]
	return pc, ok
}

// add records pc under uid.
func (s *claimSet) add(uid string, pc PreparedClaim) {
	s.claims[uid] = pc
	s.changed = true
}

// remove forgets the claim recorded under uid, and returns it.
func (s *claimSet) remove(uid string) (PreparedClaim, bool) {
	pc, ok := s.claims[uid]
	if ok {
		delete(s.claims, uid)
		s.changed = true
	}
	return pc, ok
}

// cardUse is how a device of a claim being prepared would use its card:
// what conflict judges.
type cardUse struct {
	Card string
	// Admin is a result with admin access (monitoring, not a workload).
	Admin bool
	// ShareID is set for an allocation of a share of a shared card,
	// which consumes Shares of the card's Capacity shares.
	ShareID          string
	Shares, Capacity int64
	// Memory is the device memory in bytes the share consumes, 0 when
	// it asked for none, of the card's MemoryCapacity (0: it publishes
	// none).
	Memory, MemoryCapacity int64
}

// conflict returns why u cannot have its card: the claims that hold it,
// as "<namespace>/<name> (<uid>)". The rule is the scheduler's:
//   - a use with admin access (a monitoring claim) neither conflicts nor
//     is conflicted with;
//   - an exclusive use conflicts with every other workload use recorded
//     on the card;
//   - a share conflicts with an exclusive use, and with the other shares
//     once they and it would consume more than the card's capacity, of
//     shares or of memory.
//
// pending are the devices already taken by the claim being prepared.
// Devices an earlier version recorded carry no AdminAccess and no
// ShareID, and count as exclusive workload uses.
func (s *claimSet) conflict(u cardUse, pending []PreparedDevice) (string, bool) {
	if u.Admin {
		return "", false
	}
	var holders []string
	used, memory := u.Shares, u.Memory
	check := func(holder string, dev PreparedDevice) bool {
		if dev.Card != u.Card || dev.AdminAccess {
			return false
		}
		if u.ShareID == "" || dev.ShareID == "" {
			holders = append(holders, holder)
			return true
		}
		used += dev.Shares
		memory += dev.Memory
		if !slices.Contains(holders, holder) {
			holders = append(holders, holder)
		}
		return false
	}
	for _, uid := range slices.Sorted(maps.Keys(s.claims)) {
		pc := s.claims[uid]
		for _, dev := range pc.Devices {
			if check(pc.Namespace+"/"+pc.Name+" ("+uid+")", dev) {
				return holders[len(holders)-1], true
			}
		}
	}
	for _, dev := range pending {
		if check("this claim", dev) {
			return "this claim", true
		}
	}
	if u.ShareID != "" && used > u.Capacity {
		return fmt.Sprintf("%s, which hold its shares (%d of %d with this one)", strings.Join(holders, ", "), used, u.Capacity), true
	}
	if u.ShareID != "" && u.Memory > 0 && memory > u.MemoryCapacity {
		return fmt.Sprintf("%s, which hold its memory (%d of %d bytes with this one)", strings.Join(holders, ", "), memory, u.MemoryCapacity), true
	}
	return "", false
}

// cardsInUse returns every card that a device of a prepared claim is
// recorded on, whatever the claim's kind of use: its CDI name must keep
// resolving while the claim is prepared. The value is the resource the
// card was published under, or "" when only claims an earlier version
// prepared, which did not record it, hold the card.
func (s *claimSet) cardsInUse() map[string]string {
	out := map[string]string{}
	for _, pc := range s.claims {
		for _, dev := range pc.Devices {
			if out[dev.Card] == "" {
				out[dev.Card] = dev.Resource
			}
		}
	}
	return out
}
