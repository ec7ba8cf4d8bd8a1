package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/experiments"
)

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var numberWords = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
	"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"}

// README's status line counts the registered experiments and its CLI
// table names each; docs/experiments.md has a section for each and no
// other, and its list of experiments that run partitioned is the one
// catalogue (every experiment runs partitioned, as `experiment --help` says).
func TestDocsNameEveryExperiment(t *testing.T) {
	readme := readDoc(t, "../../README.md")
	doc := readDoc(t, "../../docs/experiments.md")
	names := experiments.Names()
	if len(names) < len(numberWords) {
		if w := numberWords[len(names)] + " experiments"; !strings.Contains(readme, w) {
			t.Errorf("README.md does not say %q (experiments.Names() has %d)", w, len(names))
		}
	}
	var row string
	for _, l := range strings.Split(readme, "\n") {
		if strings.HasPrefix(l, "| `vcluster experiment ") {
			row = l
		}
	}
	if row == "" {
		t.Fatal("README.md has no CLI table row for vcluster experiment")
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^### (\S+)`).FindAllStringSubmatch(doc[strings.Index(doc, "## Catalogue"):], -1) {
		sections[m[1]] = true
	}
	var partitioned []string
	for _, n := range names {
		if !regexp.MustCompile(`[ (]` + regexp.QuoteMeta(n) + `[,) ]`).MatchString(row) {
			t.Errorf("README.md's experiment row does not name %s:\n%s", n, row)
		}
		if !sections[n] {
			t.Errorf("docs/experiments.md has no \"### %s\" section in its catalogue", n)
		}
		delete(sections, n)
		partitioned = append(partitioned, n) // every experiment runs partitioned
	}
	for s := range sections {
		t.Errorf("docs/experiments.md has a section for %q, which is no registered experiment", s)
	}
	const prefix = "Experiments that run partitioned: "
	var listed []string
	for _, l := range strings.Split(doc, "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			listed = strings.Split(strings.TrimSuffix(rest, "."), ", ")
		}
	}
	if !slices.Equal(listed, partitioned) {
		t.Errorf("docs/experiments.md lists %v as running partitioned; the catalogue has %v", listed, partitioned)
	}
	if len(partitioned) == len(names) {
		_, help, _ := runCLI(t, "experiment", "--help")
		if !strings.Contains(help, "every\nexperiment can") && !strings.Contains(help, "every experiment can") {
			t.Errorf("every experiment runs partitioned, but experiment --help does not say so:\n%s", help)
		}
	}
}

var (
	docSpan  = regexp.MustCompile("`(?:go run \\./cmd/)?vcluster ([^`]+)`")
	docFlag  = regexp.MustCompile(`(?:^|[\s\[|(])--([a-z][a-z0-9-]*)`)
	docBlock = regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
)

// docCommands returns the vcluster command lines a document shows: code
// spans "`vcluster …`" and the lines of code blocks that start with
// "vcluster", "$ vcluster" or "go run ./cmd/vcluster" (without comments).
func docCommands(doc string) []string {
	var out []string
	for _, m := range docSpan.FindAllStringSubmatch(doc, -1) {
		out = append(out, m[1])
	}
	for _, b := range docBlock.FindAllStringSubmatch(doc, -1) {
		for _, l := range strings.Split(b[1], "\n") {
			l = strings.TrimPrefix(strings.TrimSpace(l), "$ ")
			l, _, _ = strings.Cut(l, " #")
			for _, p := range []string{"go run ./cmd/vcluster ", "vcluster "} {
				if rest, ok := strings.CutPrefix(l, p); ok {
					out = append(out, rest)
					break
				}
			}
		}
	}
	return out
}

// commandFor finds the (sub)command a documented command line names: its
// leading plain words.
func commandFor(root *cobra.Command, line string) *cobra.Command {
	var words []string
	for _, w := range strings.Fields(line) {
		if strings.HasPrefix(w, "-") || strings.ContainsAny(w, "[<|`") {
			break
		}
		words = append(words, w)
	}
	c, _, err := root.Find(words)
	if err != nil {
		return root
	}
	return c
}

// Every flag the README and the docs this package documents show on a
// vcluster command exists on that command (or is inherited from the root).
func TestDocsCommandsExist(t *testing.T) {
	root := newRootCmd()
	n := 0
	for _, path := range []string{"../../README.md", "../../docs/experiments.md", "../../docs/config.md", "../../examples/README.md"} {
		for _, line := range docCommands(readDoc(t, path)) {
			c := commandFor(root, line)
			for _, m := range docFlag.FindAllStringSubmatch(line, -1) {
				name := m[1]
				n++
				if name == "help" || c.Flags().Lookup(name) != nil || c.InheritedFlags().Lookup(name) != nil || c.PersistentFlags().Lookup(name) != nil {
					continue
				}
				t.Errorf("%s: `vcluster %s`: %s has no flag --%s", path, line, c.CommandPath(), name)
			}
		}
	}
	if n < 50 {
		t.Errorf("only %d flags found in the docs: the patterns no longer match them", n)
	}
}
