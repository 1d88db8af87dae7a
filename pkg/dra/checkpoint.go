package dra

import "github.com/dri-cdi/dri-cdi/pkg/dracheckpoint"

// CheckpointFile is the name of the checkpoint in the plugin data dir.
const CheckpointFile = dracheckpoint.File

// PreparedDevice is one device of a prepared claim, as Prepare returned
// it; PreparedClaim is what the checkpoint keeps of one prepared claim.
// The format is package dracheckpoint's, which dri-cdi-nri reads too.
type (
	PreparedDevice = dracheckpoint.Device
	PreparedClaim  = dracheckpoint.Claim
)

// The checkpoint's reads and writes (package dracheckpoint).
var (
	loadCheckpoint  = dracheckpoint.Load
	readCheckpoint  = dracheckpoint.Read
	parseCheckpoint = dracheckpoint.Parse
	saveCheckpoint  = dracheckpoint.Save
)
