package dracheckpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/dri-cdi/dri-cdi/pkg/atomicfile"
	"github.com/dri-cdi/dri-cdi/pkg/config"
)

// File is the name of the checkpoint in the DRA plugin's data dir.
const File = "checkpoint.json"

// DefaultPath is File in the DRA plugin's default data dir, where
// dri-cdi-nri reads it.
const DefaultPath = config.DRAPluginDataDir + "/" + File

// checkpointVersion is the format version; a file of another version is
// refused, never half read.
const checkpointVersion = 1

// Device is one device of a prepared claim, as the plugin's prepare
// returned it.
type Device struct {
	Request string   `json:"request"`
	Pool    string   `json:"pool"`
	Device  string   `json:"device"`
	Card    string   `json:"card"`
	CDI     []string `json:"cdi"`
	// Resource is the resource attribute (the config pool) the card was
	// published under at prepare, so that a restarted plugin can publish
	// the card again, tainted, while it is unbound (Driver.CardsInUse).
	// Added to version 1 later: empty in a claim an earlier version
	// prepared.
	Resource string `json:"resource,omitempty"`
	// AdminAccess is set for a result with admin access (a monitoring
	// claim): the scheduler does not count it as a use of the card, and
	// neither does prepare (claimSet.conflict). Added to version 1 after
	// Resource: outside Checksum and FullChecksum, inside ClaimsChecksum.
	AdminAccess bool `json:"adminAccess,omitempty"`
	// ShareID is the scheduler's ID of this allocation of a shared card
	// (a pool with shares), and Shares the number of the card's shares
	// it consumes; both are empty for a card held exclusively. Added to
	// version 1 after AdminAccess, under the same rule: inside
	// ClaimsChecksum only.
	ShareID string `json:"shareID,omitempty"`
	Shares  int64  `json:"shares,omitempty"`
	// Memory is the device memory in bytes the share consumes (the
	// allocation's consumedCapacity "memory"), for dri-cdi-nri's
	// dmem.max; 0 when the claim asked for none, never recorded as a
	// zero limit. Added to version 1 after ShareID, under the same rule:
	// inside ClaimsChecksum only.
	Memory int64 `json:"memory,omitempty"`
}

// Claim is what the checkpoint keeps of one prepared claim: the
// kubelet may unprepare it after the claim object is gone and after a
// restart of this plugin, or through another instance during a rolling
// update, so everything unprepare and a repeated prepare need is here.
type Claim struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Devices   []Device `json:"devices"`
}

// checkpoint is the file's content. The checksums make a truncated or
// edited file an error instead of lost claims. Fields added to version
// 1 later (Device.Resource) are outside Checksum and inside
// FullChecksum: an earlier version reads a file this one wrote (a
// rollback, or the older instance of a rolling update), since it drops
// the fields it does not know and checks Checksum only; and a file an
// earlier version wrote (no FullChecksum, none of the added fields)
// loads here.
//
// FullChecksum is frozen to version 1's fields plus Resource: this
// version checks it over the fields it knows, so a field added after
// Resource must not go under it (this version, after a rollback, would
// call the file corrupt and fail every prepare and unprepare). A later
// field gets a checksum of its own, or the format a new version.
type checkpoint struct {
	Version int `json:"version"`
	// Claims is the map of Claim by claim UID, kept as the bytes
	// of the file for ClaimsChecksum.
	Claims json.RawMessage `json:"claims"`
	// Checksum is the SHA-256 of the JSON of Claims without the added
	// fields.
	Checksum string `json:"checksum"`
	// FullChecksum is the SHA-256 of the JSON of Claims: version 1's
	// fields and Resource, no later ones.
	FullChecksum string `json:"fullChecksum,omitempty"`
	// ClaimsChecksum is the SHA-256 of the bytes of Claims as written,
	// every field included, so that it holds for fields a later version
	// adds as well: a version reads a file of a later one without knowing
	// its fields, and checks its bytes. Absent in files of earlier
	// versions.
	ClaimsChecksum string `json:"claimsChecksum,omitempty"`
}

