package main

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vcluster/vcluster/config"
)

// A --config file may carry experiment parameters in a top-level `exp:`
// (or `experiment:`) section, with the meaning of --set exp.<key>=value;
// --set wins. The config package sets the section aside unread
// (config.Doc.Extra); this file turns it into key=value parameters, and
// builds the configuration from its layers: the experiment's cluster
// settings, then the file, then --set (config.Layers).

// configDoc reads the --config file at path; nil when path is "". A file
// that cannot be read or parsed yields a Doc whose problems config.Build
// reports.
func configDoc(path string) *config.Doc {
	if path == "" {
		return nil
	}
	return config.ReadFile(path)
}

// expSectionParams returns doc's exp section as key=value entries (lists
// comma-joined, scalars as written); nil when there is none. A file that
// does not parse has none (config.Build reports it).
func expSectionParams(doc *config.Doc) ([]string, error) {
	if doc == nil {
		return nil, nil
	}
	x, err := doc.Extra()
	if err != nil || x.Key == "" {
		return nil, err
	}
	return expEntries(x.Key, x.Value)
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
	params, err := expSectionParams(configDoc(path))
	if err != nil {
		return nil, usageError(fmt.Errorf("invalid configuration:\n%w", err))
	}
	return params, nil
}

// loadConfigLayers builds the configuration from, in increasing
// precedence, settings (an experiment's cluster settings: a key the file
// names is the file's), the --config file at path ("" for none) and sets;
// the error lists one problem per line. A malformed exp section is
// reported alone, before the rest of the file is looked at.
func loadConfigLayers(path string, settings, sets []string) (config.Config, error) {
	doc := configDoc(path)
	if _, err := expSectionParams(doc); err != nil {
		return config.Config{}, fmt.Errorf("invalid configuration:\n%w", err)
	}
	cfg, err := config.Build(config.Layers{Settings: settings, File: doc, Sets: sets})
	if err != nil {
		return config.Config{}, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}

// clusterSetsUnder returns the experiment's cluster settings less those the
// --config file at path names itself (config.Doc.Names), so that the order
// is: the experiment's settings, then the file, then --set — what
// config.Layers does with Settings, for callers that put the settings in
// --set. A file that does not parse is left for config.Build to report.
func clusterSetsUnder(path string, sets []string) []string {
	doc := configDoc(path)
	if doc == nil {
		return sets
	}
	var out []string
	for _, s := range sets {
		k, _, _ := strings.Cut(s, "=")
		if !doc.Names(strings.TrimSpace(k)) {
			out = append(out, s)
		}
	}
	return out
}
