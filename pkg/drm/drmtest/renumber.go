package drmtest

import "fmt"

// RebindAs binds the driver of an unbound GPU again with other minors, as
// a driver reload or a re-probe does: DRM hands out the lowest free
// minors, so after an unbind a card can come back with the numbers
// another card had. The minors must be free (no bound GPU holds them).
func (t *Tree) RebindAs(id string, card, render int) error {
	return t.withGPU(id, func(g GPU) error {
		if t.bound[id] {
			return fmt.Errorf("fake GPU %s: still bound; unbind it first", id)
		}
		if (g.Render < 0) != (render < 0) {
			return fmt.Errorf("fake GPU %s: a rebind cannot add or drop the render node", id)
		}
		g = g.WithNodes(card, render)
		if err := validate(g); err != nil {
			return err
		}
		if err := t.minorsFree(g); err != nil {
			return err
		}
		return t.bindAs(g)
	})
}

// Renumber unbinds the GPU with this ID and binds it again with other
// minors (see RebindAs).
func (t *Tree) Renumber(id string, card, render int) error {
	if err := t.Unbind(id); err != nil {
		return err
	}
	return t.RebindAs(id, card, render)
}