// claimsSum is the SHA-256 of the JSON of claims with version 1's
// fields and Resource (FullChecksum), or version 1's first fields only
// when base is set (Checksum).
func claimsSum(claims map[string]Claim, base bool) (string, error) {
	claims = frozenForm(claims, base)
	b, err := json.Marshal(claims) // map keys are sorted: stable
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// frozenForm is claims with only the fields Checksum (base) or
// FullChecksum cover: every field added later is cleared.
func frozenForm(claims map[string]Claim, base bool) map[string]Claim {
	out := make(map[string]Claim, len(claims))
	for uid, pc := range claims {
		pc.Devices = slices.Clone(pc.Devices)
		for i := range pc.Devices {
			if base {
				pc.Devices[i].Resource = ""
			}
			pc.Devices[i].AdminAccess = false
			pc.Devices[i].ShareID, pc.Devices[i].Shares, pc.Devices[i].Memory = "", 0, 0
		}
		out[uid] = pc
	}
	return out
}

// Load reads path; a missing file is an empty checkpoint.
func Load(path string) (map[string]Claim, error) {
	b, err := Read(path)
	if err != nil || b == nil {
		return map[string]Claim{}, err
	}
	return Parse(path, b)
}

// Read returns the bytes of the file at path, nil when there
// is none.
func Read(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %q: %w", path, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// Parse checks and decodes b, the content of the file at path.
func Parse(path string, b []byte) (map[string]Claim, error) {
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("parse checkpoint %q: %w", path, err)
	}
	if cp.Version != checkpointVersion {
		return nil, fmt.Errorf("checkpoint %q has version %d, want %d", path, cp.Version, checkpointVersion)
	}
	if cp.ClaimsChecksum != "" && cp.ClaimsChecksum != bytesSum(cp.Claims) {
		return nil, fmt.Errorf("checkpoint %q is corrupt: checksum mismatch", path)
	}
	claims := map[string]Claim{}
	if len(cp.Claims) > 0 && string(cp.Claims) != "null" {
		if err := json.Unmarshal(cp.Claims, &claims); err != nil {
			return nil, fmt.Errorf("parse checkpoint %q: claims: %w", path, err)
		}
	}
	base, err := claimsSum(claims, true)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %q: %w", path, err)
	}
	full, err := claimsSum(claims, false)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %q: %w", path, err)
	}
	// Without FullChecksum (an earlier version wrote the file) no added
	// field may be set: the two sums are then equal.
	wantFull := cp.FullChecksum
	if wantFull == "" {
		wantFull = cp.Checksum
	}
	if base != cp.Checksum || full != wantFull {
		return nil, fmt.Errorf("checkpoint %q is corrupt: checksum mismatch", path)
	}
	return claims, nil
}

// bytesSum is the hex SHA-256 of b.
func bytesSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Mode keeps the checkpoint readable by root only: it names
// every prepared claim of the node.
const Mode = 0o600

// Save writes claims to path through the one atomic writer
// (pkg/atomicfile), so a crash leaves the old or the new checkpoint,
// never a mix, and a save that returns nil is durable.
func Save(path string, claims map[string]Claim) error {
	base, err := claimsSum(claims, true)
	if err != nil {
		return err
	}
	full, err := claimsSum(claims, false)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(claims) // map keys are sorted: stable
	if err != nil {
		return err
	}
	b, err := json.Marshal(checkpoint{Version: checkpointVersion, Claims: raw, Checksum: base, FullChecksum: full, ClaimsChecksum: bytesSum(raw)})
	if err != nil {
		return err
	}
	// A directory that cannot be synced fails the save: the kubelet
	// must not get an answer before the record of it survives a crash.
	if err := atomicfile.Write(path, b, Mode); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}
