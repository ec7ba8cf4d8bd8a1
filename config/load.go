package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// Load builds a Config from, in increasing precedence:
//
//  1. Default();
//  2. the preset named by fabric.preset (a --set value wins over the file's);
//  3. the YAML file at path (skipped when path is ""), less its experiment
//     section (see ExpSectionKeys: Load sets it aside unread; a caller that
//     wants it uses ReadFile, Doc.Extra and Build);
//  4. the `key=value` overrides in sets, in order (later wins).
//
// Keys are dotted lowerCamel paths ("fabric.planes",
// "fabric.queue.ecn.kmaxBytes"); list values in sets are comma-separated
// ("fabric.queue.pfc.priorities=3,4", "output.pcap=" for an empty list).
// A YAML null leaves the field at its default. Keys are case-sensitive; an
// unknown key in the file or in sets is an error naming it
// ("fabric.plnaes: unknown field").
//
// Fields that derive from others (see Normalize) follow their sources
// unless set explicitly in the file or sets: setting fabric.hosts alone
// derives fabric.t0PerPlane = hosts/hostsPerT0; setting hostsPerT0 or
// t0PerPlane alone derives hosts; fabric.topology=fattree derives planes=1
// and hosts = k^3/4; setting the PFC watchdog detection alone derives
// restoration = 2×detection; giving fabric.queue.ecn.kminBytes, kmaxBytes
// or pmax in the file or in sets without naming fabric.queue.ecn.preset
// there sets the preset to custom (see layerECN).
//
// The merged values are decoded with viper, normalized and validated. The
// error is a join of every problem found (each a *FieldError where it
// concerns a field); on error the returned Config is the zero value.
func Load(path string, sets []string) (Config, error) {
	var doc *Doc
	if path != "" {
		doc = ReadFile(path)
	}
	return build(doc, sets)
}

// load is Load with the file's content from read (called only when path is
// not ""): the fuzz targets hand it bytes and touch no file system.
func load(path string, read func() ([]byte, error), sets []string) (Config, error) {
	var doc *Doc
	if path != "" {
		doc = bytesDoc(path, read)
	}
	return build(doc, sets)
}

// cutSet splits a --set value into its trimmed key and raw value.
func cutSet(s string) (key, raw string, ok bool) {
	key, raw, ok = strings.Cut(s, "=")
	return strings.TrimSpace(key), raw, ok
}

// build layers doc (nil: no file) and then sets on the defaults and the
// preset: Load's body.
func build(doc *Doc, sets []string) (Config, error) {
	var errs []error
	explicit := map[string]bool{}

	type override struct {
		key string
		val any
	}
	var overrides []override
	presetName, presetSet := "", false
	for _, s := range sets {
		key, raw, ok := cutSet(s)
		if !ok || key == "" {
			errs = append(errs, &FieldError{Path: "--set", Reason: "must be key=value, e.g. fabric.planes=8", Value: s})
			continue
		}
		t, err := leafType(key, raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		val, err := parseSetValue(key, t, raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		overrides = append(overrides, override{key, val})
		explicit[key] = true
		if key == "fabric.preset" {
			presetName, presetSet = val.(string), true
		}
	}

	var tree map[string]any
	inSets, inFile := maps.Clone(explicit), map[string]bool{}
	if doc != nil {
		if doc.fatal != nil {
			return Config{}, errors.Join(append(errs, doc.fatal)...)
		}
		errs = append(errs, doc.errs...)
		tree = deepCopy(doc.tree)
		maps.Copy(inFile, doc.given)
		maps.Copy(explicit, inFile)
	}
	if !presetSet {
		if fab, ok := tree["fabric"].(map[string]any); ok {
			if p, ok := fab["preset"].(string); ok {
				presetName = p
			}
		}
	}

	base := Default()
	_ = ApplyPreset(&base, presetName) // an unknown name is reported by Validate

	v := viper.New()
	if err := v.MergeConfigMap(toMap(reflect.ValueOf(base))); err != nil {
		return Config{}, fmt.Errorf("config: defaults: %w", err)
	}
	if tree != nil {
		if err := v.MergeConfigMap(tree); err != nil {
			return Config{}, fmt.Errorf("config: %s: %w", doc.name, err)
		}
	}
	for _, o := range overrides {
		v.Set(o.key, o.val)
	}
	var cfg Config
	if err := v.Unmarshal(&cfg, func(dc *mapstructure.DecoderConfig) { dc.ErrorUnused = true }); err != nil {
		// Keys and types were checked above, so this is a bug here.
		return Config{}, fmt.Errorf("config: decode: %w", err)
	}

	// Let derived fields follow their sources unless set explicitly.
	f := &cfg.Fabric
	if !explicit["fabric.hosts"] {
		f.Hosts = 0
	} else if !explicit["fabric.t0PerPlane"] {
		f.T0PerPlane = 0
	}
	if f.Topology == TopologyFatTree && !explicit["fabric.planes"] {
		f.Planes = 0
	}
	if explicit["fabric.queue.pfc.watchdog.detection"] && !explicit["fabric.queue.pfc.watchdog.restoration"] {
		f.Queue.PFC.Watchdog.Restoration = ""
	}
	if !inSets["fabric.queue.ecn.preset"] {
		// What the sets give above the file is not the file's to clear.
		fileECN := maps.Clone(inFile)
		for _, k := range []string{"fabric.queue.ecn.kminBytes", "fabric.queue.ecn.kmaxBytes", "fabric.queue.ecn.pmax"} {
			fileECN[k] = fileECN[k] || inSets[k]
		}
		layerECN(&f.Queue.ECN, cfg.Transport.Kind, fileECN)
	}
	layerECN(&f.Queue.ECN, cfg.Transport.Kind, inSets)
	cfg.Normalize()

	if err := cfg.Validate(); err != nil {
		errs = append(errs, unwrapJoin(err)...)
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return cfg, nil
}

func unwrapJoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

var configType = reflect.TypeFor[Config]()

func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[fmt.Sprint(k)] = x
		}
		return out, true
	}
	return nil, false
}

