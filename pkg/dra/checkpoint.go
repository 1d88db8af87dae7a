package dra

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CheckpointFile is the name of the checkpoint in the plugin data dir.
const CheckpointFile = "checkpoint.json"

// checkpointVersion is the format version; a file of another version is
// refused, never half read.
const checkpointVersion = 1

// PreparedDevice is one device of a prepared claim, as Prepare returned
// it.
type PreparedDevice struct {
	Request string   `json:"request"`
	Pool    string   `json:"pool"`
	Device  string   `json:"device"`
	Card    string   `json:"card"`
	CDI     []string `json:"cdi"`
}

// PreparedClaim is what the checkpoint keeps of one prepared claim: the
// kubelet may unprepare it after the claim object is gone and after a
// restart of this plugin, or through another instance during a rolling
// update, so everything unprepare and a repeated prepare need is here.
type PreparedClaim struct {
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Devices   []PreparedDevice `json:"devices"`
}

// checkpoint is the file's content. Checksum is the SHA-256 of the JSON
// of Claims, so that a truncated or edited file is an error instead of
// lost claims.
type checkpoint struct {
	Version  int                      `json:"version"`
	Claims   map[string]PreparedClaim `json:"claims"`
	Checksum string                   `json:"checksum"`
}

func claimsSum(claims map[string]PreparedClaim) (string, error) {
	b, err := json.Marshal(claims) // map keys are sorted: stable
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// loadCheckpoint reads path; a missing file is an empty checkpoint.
func loadCheckpoint(path string) (map[string]PreparedClaim, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]PreparedClaim{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %q: %w", path, err)
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("parse checkpoint %q: %w", path, err)
	}
	if cp.Version != checkpointVersion {
		return nil, fmt.Errorf("checkpoint %q has version %d, want %d", path, cp.Version, checkpointVersion)
	}
	if cp.Claims == nil {
		cp.Claims = map[string]PreparedClaim{}
	}
	sum, err := claimsSum(cp.Claims)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %q: %w", path, err)
	}
	if sum != cp.Checksum {
		return nil, fmt.Errorf("checkpoint %q is corrupt: checksum mismatch", path)
	}
	return cp.Claims, nil
}

// saveCheckpoint writes claims to path atomically: a temporary file in
// the same directory, synced, renamed over path, and the directory
// synced, so a crash leaves the old or the new checkpoint, never a mix.
func saveCheckpoint(path string, claims map[string]PreparedClaim) error {
	sum, err := claimsSum(claims)
	if err != nil {
		return err
	}
	b, err := json.Marshal(checkpoint{Version: checkpointVersion, Claims: claims, Checksum: sum})
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write checkpoint %q: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // fails harmlessly after the rename
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("write checkpoint %q: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
