package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

func cdiGenerateCommand() *Command {
	return &Command{Name: "generate", Summary: "Generate the CDI specs for this node's cards", Run: runCDIGenerate}
}

const cdiGenerateHelp = `Discovers the DRM cards and generates the CDI spec files dri-cdi-agent
writes for them: one file per advertised card plus one for the device "all".
A card is advertised when a pool of the config takes it (without -config:
every card with a render node); display-only cards are left out unless a
pool includes them or -include-display-only is given.

Without -output-dir the files are printed to stdout, separated by "---" and
each preceded by a comment with its file name. With -output-dir they are
written there exactly as the agent writes them: atomically, only when
changed, removing the files of cards that are gone.`

func runCDIGenerate(_ context.Context, env *Env, args []string) error {
	f := newFlags("dri-cdi cdi generate", "[flags]", cdiGenerateHelp)
	var roots rootFlags
	roots.register(f)
	outDir := f.String("output-dir", "", "write the spec files into this directory instead of printing them")
	kind := f.String("kind", "", "CDI kind <vendor>/<class> (default: the config's cdiKind, else "+cdi.DefaultKind+")")
	cfgPath := f.String("config", "", "dri-cdi config file; its pools decide which cards are advertised")
	displayOnly := f.Bool("include-display-only", false, "also generate specs for display-only cards no pool takes")
	f.finish()
	if err := f.parse(env, args, false); err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	k := cfg.Kind()
	if *kind != "" {
		if err := cdi.ValidateKind(*kind); err != nil {
			return &usageError{msg: fmt.Sprintf("-kind: %v", err), usage: f.usage()}
		}
		k = *kind
	}
	cards, err := discoverCards(env, roots.roots(), cfg)
	if err != nil {
		return err
	}
	cards = advertisedCards(cfg, cards, *displayOnly)

	if *outDir != "" {
		w, err := cdi.NewWriter(*outDir, k, cdi.WithLogger(env.Log))
		if err != nil {
			return err
		}
		changed, err := w.Sync(cards)
		if err != nil {
			return err
		}
		files, err := cdi.Generate(k, cards)
		if err != nil {
			return err
		}
		for _, file := range files {
			fmt.Fprintln(env.Stdout, filepath.Join(*outDir, file.Name))
		}
		switch {
		case len(files) == 0:
			fmt.Fprintf(env.Stderr, "no card to advertise: %s holds no %s spec files\n", *outDir, k)
		case !changed:
			fmt.Fprintf(env.Stderr, "spec files in %s already up to date\n", *outDir)
		}
		return nil
	}

	files, err := cdi.Generate(k, cards)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		fmt.Fprintln(env.Stderr, "no card to advertise: no spec files")
		return nil
	}
	for _, file := range files {
		if _, err := fmt.Fprintf(env.Stdout, "---\n# file: %s\n%s", file.Name, file.Data); err != nil {
			return err
		}
	}
	return nil
}

// advertisedCards returns the cards that get spec files: every card a
// pool of cfg takes, which is what dri-cdi-agent advertises, plus every
// display-only card when includeDisplayOnly. Order is kept.
func advertisedCards(cfg *config.Config, cards []drm.Card, includeDisplayOnly bool) []drm.Card {
	taken := map[string]bool{}
	for _, p := range cfg.Assign(cards) {
		for _, c := range p.Cards {
			taken[c.ID] = true
		}
	}
	out := make([]drm.Card, 0, len(cards))
	for _, c := range cards {
		if taken[c.ID] || (includeDisplayOnly && c.DisplayOnly()) {
			out = append(out, c)
		}
	}
	return out
}
