package experiments

import (
	"os"

	"github.com/vcluster/vcluster/config"
)

// override applies --set style overrides to a resolved config by
// round-tripping it through its YAML (config.Load reads files).
func override(base config.Config, sets []string) (config.Config, error) {
	y, err := base.YAML()
	if err != nil {
		return config.Config{}, err
	}
	f, err := os.CreateTemp("", "vcluster-*.yaml")
	if err != nil {
		return config.Config{}, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(y); err != nil {
		f.Close()
		return config.Config{}, err
	}
	if err := f.Close(); err != nil {
		return config.Config{}, err
	}
	return config.Load(f.Name(), sets)
}
