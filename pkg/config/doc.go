// Package config reads the YAML configuration shared by dri-cdi-agent and
// dri-cdi-nri, and assigns discovered cards to pools.
//
// # File format
//
//	cdiKind: dri-cdi.dev/gpu        # optional, the CDI kind of the specs
//	defaultPools: true              # optional, default true
//	pools:
//	- resource: gpu.intel.com/i915  # required, a Kubernetes extended resource name
//	  drivers: [i915]               # kernel drivers this pool takes
//	  pciIDs: ["8086:56a0", "8086:*"]  # PCI vendor:device, "*" = any device
//	  includeDisplayOnly: false     # also take cards without a render node
//	  replicas: 1                   # schedulable device IDs per card
//	  allowSameCardReplicas: false  # may one container get two replicas of one card
//	  shares: 2                     # DRA only: each card is a shared device of 2 shares
//	  companions:                   # nodes that go with each card (drm.Companion)
//	  - subsystem: video4linux      #   tied to the card in sysfs
//	  - path: /dev/dma_heap/*       #   or by path under /dev
//
// Parsing is strict: an unknown or duplicated field, a value of the wrong
// type, or an invalid value is an error that names the field, for example
// "pools[1].replicas: must be >= 1". An empty path or an empty file gives
// Default().
//
// # Pool assignment
//
// A pool takes a card when every criterion it sets matches: the card's
// driver is one of Drivers (if any are listed) and the card's PCI
// vendor:device matches one of PCIIDs (if any are listed). A pool must set
// at least one of the two. Display-only cards (no render node) are taken
// only by pools with includeDisplayOnly.
//
// Pools are tried in file order and a card belongs to the first pool that
// takes it; later pools never see it. With defaultPools, every card that no
// pool took and that has a render node goes to the pool
// "dri-cdi.dev/<driver>" of its driver, unless a configured pool already
// uses that resource name: such cards are not advertised, so that a
// configured pool never receives cards its criteria reject. Accel devices
// (NPUs) are never display-only and go to their driver's pool alike.
//
// # Companion nodes
//
// Config.Discover is drm.Discover followed by AttachCompanions: each card
// gets the companion nodes of the pool that takes it and of its driver
// (drm.DefaultCompanions: /dev/kfd for amdgpu), and every refused or
// missing one is an error in Inventory.Companions naming the pool.
package config
