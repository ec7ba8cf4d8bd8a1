package labdocker

import (
	"debug/elf"
	"fmt"
)

// IsStaticELF reports whether the program at path is an ELF executable
// that needs no dynamic loader or shared library (no PT_INTERP, no
// DT_NEEDED): the only kind an image FROM scratch can run.
func IsStaticELF(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, fmt.Errorf("%s: not an ELF executable: %v", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return false, fmt.Errorf("%s: reading its dynamic section: %v", path, err)
	}
	return len(libs) == 0, nil
}
