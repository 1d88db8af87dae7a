package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// finalStage is what the last stage of deployments/container/Dockerfile
// puts into the image. The Dockerfile stays the one owner of the image's
// content and metadata; this builder reads it instead of repeating it.
type finalStage struct {
	// Base is the stage's FROM; only scratch is supported.
	Base string
	// Files are the COPY --from=<stage> sources by base name, all copied
	// into Dest.
	Files []string
	Dest  string
	// Labels after ${VERSION} substitution.
	Labels     map[string]string
	User       string
	Entrypoint []string
}

// parseDockerfile reads the final stage of a Dockerfile. It understands
// the instructions that stage uses (FROM, ARG, LABEL, COPY --from, USER,
// ENTRYPOINT in exec form) and refuses anything else there, so a change to
// the Dockerfile that this builder would silently drop fails `make image`.
func parseDockerfile(r io.Reader, version string) (*finalStage, error) {
	lines, err := logicalLines(r)
	if err != nil {
		return nil, err
	}
	last := -1
	for i, l := range lines {
		if instr, _, _ := strings.Cut(l.text, " "); strings.EqualFold(instr, "FROM") {
			last = i
		}
	}
	if last < 0 {
		return nil, fmt.Errorf("no FROM")
	}
	var st *finalStage
	args := map[string]string{}
	for _, l := range lines[last:] {
		instr, rest, _ := strings.Cut(l.text, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			st = &finalStage{Base: strings.Fields(rest)[0], Labels: map[string]string{}}
		case "ARG":
			name, def, _ := strings.Cut(rest, "=")
			args[name] = def
		case "LABEL":
			kv, err := splitLabels(rest)
			if err != nil {
				return nil, fmt.Errorf("line %d: LABEL: %w", l.no, err)
			}
			for k, v := range kv {
				st.Labels[k] = expand(v, args, version)
			}
		case "COPY":
			f := strings.Fields(rest)
			if len(f) < 3 || !strings.HasPrefix(f[0], "--from=") {
				return nil, fmt.Errorf("line %d: only COPY --from=<stage> <files>... <dir>/ is supported: %q", l.no, l.text)
			}
			st.Dest = f[len(f)-1]
			if !strings.HasSuffix(st.Dest, "/") {
				return nil, fmt.Errorf("line %d: COPY destination %q must be a directory (end in /)", l.no, st.Dest)
			}
			st.Files = st.Files[:0]
			for _, src := range f[1 : len(f)-1] {
				st.Files = append(st.Files, path.Base(src))
			}
		case "USER":
			st.User = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &st.Entrypoint); err != nil {
				return nil, fmt.Errorf("line %d: ENTRYPOINT must be in exec (JSON) form: %w", l.no, err)
			}
		default:
			return nil, fmt.Errorf("line %d: instruction %s in the final stage is not supported by this builder", l.no, instr)
		}
	}
	switch {
	case st.Base != "scratch":
		return nil, fmt.Errorf("final stage FROM %s: only scratch is supported", st.Base)
	case len(st.Files) == 0:
		return nil, fmt.Errorf("final stage copies no files")
	case len(st.Entrypoint) == 0:
		return nil, fmt.Errorf("final stage has no ENTRYPOINT")
	}
	return st, nil
}

type line struct {
	no   int
	text string
}

// logicalLines joins continuation lines and drops comments, parser
// directives and blank lines.
func logicalLines(r io.Reader) ([]line, error) {
	var out []line
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(r)
	for no := 1; sc.Scan(); no++ {
		t := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(t, "#") || (t == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = no
		}
		cont := strings.HasSuffix(t, "\\")
		cur.WriteString(strings.TrimSuffix(t, "\\"))
		if cont {
			cur.WriteByte(' ')
			continue
		}
		out = append(out, line{no: start, text: strings.TrimSpace(cur.String())})
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, line{no: start, text: strings.TrimSpace(cur.String())})
	}
	return out, sc.Err()
}

// splitLabels parses `k="v" k2="v 2"` pairs.
func splitLabels(s string) (map[string]string, error) {
	kv := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		k, rest, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("want key=value in %q", s)
		}
		if !strings.HasPrefix(rest, `"`) {
			v, tail, _ := strings.Cut(rest, " ")
			kv[k], s = v, tail
			continue
		}
		end := strings.Index(rest[1:], `"`)
		if end < 0 {
			return nil, fmt.Errorf("unterminated quote in %q", s)
		}
		kv[k], s = rest[1:end+1], rest[end+2:]
	}
	return kv, nil
}

// expand substitutes ${NAME} and $NAME from the stage's ARGs; VERSION
// is the build's version.
func expand(v string, args map[string]string, version string) string {
	return os.Expand(v, func(name string) string {
		if name == "VERSION" {
			return version
		}
		return args[name]
	})
}
