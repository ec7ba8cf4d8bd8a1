package main

import (
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A --config file may carry experiment parameters in a top-level `exp:`
// (or `experiment:`) section, with the meaning of --set exp.<key>=value;
// --set wins. The config package knows nothing of experiments, so the
// section is taken out here before the file reaches config.Load.
var expSectionKeys = []string{"exp", "experiment"}

// splitExpSection reads the YAML file at path and returns it without its
// exp section (rest, nil when there was none) and the section's entries as
// key=value (lists comma-joined, scalars as written). A file that does not
// parse is left for config.Load to report (rest and params nil, no error).
func splitExpSection(path string) (rest []byte, params []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil // config.Load reports it
	}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, nil
	}
	root := doc.Content[0]
	found := ""
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if !isExpKey(k.Value) {
			continue
		}
		if found != "" {
			return nil, nil, fmt.Errorf("%s: both %s and %s: give experiment parameters in one section", path, found, k.Value)
		}
		found = k.Value
		if params, err = expEntries(k.Value, v); err != nil {
			return nil, nil, err
		}
		root.Content = append(root.Content[:i:i], root.Content[i+2:]...)
		i -= 2
	}
	if found == "" {
		return nil, nil, nil
	}
	if rest, err = yaml.Marshal(&doc); err != nil {
		return nil, nil, err
	}
	return rest, params, nil
}

func isExpKey(k string) bool {
	for _, x := range expSectionKeys {
		if k == x {
			return true
		}
	}
	return false
}

func expEntries(section string, v *yaml.Node) ([]string, error) {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil, nil
	}
	if v.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: must be a mapping of parameter: value (line %d)", section, v.Line)
	}
	var out []string
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		path := "exp." + k.Value
		switch x.Kind {
		case yaml.ScalarNode:
			out = append(out, k.Value+"="+x.Value)
		case yaml.SequenceNode:
			var items []string
			for _, it := range x.Content {
				if it.Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("%s: list items must be values (line %d)", path, it.Line)
				}
				items = append(items, it.Value)
			}
			out = append(out, k.Value+"="+strings.Join(items, ","))
		default:
			return nil, fmt.Errorf("%s: must be a value or a list of values, not a mapping (line %d)", path, x.Line)
		}
	}
	return out, nil
}

// configExpParams returns the exp section of the command's --config file
// as key=value entries (without the "exp." prefix).
func configExpParams(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	_, params, err := splitExpSection(path)
	if err != nil {
		return nil, usageError(fmt.Errorf("invalid configuration:\n%w", err))
	}
	return params, nil
}

// withoutExpSection returns a path config.Load can read: path itself, or a
// temporary copy without the exp section (remove it with cleanup).
func withoutExpSection(path string) (string, func(), error) {
	if path == "" {
		return path, func() {}, nil
	}
	rest, _, err := splitExpSection(path)
	if err != nil {
		return "", nil, err
	}
	if rest == nil {
		return path, func() {}, nil
	}
	f, err := os.CreateTemp("", "vcluster-config-*.yaml")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.Remove(f.Name()) }
	if _, err := f.Write(rest); err != nil {
		f.Close()
		cleanup()
		return "", nil, err
	}
	if err := f.Close(); err != nil {
		cleanup()
		return "", nil, err
	}
	return f.Name(), cleanup, nil
}

// clusterSetsUnder returns the experiment's cluster settings less those the
// --config file at path sets itself, so that the order is: the
// experiment's settings, then the file, then --set (config.Load lets every
// --set win over the file). A file that does not parse is left for
// config.Load to report.
func clusterSetsUnder(path string, sets []string) []string {
	if path == "" {
		return sets
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return sets
	}
	var tree map[string]any
	if yaml.Unmarshal(data, &tree) != nil {
		return sets
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
	var out []string
	for _, s := range sets {
		k, _, _ := strings.Cut(s, "=")
		if !keys[strings.TrimSpace(k)] {
			out = append(out, s)
		}
	}
	return out
}