func walkYAML(m map[string]any, t reflect.Type, prefix string, explicit map[string]bool, errs *[]error) map[string]any {
	out := map[string]any{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		val := m[k]
		path := joinPath(prefix, k)
		f, ok := fieldByKey(t, k)
		if !ok {
			*errs = append(*errs, unknownField(path, prefix, k, t))
			continue
		}
		if val == nil {
			continue // YAML null: keep the default
		}
		if f.Type.Kind() == reflect.Struct {
			sub, ok := asMap(val)
			if !ok {
				*errs = append(*errs, &FieldError{Path: path, Reason: "must be a mapping of its fields", Value: val})
				continue
			}
			out[k] = walkYAML(sub, f.Type, path, explicit, errs)
			continue
		}
		cv, err := coerceYAML(path, f.Type, val)
		if err != nil {
			*errs = append(*errs, err)
			continue
		}
		out[k] = cv
		explicit[path] = true
	}
	return out
}

func joinPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// fieldName is a struct field's key: its mapstructure tag.
func fieldName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
	return name
}

func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); fieldName(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func unknownField(path, prefix, key string, t reflect.Type) error {
	reason := "unknown field"
	if strings.Contains(key, ".") {
		reason += " (YAML keys nest; they are not dotted)"
	} else if s := suggest(key, t); s != "" {
		reason += " (did you mean " + joinPath(prefix, s) + "?)"
	}
	return &FieldError{Path: path, Reason: reason}
}

// suggest returns the field of t closest to key (case-insensitive edit
// distance ≤ 2), or "".
func suggest(key string, t reflect.Type) string {
	best, bestD := "", 3
	for i := range t.NumField() {
		name := fieldName(t.Field(i))
		if d := editDistance(strings.ToLower(key), strings.ToLower(name)); d < bestD {
			best, bestD = name, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// leafType resolves a dotted key to the type of its (non-struct) field.
func leafType(key, raw string) (reflect.Type, error) {
	parts := strings.Split(key, ".")
	t := configType
	for i, p := range parts {
		prefix := strings.Join(parts[:i], ".")
		path := joinPath(prefix, p)
		f, ok := fieldByKey(t, p)
		if !ok {
			return nil, unknownField(path, prefix, p, t)
		}
		last := i == len(parts)-1
		switch {
		case last && f.Type.Kind() == reflect.Struct:
			return nil, &FieldError{Path: path, Reason: "is a section; set one of its fields, e.g. " +
				joinPath(path, fieldName(f.Type.Field(0))), Value: raw}
		case last:
			return f.Type, nil
		case f.Type.Kind() != reflect.Struct:
			next := joinPath(path, parts[i+1])
			return nil, &FieldError{Path: next, Reason: "unknown field (" + path + " is a value, not a section)"}
		}
		t = f.Type
	}
	panic("unreachable")
}

// parseSetValue converts a --set value to the field's Go type.
func parseSetValue(path string, t reflect.Type, raw string) (any, error) {
	s := strings.TrimSpace(raw)
	if t.Kind() == reflect.Slice {
		out := reflect.MakeSlice(t, 0, 0)
		if s == "" {
			return out.Interface(), nil
		}
		for i, part := range strings.Split(s, ",") {
			ev, err := parseScalar(fmt.Sprintf("%s[%d]", path, i), t.Elem(), strings.TrimSpace(part))
			if err != nil {
				return nil, err
			}
			out = reflect.Append(out, reflect.ValueOf(ev))
		}
		return out.Interface(), nil
	}
	return parseScalar(path, t, s)
}

func parseScalar(path string, t reflect.Type, s string) (any, error) {
	switch t.Kind() {
	case reflect.String:
		return s, nil
	case reflect.Int:
		n, err := strconv.ParseInt(s, 10, 0)
		if err != nil {
			if x, ok := wholeFloat(s); ok { // "1e6", as YAML reads it too
				return int(x), nil
			}
			return nil, &FieldError{Path: path, Reason: "must be an integer", Value: s}
		}
		return int(n), nil
	case reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			if x, ok := wholeFloat(s); ok && x >= 0 {
				return uint64(x), nil
			}
			return nil, &FieldError{Path: path, Reason: "must be a non-negative integer", Value: s}
		}
		return n, nil
	case reflect.Float64:
		return parseFloat(path, s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, &FieldError{Path: path, Reason: "must be true or false", Value: s}
		}
		return b, nil
	}
	panic(fmt.Sprintf("config: field %s has unsupported type %v", path, t))
}

// maxExactFloat is the largest magnitude up to which every integer is a
// float64 (2^53): a whole float within it is accepted as an integer.
const maxExactFloat = 1 << 53

// wholeFloat parses s as a float that is a whole number within
// ±maxExactFloat ("1e6", "2.0").
func wholeFloat(s string) (float64, bool) {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || !isWhole(x) {
		return 0, false
	}
	return x, true
}

// isWhole reports whether x is a whole number within ±maxExactFloat.
func isWhole(x float64) bool { return x == math.Trunc(x) && math.Abs(x) <= maxExactFloat }

// parseFloat reads a float field's value, refusing NaN, ±Inf and numbers
// beyond float64 ("1e999") with the field's range.
func parseFloat(path, s string) (any, error) {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, &FieldError{Path: path, Reason: "must be a number", Value: s}
	}
	if err != nil || !isFinite(x) {
		return nil, nonFinite(path, s)
	}
	return x, nil
}

// coerceYAML converts a decoded YAML value to the field's Go type.
func coerceYAML(path string, t reflect.Type, v any) (any, error) {
	switch t.Kind() {
	case reflect.String:
		switch x := v.(type) {
		case string:
			return x, nil
		case int, int64, uint64, float64:
			return fmt.Sprint(x), nil
		}
		return nil, &FieldError{Path: path, Reason: "must be a string", Value: v}
	case reflect.Int:
		switch x := v.(type) {
		case float64: // 1e6
			if isWhole(x) {
				return int(x), nil
			}
		case int:
			return x, nil
		case int64:
			if x >= math.MinInt && x <= math.MaxInt {
				return int(x), nil
			}
		case uint64:
			if x <= math.MaxInt {
				return int(x), nil
			}
		}
		return nil, &FieldError{Path: path, Reason: "must be an integer", Value: v}
	case reflect.Uint64:
		switch x := v.(type) {
		case float64:
			if x >= 0 && isWhole(x) {
				return uint64(x), nil
			}
		case int:
			if x >= 0 {
				return uint64(x), nil
			}
		case int64:
			if x >= 0 {
				return uint64(x), nil
			}
		case uint64:
			return x, nil
		}
		return nil, &FieldError{Path: path, Reason: "must be a non-negative integer", Value: v}
	case reflect.Float64:
		switch x := v.(type) {
		case int:
			return float64(x), nil
		case int64:
			return float64(x), nil
		case uint64:
			return float64(x), nil
		case float64:
			if !isFinite(x) { // .nan, .inf
				return nil, nonFinite(path, x)
			}
			return x, nil
		case string: // YAML reads NaN, Infinity, 1e999 as strings
			return parseFloat(path, x)
		}
		return nil, &FieldError{Path: path, Reason: "must be a number", Value: v}
	case reflect.Bool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, &FieldError{Path: path, Reason: "must be true or false", Value: v}
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			list = []any{v} // a scalar is a one-element list
		}
		out := reflect.MakeSlice(t, 0, len(list))
		for i, e := range list {
			ev, err := coerceYAML(fmt.Sprintf("%s[%d]", path, i), t.Elem(), e)
			if err != nil {
				return nil, err
			}
			out = reflect.Append(out, reflect.ValueOf(ev))
		}
		return out.Interface(), nil
	}
	panic(fmt.Sprintf("config: field %s has unsupported type %v", path, t))
}

// toMap converts a struct to nested maps keyed by field name, with leaves
// of their Go types, for viper.
func toMap(v reflect.Value) map[string]any {
	out := make(map[string]any, v.NumField())
	for i := range v.NumField() {
		f := v.Type().Field(i)
		fv := v.Field(i)
		if f.Type.Kind() == reflect.Struct {
			out[fieldName(f)] = toMap(fv)
		} else {
			out[fieldName(f)] = fv.Interface()
		}
	}
	return out
}
