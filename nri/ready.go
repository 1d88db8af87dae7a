package nri

import "errors"

// Ready is the plugin's readiness, what /readyz answers (package metrics
// serves it): nil when the plugin is connected to the runtime and the
// specs of index are loaded and watched, so that it can answer every
// container it is asked about.
func (p *Plugin) Ready(index *SpecIndex) func() error {
	return func() error {
		if !p.Connected() {
			return errors.New("not connected to the runtime's NRI socket")
		}
		if index != nil && !index.Loaded() {
			return errors.New("CDI specs not loaded yet")
		}
		if index != nil {
			if err := index.WatchErr(); err != nil {
				return err
			}
		}
		return nil
	}
}
