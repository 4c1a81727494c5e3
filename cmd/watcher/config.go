package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/kelseyhightower/envconfig"

	"github.com/orderwatch/orderwatch/pipeline"
)

// envPrefix is the prefix of every configuration variable.
const envPrefix = pipeline.EnvPrefix

// The configuration is the pipeline's (package pipeline); main reads it
// from the environment.
type (
	Config      = pipeline.Config
	StartFrom   = pipeline.StartFrom
	ConfigError = pipeline.ConfigError
)

var configErr = pipeline.ConfigErrorf

// LoadConfig reads the configuration from the process environment and
// checks it. Every error names the variable.
func LoadConfig() (*Config, error) {
	c, err := envConfig()
	if err != nil {
		return nil, err
	}
	if err := readFiles(c); err != nil {
		return nil, err
	}
	return c, c.Validate()
}

// envConfig reads the configuration from the environment without checking
// it (`watcher state` needs only the state path and the HTTP address, not
// the service's credentials). A value that does not parse is an error
// naming the variable.
func envConfig() (*Config, error) {
	var c Config
	if err := envconfig.Process(envPrefix, &c); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			// KeyName is the whole variable name, prefix included.
			return nil, configErr("%s=%q: %v", pe.KeyName, pe.Value, pe.Err)
		}
		return nil, configErr("%v", err)
	}
	return &c, nil
}

// knownVars lists every variable the configuration reads (WATCHER_...).
func knownVars() []string {
	t := reflect.TypeFor[Config]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if key := t.Field(i).Tag.Get("envconfig"); key != "" {
			names = append(names, envPrefix+"_"+key)
		}
	}
	return names
}

// unknownVar is a WATCHER_* variable the configuration does not read, and
// the known variable closest to it.
type unknownVar struct{ name, closest string }

// unknownVars finds the WATCHER_* variables of environ (os.Environ's form)
// that the configuration does not know: a misspelt variable is otherwise
// silently ignored. Only names are looked at, never values (secrets).
func unknownVars(environ []string) []unknownVar {
	known := knownVars()
	var out []unknownVar
	for _, name := range setVars(environ) {
		if slices.Contains(known, name) {
			continue
		}
		closest := slices.MinFunc(known, func(a, b string) int {
			return editDistance(name, a) - editDistance(name, b)
		})
		out = append(out, unknownVar{name: name, closest: closest})
	}
	return out
}

// setVars lists the WATCHER_* variables set in environ (os.Environ's form),
// sorted; names only.
func setVars(environ []string) []string {
	var names []string
	for _, kv := range environ {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, envPrefix+"_") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// unknownVarsText says what is wrong with each unknown variable of the
// process environment, one line each.
func unknownVarsText() []string {
	var lines []string
	for _, u := range unknownVars(os.Environ()) {
		lines = append(lines, fmt.Sprintf("%s is not a variable the watcher knows (ignored); the closest known one is %s", u.name, u.closest))
	}
	return lines
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// readFiles resolves the _FILE variants of secrets (Kubernetes Secrets mounted as files).
func readFiles(c *Config) error {
	for _, f := range []struct {
		name      string
		file      string
		dst       *string
		valueName string
	}{
		{"PLENTY_PASSWORD_FILE", c.PlentyPasswordFile, &c.PlentyPassword, "PLENTY_PASSWORD"},
		{"NATS_PASSWORD_FILE", c.NATSPasswordFile, &c.NATSPassword, "NATS_PASSWORD"},
		{"NATS_TOKEN_FILE", c.NATSTokenFile, &c.NATSToken, "NATS_TOKEN"},
	} {
		if f.file == "" {
			continue
		}
		if *f.dst != "" {
			return configErr("%s_%s and %s_%s are both set; use one", envPrefix, f.valueName, envPrefix, f.name)
		}
		b, err := os.ReadFile(f.file)
		if err != nil {
			return configErr("%s_%s: %v", envPrefix, f.name, err)
		}
		*f.dst = strings.TrimRight(string(b), "\r\n")
	}
	return nil
}

// usageFormat renders envconfig's usage as the README's Markdown table.
const usageFormat = `| Variable | Default | Description |
|---|---|---|
{{range .}}| ` + "`{{usage_key .}}`" + ` | {{with usage_default .}}` + "`{{.}}`" + `{{end}} | {{usage_description .}} |
{{end}}`

// writeUsage prints the configuration table (watcher help; the README's table).
func writeUsage(w io.Writer) error {
	return envconfig.Usagef(envPrefix, &Config{}, w, usageFormat)
}
