// Package alloc defines the contract between the device plugin and the NRI
// plugin: how kubelet device IDs map to cards, and the allocation
// annotation that Allocate returns for a container.
//
// # Device IDs
//
// A kubelet device ID is a card's stable ID ("0000:00:02.0"). When a pool
// has replicas > 1, each card is advertised N times as "<card ID>::<n>",
// n counting from 0. CardID undoes that mapping.
//
// # Allocation annotation
//
// The kubelet merges the annotations of every resource a container was
// allocated, and drops one of two values under the same key. So each
// resource gets its own key, AnnotationKey(resource), and the value names
// the resource again together with the device IDs:
//
//	dri-cdi.dev/alloc.dri-cdi.dev_i915: "dri-cdi.dev/i915=0000:00:02.0,0000:03:00.0"
//
// An annotation is a request, never a grant: the NRI plugin injects only
// what the kubelet's PodResources API confirms.
package alloc
