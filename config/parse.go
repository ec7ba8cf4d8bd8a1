package config

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
)

// ExpSectionKeys are the top-level keys of a config document's experiment
// section, exp: or its long form experiment:. The section belongs to the
// experiment layer (parameters with the meaning of --set exp.<key>=value):
// this package sets it aside as written and never looks inside.
var ExpSectionKeys = []string{"exp", "experiment"}

// Extra is a config document's experiment section, uninterpreted: the
// YAML node as written (scalars' text, line numbers), for the experiment
// layer to read.
type Extra struct {
	Key   string     // "exp" or "experiment" as written; "" when the document has none
	Value *yaml.Node // the section's value; nil when Key is ""
}

// A Doc is one YAML config document read and checked against the schema
// but not yet layered: its fields as leaves of their Go types, the keys it
// names, and its experiment section set aside. Problems found reading it
// are kept, and reported by Build after those of the --set values, as
// Load always has. A Doc is not changed by Build: build on it as often as
// needed.
type Doc struct {
	name   string          // for messages: the file's path, or ""
	tree   map[string]any  // known fields, leaves converted; nil when fatal
	given  map[string]bool // dotted paths of the leaves it sets (not null)
	named  map[string]bool // every dotted path it names, sections, nulls and unknown keys included
	errs   []error         // unknown or ill-typed fields, left out of tree
	fatal  error           // unreadable, not YAML, not a mapping, two experiment sections
	extra  Extra
	extraE error // two experiment sections
}

// ReadFile reads the config document at path. A file that cannot be read
// gives a Doc that Build reports the error of.
func ReadFile(path string) *Doc {
	data, err := os.ReadFile(path)
	if err != nil {
		return &Doc{name: path, fatal: fmt.Errorf("config: %w", err)}
	}
	return parseDoc(path, data)
}

// ParseDoc reads a config document from r; name (a file's path, or "")
// is for messages.
func ParseDoc(name string, r io.Reader) *Doc {
	data, err := io.ReadAll(r)
	if err != nil {
		return &Doc{name: name, fatal: fmt.Errorf("config: %w", err)}
	}
	return parseDoc(name, data)
}

// Parse reads a config document from r and returns the Config it gives on
// the defaults and its preset (what Load gives for a file with no --set)
// and its experiment section. Problems are reported as Load reports them.
func Parse(r io.Reader) (*Config, Extra, error) {
	d := ParseDoc("", r)
	extra, err := d.Extra()
	if err != nil {
		return nil, Extra{}, err
	}
	cfg, err := Build(Layers{File: d})
	if err != nil {
		return nil, extra, err
	}
	return &cfg, extra, nil
}

// Extra returns the document's experiment section. The error is for a
// document with both exp: and experiment: (Build reports it too).
func (d *Doc) Extra() (Extra, error) { return d.extra, d.extraE }

// Names reports whether the document names the dotted key at all — as a
// value, a null or a section — which is what lets it override a setting
// (see Layers).
func (d *Doc) Names(key string) bool { return d.named[key] }

func parseDoc(name string, data []byte) *Doc {
	d := &Doc{name: name, given: map[string]bool{}}
	d.extra, d.extraE = expSection(name, data)
	d.named = namedKeys(data)
	var raw any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		d.fatal = fmt.Errorf("%s: %w", d.prefix(), err)
		return d
	}
	if raw == nil { // empty file
		d.tree = map[string]any{}
		return d
	}
	m, ok := asMap(raw)
	if !ok {
		d.fatal = fmt.Errorf("%s: the top level must be a mapping, got %T", d.prefix(), raw)
		return d
	}
	if d.extraE != nil {
		d.fatal = d.extraE
		return d
	}
	if d.extra.Key != "" {
		m = copyWithout(m, d.extra.Key)
	}
	d.tree = walkYAML(m, configType, "", d.given, &d.errs)
	return d
}

// prefix starts the document's messages: "config: path" (or "config").
func (d *Doc) prefix() string {
	if d.name == "" {
		return "config"
	}
	return "config: " + d.name
}

// expSection finds the document's experiment section. A document that is
// not a YAML mapping has none (the error is the tree's to report).
func expSection(name string, data []byte) (Extra, error) {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return Extra{}, nil
	}
	root := doc.Content[0]
	var found Extra
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if !isExpKey(k.Value) {
			continue
		}
		if found.Key != "" {
			return Extra{}, fmt.Errorf("%s: both %s and %s: give experiment parameters in one section", name, found.Key, k.Value)
		}
		found = Extra{Key: k.Value, Value: v}
	}
	return found, nil
}

func isExpKey(k string) bool {
	for _, x := range ExpSectionKeys {
		if k == x {
			return true
		}
	}
	return false
}

// namedKeys returns every dotted path the document names, read as a plain
// map (nil when it is not one).
func namedKeys(data []byte) map[string]bool {
	var tree map[string]any
	if yaml.Unmarshal(data, &tree) != nil {
		return nil
	}
	keys := map[string]bool{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := prefix + k
			keys[p] = true
			if sub, ok := v.(map[string]any); ok {
				walk(p+".", sub)
			}
		}
	}
	walk("", tree)
	return keys
}

func copyWithout(m map[string]any, key string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// Layers are the sources of a Config above Default() and the preset named
// by fabric.preset, in increasing precedence:
//
//  1. Settings: key=value settings of the caller (an experiment's
//     cluster settings); a key the file names (see Doc.Names) is the
//     file's, and the setting is dropped;
//  2. File: a config document (nil: none);
//  3. Sets: key=value overrides (--set), in order, later wins.
//
// Settings the file leaves alone count as Sets for the fields that derive
// from others (see Load): they are explicit.
type Layers struct {
	Settings []string
	File     *Doc
	Sets     []string
}

// Build resolves the layers into a Config, as Load does (see there for
// keys, values and derived fields). The error is a join of every problem
// found, those of the settings and sets first, then the file's; on error
// the Config is the zero value.
func Build(l Layers) (Config, error) {
	sets := make([]string, 0, len(l.Settings)+len(l.Sets))
	for _, s := range l.Settings {
		k, _, _ := cutSet(s)
		if l.File == nil || !l.File.Names(k) {
			sets = append(sets, s)
		}
	}
	return build(l.File, append(sets, l.Sets...))
}

// deepCopy copies a tree of maps (viper rewrites the maps it merges).
func deepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = deepCopy(sub)
		}
		out[k] = v
	}
	return out
}

// bytesDoc is parseDoc for load's read function.
func bytesDoc(path string, read func() ([]byte, error)) *Doc {
	data, err := read()
	if err != nil {
		return &Doc{name: path, fatal: fmt.Errorf("config: %w", err)}
	}
	return parseDoc(path, bytes.Clone(data))
}
