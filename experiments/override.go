package experiments

import (
	"bytes"

	"github.com/vcluster/vcluster/config"
)

// override applies --set style overrides to a resolved config: its YAML
// is the file layer, the overrides the --set layer (config.Build).
func override(base config.Config, sets []string) (config.Config, error) {
	y, err := base.YAML()
	if err != nil {
		return config.Config{}, err
	}
	return config.Build(config.Layers{File: config.ParseDoc("the resolved config", bytes.NewReader(y)), Sets: sets})
}
