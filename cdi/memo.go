package cdi

import (
	"reflect"
	"slices"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// generated remembers the last successful Generate of a Writer: the cards
// it was given (a deep copy) and the files it returned. Generate is a pure
// function of its arguments, so equal cards give the same files, and the
// periodic resync, which almost always sees the cards of the previous
// pass, does not build, validate and YAML-encode every spec again just to
// compare the bytes with the files on disk. The files on disk are still
// read and compared every time: the memo only saves the encoding.
type generated struct {
	cards []drm.Card
	files []File
}

// generate returns Generate(w.kind, cards), from the memo when cards equal
// the previous call's. The caller holds w.mu.
func (w *Writer) generate(cards []drm.Card) ([]File, error) {
	if w.last != nil && reflect.DeepEqual(w.last.cards, cards) {
		return w.last.files, nil
	}
	files, err := Generate(w.kind, cards)
	if err != nil {
		w.last = nil
		return nil, err
	}
	// Sync needs only the names, devices and bytes: drop the parsed specs.
	kept := make([]File, len(files))
	for i, f := range files {
		kept[i] = File{Name: f.Name, Device: f.Device, Data: f.Data}
	}
	w.last = &generated{cards: cloneCards(cards), files: kept}
	return kept, nil
}

// cloneCards copies cards deeply, so that a caller changing its slice
// later cannot change what the memo compares against.
func cloneCards(cards []drm.Card) []drm.Card {
	out := make([]drm.Card, len(cards))
	for i, c := range cards {
		if c.RenderNode != nil {
			rn := *c.RenderNode
			c.RenderNode = &rn
		}
		if c.AccelNode != nil {
			an := *c.AccelNode
			c.AccelNode = &an
		}
		c.Extra = slices.Clone(c.Extra)
		c.ByPath = slices.Clone(c.ByPath)
		out[i] = c
	}
	return out
}
